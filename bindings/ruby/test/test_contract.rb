# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"

# The Hash-like contract, checked against a Hash model, plus encodings, wrong types,
# closed handles, the block form, persistence and the error classes.
class TestContract < Minitest::Test
  include SenjuTestHelper

  def assert_value(expected, actual)
    expected.nil? ? assert_nil(actual) : assert_equal(expected, actual)
  end

  def test_randomized_against_a_hash_model
    rng = Random.new(20_261_122)
    %i[auto release hold].each do |gvl|
      Senju::DB.open(db_path("model-#{gvl}.sj"), gvl: gvl) do |db|
        model = {}
        keys = Array.new(200) { |i| "k#{i}" }
        3000.times do
          k = keys.sample(random: rng)
          case rng.rand(10)
          when 0..2
            v = "v#{rng.rand(1_000_000)}" * rng.rand(1..4)
            db[k] = v
            model[k] = v
          when 3
            assert_value model.delete(k), db.delete(k)
          when 4
            assert_equal model.key?(k), db.key?(k)
          when 5
            s = "+#{rng.rand(100)}"
            db.append(k, s)
            model[k] = (model[k] || +"") + s
          when 6
            new = rng.rand(2).zero? ? nil : "cas#{rng.rand(10)}"
            expected = rng.rand(2).zero? ? model[k] : "other"
            swapped = db.compare_and_set(k, expected, new)
            assert_equal model[k] == expected, swapped
            if swapped
              new ? model[k] = new : model.delete(k)
            end
          when 7
            ks = keys.sample(rng.rand(1..50), random: rng)
            assert_equal ks.map { |x| model[x] }, db.get_many(ks)
          when 8
            pairs = keys.sample(rng.rand(1..80), random: rng).to_h { |x| [x, "m#{rng.rand(99)}"] }
            db.set_many(pairs)
            model.update(pairs)
          else
            assert_value model[k], db[k]
          end
        end
        assert_equal model.size, db.size
        assert_equal model, db.to_h
        assert_equal model.keys.sort, db.keys.sort
        assert_equal model.values.sort, db.values.sort
      end
    end
  end

  def test_hash_like_methods
    Senju::DB.open(memory: true) do |db|
      assert_empty db
      db.store("a", "1")
      db["b"] = "2"
      assert_equal 2, db.length
      assert db.include?("a") && db.member?("b") && db.has_key?("a")
      refute db.key?("zz")
      assert_nil db["zz"]
      assert_equal "1", db.fetch("a")
      assert_equal "d", db.fetch("zz", "d")
      assert_equal "zz!", db.fetch("zz") { |k| "#{k}!" }
      err = assert_raises(KeyError) { db.fetch("zz") }
      assert_equal "zz", err.key
      assert_same db, err.receiver
      assert_raises(ArgumentError) { db.fetch("a", 1, 2) }
      assert_equal({ "a" => "1", "b" => "2" }, db.to_h)
      assert_equal [%w[a 1], %w[b 2]], db.sort
      assert_equal %w[b], db.select { |_, v| v == "2" }.map(&:first)
      enum = db.each
      assert_kind_of Enumerator, enum
      assert_equal 2, enum.size
      assert_same db, db.each { nil }
      assert_nil db.delete("zz")
      assert_equal "none zz", db.delete("zz") { |k| "none #{k}" }
      assert_same db, db.update("c" => "3")
      assert_same db, db.merge!("d" => "4")
      assert_equal ["1", nil, "4"], db.values_at("a", "zz", "d")
      assert_equal %w[a b c d], db.each_key.sort
      assert_equal %w[1 2 3 4], db.each_value.to_a.sort
      assert_equal 4, db.each_key.size
      assert_equal "4", db.delete("d") { flunk "the block runs only for a missing key" }
      db.clear
      assert_equal 0, db.size
      assert_equal :auto, db.gvl
    end
  end

  def test_each_crosses_chunks
    Senju::DB.open(memory: true, gvl: :release) do |db|
      pairs = Array.new(5500) { |i| ["key#{i}", "value#{i}"] }.to_h
      db.set_many(pairs)
      seen = {}
      db.each { |k, v| seen[k] = v }
      assert_equal pairs, seen
    end
  end

  def test_binary_out_any_encoding_in
    Senju::DB.open(memory: true) do |db|
      db["clé"] = "值"
      value = db["clé"]
      assert_equal Encoding::BINARY, value.encoding
      assert_equal "值".b, value
      assert_equal "值".b, db["clé".b] # the same bytes are the same key
      raw = "\xff\x00\xfe".b
      db[raw] = raw
      assert_equal raw, db[raw]
      assert_equal ["clé".b, raw].sort, db.keys.sort
      assert(db.keys.all? { |k| k.encoding == Encoding::BINARY })
      db[""] = ""
      assert_equal "", db[""]
    end
  end

  def test_wrong_types_raise_type_error
    Senju::DB.open(memory: true) do |db|
      assert_raises(TypeError) { db[1] }
      assert_raises(TypeError) { db[:sym] }
      assert_raises(TypeError) { db["k"] = 1 }
      assert_raises(TypeError) { db["k"] = nil }
      assert_raises(TypeError) { db.get_many("k") }
      assert_raises(TypeError) { db.get_many(["k", 2]) }
      assert_raises(TypeError) { db.set_many([%w[k v]]) }
      assert_raises(TypeError) { db.set_many({ "k" => 1 }) }
      assert_raises(TypeError) { db.compare_and_set("k", 1, "v") }
      assert_raises(TypeError) { db.append("k", nil) }
      assert_equal 0, db.size
    end
    assert_raises(TypeError) { Senju::DB.open(123) }
    assert_raises(TypeError) { Senju::DB.open(memory: true, shards: "8") }
    assert_raises(ArgumentError) { Senju::DB.open(memory: true, gvl: :sometimes) }
    assert_raises(ArgumentError) { Senju::DB.open }
    assert_raises(ArgumentError) { Senju::DB.open(memory: true, readonly: true) }
    assert_raises(Senju::InvalidOptionError) { Senju::DB.open(memory: true, shards: 3) }
    assert_raises(NoMethodError) { Senju::DB.new }
  end

  def test_closed_handle_raises_closed_error
    db = Senju::DB.open(db_path)
    db["k"] = "v"
    refute db.closed?
    db.close
    assert db.closed?
    db.close # a second close does nothing
    [
      -> { db["k"] }, -> { db["k"] = "v" }, -> { db.delete("k") }, -> { db.key?("k") },
      -> { db.size }, -> { db.get_many(["k"]) }, -> { db.set_many({ "k" => "v" }) },
      -> { db.compare_and_set("k", nil, "v") }, -> { db.append("k", "v") }, -> { db.sync },
      -> { db.rebuild }, -> { db.stats }, -> { db.keys }, -> { db.each { nil } }, -> { db.clear }
    ].each do |call|
      assert_raises(Senju::ClosedError) { call.call }
    end
    assert_kind_of Senju::Error, Senju::ClosedError.new
    assert_operator Senju::Error, :<, StandardError
  end

  def test_block_form_closes_on_exception
    seen = nil
    err = assert_raises(RuntimeError) do
      Senju::DB.open(db_path) do |db|
        seen = db
        db["k"] = "v"
        raise "boom"
      end
    end
    assert_equal "boom", err.message
    assert seen.closed?
    # The lock was released: the file opens again, with the data.
    assert_equal "v", Senju::DB.open(db_path) { |db| db["k"] }
    assert_equal 42, Senju::DB.open(db_path) { 42 }
  end

  def test_persistence_truncate_and_sync
    Senju::DB.open(db_path, shards: 8) do |db|
      1000.times { |i| db["k#{i}"] = "v#{i}" * 10 }
      db.delete("k0")
      db.sync
      db.sync(hard: true)
    end
    Senju::DB.open(db_path) do |db|
      assert_equal 999, db.size
      assert_nil db["k0"]
      assert_equal "v999" * 10, db["k999"]
      assert_equal 8, db.stats[:shards]
      500.times { |i| db.delete("k#{i}") }
      db.rebuild
      assert_equal 500, db.size
      assert_equal "v500" * 10, db["k500"]
    end
    Senju::DB.open(db_path, truncate: true) { |db| assert_equal 0, db.size }
    assert_raises(TypeError) { Senju::DB.open(db_path, auto_rebuild: "1") }
    assert_raises(Senju::NotFoundError) { Senju::DB.open(db_path("missing.sj"), create: false) }
    e = assert_raises(Senju::IoError) { Senju::DB.open(db_path("no-such-dir/x.sj")) }
    assert_includes e.message, "no-such-dir does not exist"
  end

  # In a child limited to 7 MiB files (RLIMIT_FSIZE, SIGXFSZ ignored, so growth fails with
  # EFBIG as a full disk fails with ENOSPC): the write that needed the space raises IoError
  # carrying errno, and every earlier write is kept.
  def test_a_file_that_cannot_grow_raises_io_error_with_errno
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "senju"
      trap("XFSZ", "IGNORE")
      Process.setrlimit(:FSIZE, 7 << 20, Process::RLIM_INFINITY)
      db = Senju::DB.open(ARGV[0], shards: 4)
      n = 0
      begin
        loop { db[format("%08d", n)] = "v" * 4000; n += 1 }
      rescue Senju::IoError => e
        ok = (0...n).all? { |i| db[format("%08d", i)] == "v" * 4000 }
        puts [n, e.errno, ok].join(" ")
      end
    RUBY
    out = IO.popen([RbConfig.ruby, "-I", lib, "-e", script, db_path("limit.sj")], &:read)
    n, errno, ok = out.split
    assert_operator n.to_i, :>, 1000
    assert_equal Errno::EFBIG::Errno, errno.to_i
    assert_equal "true", ok
    Senju::DB.open(db_path("limit.sj")) { |db| assert_equal n.to_i, db.size }
  end

  def test_open_errors_map_to_classes
    File.write(db_path("junk.sj"), "not a database" * 1000)
    assert_raises(Senju::NotADatabaseError) { Senju::DB.open(db_path("junk.sj")) }
    Senju::DB.open(db_path) do |db|
      err = assert_raises(Senju::LockedError) { Senju::DB.open(db_path) }
      assert_match(/already open in this process \(pid #{Process.pid}\)/, err.message)
      assert_raises(Senju::TooLargeError) { db["k" * (1024 * 1024 + 1)] = "v" }
    end
  end

  def test_set_many_checks_every_pair_before_writing
    Senju::DB.open(db_path) do |db|
      # The long key comes after more than one chunk (1000 pairs) of good ones.
      pairs = (0...2500).to_h { |i| ["k#{i}", "v#{i}"] }
      pairs["k" * (1024 * 1024 + 1)] = "v"
      err = assert_raises(Senju::TooLargeError) { db.set_many(pairs) }
      assert_match(/key/, err.message)
      assert_equal 0, db.size
      db.set_many(pairs.first(2500).to_h)
      assert_equal 2500, db.size
      assert_equal "v2499", db["k2499"]
    end
  end

  def test_readonly_open_of_an_unclean_file_needs_recovery
    path = db_path
    pid = fork do
      db = Senju::DB.open(path)
      db["k"] = "v"
      exit!(0) # no close: the file stays marked dirty
    end
    Process.wait(pid)
    assert_raises(Senju::NeedsRecoveryError) { Senju::DB.open(db_path, readonly: true) }
    assert_equal "v", Senju::DB.open(db_path) { |db| db["k"] } # a writer recovers it
    assert_equal "v", Senju::DB.open(db_path, readonly: true) { |db| db["k"] }
  end

  # A handle belongs to the process that opened it. Before this was handled, a child that
  # returned normally from fork (Ruby frees every object at exit, which closed the child's
  # copy of the handle) cut the parent's file to the child's view of its end and released
  # the parent's lock; the parent then died of SIGBUS at its next write.
  def test_a_forked_child_can_neither_use_nor_damage_the_parents_database
    path = db_path
    db = Senju::DB.open(path)
    1000.times { |i| db["a#{i}"] = "x" * 100 }
    Process.wait(fork { exit 0 })
    assert_equal 0, $?.exitstatus
    assert_raises(Senju::LockedError) { Senju::DB.open(path) }

    r, w = IO.pipe
    pid = fork do
      r.close
      reports = []
      [-> { db["a1"] }, -> { db["c"] = "child" }, -> { db.get_many(%w[a1 a2]) },
       -> { db.keys }, -> { db.sync }].each do |call|
        call.call
        reports << "no error"
      rescue Senju::ForkedError => e
        reports << (e.message.include?("opened by process #{Process.ppid}") ? "forked" : e.message)
      end
      w.write(reports.join(","))
      exit 0
    end
    w.close
    Process.wait(pid)
    assert_equal 0, $?.exitstatus
    assert_equal (["forked"] * 5).join(","), r.read

    100_000.times { |i| db["b#{i}"] = "y" * 100 } # far past the child's view of the end
    db.close
    Senju::DB.open(path) do |d|
      assert_equal 101_000, d.size
      assert_nil d["c"]
    end
  ensure
    db&.close
  end

  def test_recovery_progress_is_reported_and_its_exception_raised
    path = db_path
    db = Senju::DB.open(path)
    20_000.times { |i| db["k#{i}"] = "v" * 50 }
    crashed = File.binread(path) # as a crash leaves it: not closed
    db.close
    calls = []
    Senju::DB.open(path, recovery_progress: ->(d, t) { calls << [d, t] }) { nil }
    assert_empty calls # a clean open recovers nothing
    %i[auto release hold].each do |mode|
      File.binwrite(path, crashed)
      calls = []
      Senju::DB.open(path, gvl: mode, recovery_progress: ->(d, t) { calls << [d, t] }) do |d|
        assert_equal 20_000, d.size
      end
      total = calls.first[1]
      assert_equal [0, total], calls.first
      assert_equal [total, total], calls.last
      assert_operator total, :>, 20_000 * 50
      assert(calls.each_cons(2).all? { |a, b| a[0] <= b[0] })

      File.binwrite(path, crashed)
      err = assert_raises(ArgumentError) do
        Senju::DB.open(path, gvl: mode, recovery_progress: ->(_d, _t) { raise ArgumentError, "stop" })
      end
      assert_equal "stop", err.message
      Senju::DB.open(path) { |d| assert_equal 20_000, d.size } # recovered, closed cleanly
    end
    assert_raises(TypeError) { Senju::DB.open(path, recovery_progress: 3) }
  end

  def test_readonly_handles_share_and_refuse_writes
    Senju::DB.open(db_path) { |db| db["k"] = "v" }
    a = Senju::DB.open(db_path, readonly: true)
    b = Senju::DB.open(db_path, readonly: true)
    assert_equal "v", a["k"]
    assert_equal "v", b["k"]
    assert_raises(Senju::ReadOnlyError) { a["k"] = "w" }
    assert_raises(Senju::ReadOnlyError) { b.delete("k") }
    assert_raises(Senju::LockedError) { Senju::DB.open(db_path) }
  ensure
    a&.close
    b&.close
  end

  def test_large_values_round_trip_in_every_mode
    big = Random.new(7).bytes(200_000)
    %i[auto release hold].each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl) do |db|
        db["big"] = big
        assert_equal big, db["big"]
        db.append("big", big)
        assert_equal big + big, db["big"]
        assert db.compare_and_set("big", big + big, big)
        db.set_many({ "a" => big, "b" => big })
        assert_equal [big, big], db.get_many(%w[a b])
      end
    end
  end

  # A 1-byte threshold: a shard is rebuilt in the background whenever its dead records
  # outweigh its live ones. The wait is a liveness bound, not a measurement.
  def test_auto_rebuild_reclaims_overwritten_values
    Senju::DB.open(db_path, shards: 4, auto_rebuild: 1) do |db|
      50.times do |r|
        # Removed first: removed records are never recycled (their marks must stay), so a
        # rebuild has dead records to reclaim from the first round on.
        32.times { |i| db.delete("k#{i}") }
        db.set_many((0...32).to_h { |i| ["k#{i}", r.chr * 2000] })
      end
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 120
      while db.stats[:auto_rebuilds].zero?
        assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC), :<, deadline, db.stats.inspect
        sleep 0.005
      end
      refute db.stats.key?(:auto_rebuild_error)
      assert_equal 49.chr * 2000, db["k7"]
    end
    Senju::DB.open(db_path, shards: 4, auto_rebuild: 0) do |db|
      20.times do |r|
        # Removed before they are set again: removed records stay (their marks keep older
        # records dead), so no chunk of theirs is recycled either.
        32.times { |i| db.delete("k#{i}") }
        db.set_many((0...32).to_h { |i| ["k#{i}", r.chr * 2000] })
      end
      assert_equal 0, db.stats[:auto_rebuilds]
      assert_operator db.stats[:dead_bytes], :>, 19 * 32 * 2000
    end
  end
end
