# frozen_string_literal: true

require_relative "test_helper"

# Regressions, each named after its bug: interrupts (signals, Thread#kill, throw) around
# a recovering open and around close, a close racing another close, the conversion of
# batch arguments, copies that run out of memory, what :auto weighs, paths, and Hash-like
# return values.
class TestRegressions < Minitest::Test
  include SenjuTestHelper

  class Sig < StandardError; end

  RELEASING = %i[auto release].freeze

  # A file as a crash leaves it (not closed), 20,000 records: its open recovers it.
  def crashed_file(path)
    db = Senju::DB.open(path)
    db.set_many((0...20_000).to_h { |i| ["k#{i}", "v" * 50] })
    crashed = File.binread(path)
    db.close
    crashed
  end

  # Whether the file is closed and clean: it reopens (no LockedError), all its records
  # there, without a recovery (recovery_progress is called only while recovering).
  def assert_closed_clean(path, records, msg)
    calls = 0
    Senju::DB.open(path, recovery_progress: ->(_d, _t) { calls += 1 }) do |d|
      assert_equal records, d.size, msg
    end
    assert_equal 0, calls, "#{msg}: the file was left to recover again"
  end

  # Thread#kill and throw out of recovery_progress were dropped: the open ran on, calling
  # the callable again, and returned a handle to the killed thread (which then finished),
  # or to the block the throw meant to leave. The first jump is now kept like an exception:
  # no further call, the recovered database is closed, then the jump goes on.
  def test_kill_or_throw_in_recovery_progress_stops_the_open_and_closes_the_file
    path = db_path
    crashed = crashed_file(path)
    %i[auto release hold].each do |mode|
      File.binwrite(path, crashed)
      calls = 0
      started = Queue.new
      worker = Thread.new do
        Senju::DB.open(path, gvl: mode, recovery_progress: lambda { |_d, _t|
          calls += 1
          if calls == 1
            started << true
            sleep
          end
        }) { :opened }
        :finished
      end
      started.pop
      worker.kill
      assert_nil worker.value, "#{mode}: the killed thread went on"
      assert_equal 1, calls, "#{mode}: called again after the kill"
      assert_closed_clean(path, 20_000, "#{mode}/kill")

      File.binwrite(path, crashed)
      calls = 0
      got = catch(:stop) do
        Senju::DB.open(path, gvl: mode, recovery_progress: lambda { |_d, _t|
          calls += 1
          throw :stop, :thrown
        }) { :opened }
      end
      assert_equal :thrown, got, "#{mode}: the throw was dropped"
      assert_equal 1, calls, "#{mode}: called again after the throw"
      assert_closed_clean(path, 20_000, "#{mode}/throw")
    end
  end

  # recovery_progress was called from inside the released open (rb_thread_call_with_gvl),
  # whose way back into the released region handles pending interrupts: a trap that raised
  # there longjmp'd over the engine's frames and leaked the half-open store, its file and
  # its lock (later opens: LockedError). That needs the signal in a window of a few
  # instructions, so it is not reproduced here. The open now holds the GVL while it may
  # call back, and an interrupt reaches the callable under rb_protect: here a trap that
  # raises and a Thread#raise, in every mode; the open raises it after closing the file.
  def test_interrupt_in_recovery_progress_closes_the_file
    path = db_path
    crashed = crashed_file(path)
    old = trap(:USR1) { raise Sig, "trap" }
    %i[auto release hold].each do |mode|
      File.binwrite(path, crashed)
      err = assert_raises(Sig) do
        Senju::DB.open(path, gvl: mode, recovery_progress: lambda { |_d, _t|
          Process.kill(:USR1, Process.pid)
          sleep
        })
      end
      assert_equal "trap", err.message
      assert_closed_clean(path, 20_000, "#{mode}/trap")

      File.binwrite(path, crashed)
      opener = Thread.current
      err = assert_raises(Sig) do
        Senju::DB.open(path, gvl: mode, recovery_progress: lambda { |_d, _t|
          Thread.new { opener.raise(Sig, "raise") }.join
          sleep
        })
      end
      assert_equal "raise", err.message
      assert_closed_clean(path, 20_000, "#{mode}/raise")
    end
  ensure
    trap(:USR1, old || "DEFAULT")
  end

  # A second close while another thread's close was still writing the file returned at
  # once, closed? true; a reopen right after it raised LockedError. It now waits for the
  # first (the engine's close serializes them).
  def test_second_close_returns_once_the_first_has_closed
    path = db_path
    RELEASING.each do |mode|
      db = Senju::DB.open(path, gvl: mode, truncate: true)
      20.times { |j| db.set_many((0...1000).to_h { |i| ["k#{j}-#{i}", "v" * 4000] }) }
      first = Thread.new { db.close }
      Thread.pass until db.closed?
      db.close
      Senju::DB.open(path) { |d| assert_equal 20_000, d.size, mode }
      first.join
    end
  end

  # get_many and set_many took only Strings while [], []=, delete, key? and
  # compare_and_set also take objects with to_str; now they all convert the same way.
  def test_batches_take_to_str_objects_as_single_calls_do
    key = Class.new do
      def initialize(s)
        @s = s
      end

      def to_str
        @s
      end
    end
    %i[auto release hold].each do |mode|
      Senju::DB.open(memory: true, gvl: mode) do |db|
        db[key.new("a")] = "1"
        db.set_many({ key.new("b") => key.new("2"), "c" => "3" })
        assert_equal %w[1 2 3], db.get_many([key.new("a"), "b", key.new("c")])
        big = Array.new(3000) { |i| key.new("k#{i}") }
        db.set_many(big.to_h { |k| [k, "v"] })
        assert_equal ["v"] * 3000, db.get_many(big)
        err = assert_raises(TypeError) { db.get_many(["a", key.new("b"), 2]) }
        assert_equal "keys must be Strings, got Integer at index 2", err.message
        err = assert_raises(TypeError) { db.set_many({ key.new("a") => "1", "b" => :v }) }
        assert_equal "set_many needs String keys and values, got String => Symbol", err.message
        # A to_str that changes the array it is read from reads what is there.
        keys = ["a"]
        growing = Class.new { define_method(:to_str) { keys << "c" if keys.size < 3; "b" } }
        keys << growing.new
        assert_equal %w[1 2 3], db.get_many(keys)
      end
    end
  end

  # Opening in a directory that does not exist gave an IoError with errno nil: the engine
  # words that error itself and keeps only its kind (NotFound), which is ENOENT.
  def test_a_missing_directory_gives_io_error_with_enoent
    e = assert_raises(Senju::IoError) { Senju::DB.open(File.join(db_path, "missing", "x.sj")) }
    assert_equal Errno::ENOENT::Errno, e.errno, e.message
    assert_match(/does not exist/, e.message)
  end

  # A step of `each` copied up to 1000 pairs whatever their size (values may be up to
  # 1 GiB each); it now stops once it holds 4 MiB of keys and values (one pair may pass).
  def test_a_scan_step_of_large_values_copies_a_few
    Senju::DB.open(memory: true, shards: 1) do |db|
      20.times { |i| db["k#{i}"] = i.chr * (1 << 20) }
      pairs = db._cursor.next_pairs(1000).each_slice(2).to_a
      assert_equal 4, pairs.size, "1 MiB values and their keys: the fourth pair passes 4 MiB"
      seen = {}
      db.each { |k, v| seen[k] = v.bytesize }
      assert_equal 20, seen.size
      assert(seen.values.all? { |n| n == 1 << 20 })
    end
  end

  # The engine's messages named Rust options (`Builder::max_size`, `Builder::create(true)`),
  # and ReadOnlyError's named `read_only` where the keyword is readonly:.
  def test_messages_name_the_ruby_keywords
    Senju::DB.open(memory: true, max_size: 1 << 20) do |db|
      e = assert_raises(Senju::FullError) { 1000.times { |i| db["k#{i}"] = "x" * 10_000 } }
      refute_match(/Builder::/, e.message)
      assert_match(/max_size:/, e.message)
    end
    e = assert_raises(Senju::NotFoundError) { Senju::DB.open(db_path("none.sj"), create: false) }
    refute_match(/Builder::/, e.message)
    Senju::DB.open(db_path("ro.sj")) { |db| db["k"] = "v" }
    Senju::DB.open(db_path("ro.sj"), readonly: true) do |db|
      e = assert_raises(Senju::ReadOnlyError) { db["k"] = "w" }
      refute_match(/read_only/, e.message)
      assert_match(/readonly: true/, e.message)
    end
  end

  # The value: larger than the room left under the address-space limit, and than the 64 MiB
  # a thread's malloc arena reserves ahead (a smaller copy could be cut from that).
  OOM_VALUE = 96 << 20

  # Runs the block in a child made by fork; returns what it wrote and its exit status.
  def in_child
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      out = begin
        yield
      rescue Exception => e # anything, so that the parent sees it
        "child raised #{e.class}: #{e.message}"
      end
      wr.write(out)
      wr.close
      exit!(0) # not minitest's at_exit
    end
    wr.close
    out = rd.read
    rd.close
    [out, Process.wait2(pid)[1]]
  end

  # The address space mapped now, in bytes.
  def mapped_bytes
    File.read("/proc/self/status")[/^VmSize:\s*(\d+)/, 1].to_i << 10
  end

  # Copies the binding made with Rust's infallible allocation (`to_vec` of a value read or
  # written, the growth of get_many's and set_many's buffers) aborted the process when the
  # memory ran out, and the engine's StorageError::OutOfMemory (a scan's copy) was a
  # Senju::Error whose message said to call `get_with`. Each raises NoMemoryError now, which
  # names the bytes needed, and leaves the store as it was (the delete removed nothing).
  # Under an address-space limit (RLIMIT_AS), in a child process.
  def test_a_value_larger_than_the_memory_left_raises_no_memory_error
    skip "needs fork and /proc" unless Process.respond_to?(:fork) && File.exist?("/proc/self/status")
    %i[auto release hold].each do |mode|
      out, status = in_child do
        db = Senju::DB.open(memory: true, gvl: mode, shards: 1)
        big = "x".b * OOM_VALUE
        db["big"] = big
        db["small"] = "s"
        calls = {
          "[]" => -> { db["big"] },
          "get_many" => -> { db.get_many(%w[small big]) },
          "each" => -> { db.each { nil } },
          "delete" => -> { db.delete("big") },
          "set_many" => -> { db.set_many({ "other" => big }) },
        }
        3.times { calls.first(3).each { |_, call| call.call } } # whatever is made lazily
        GC.start
        soft, hard = Process.getrlimit(:AS)
        Process.setrlimit(:AS, mapped_bytes + (16 << 20), hard)
        got = calls.map do |name, call|
          call.call
          "#{name}: returned"
        rescue NoMemoryError => e
          n = e.message[/could not allocate (\d+) bytes/, 1].to_i
          "#{name}: NoMemoryError#{n.between?(OOM_VALUE, OOM_VALUE + 64) ? '' : " #{e.message}"}"
        rescue StandardError => e
          "#{name}: #{e.class}: #{e.message}"
        end
        Process.setrlimit(:AS, soft, hard)
        got << "intact: #{db['big'] == big} #{db.key?('other')}"
        got.join("\n")
      end
      refute status.signaled?, "#{mode}: the child died by signal #{status.termsig}"
      assert_equal ["[]: NoMemoryError", "get_many: NoMemoryError", "each: NoMemoryError",
                    "delete: NoMemoryError", "set_many: NoMemoryError", "intact: true false"],
                   out.split("\n"), mode
    end
  end

  # The auto_releases counted by stats (the stretches of work that :auto ran with the GVL
  # released) during the block, less the one of the stats call that reads them.
  def auto_releases_of(db)
    before = db.stats[:auto_releases]
    yield
    db.stats[:auto_releases] - before - 1
  end

  # Under gvl: :auto, calls were weighed by their items, not by the bytes they move, so
  # long ones kept the GVL: stats (which visits every shard) was always held, delete was
  # too, append was weighed by its suffix (the engine rewrites the whole value), get_many by
  # its keys (not the values it copies), set_many by its values (not its keys). Each is
  # weighed by its bytes now: released when they are many, held when they are few.
  def test_auto_weighs_calls_by_the_bytes_they_move
    Senju::DB.open(memory: true, gvl: :auto) do |db|
      first = db.stats[:auto_releases]
      assert_equal 1, db.stats[:auto_releases] - first, "stats is released"
      big = "x" * (1 << 20)
      db.set_many({ "b1" => big, "b2" => big, "b3" => big, "s" => "v" })
      keys = Array.new(200) { |i| format("%0400d", i) } # 80 KB of keys
      [
        ["get_many", -> { db.get_many(%w[s s]) }, -> { db.get_many(%w[s b1 b2]) }],
        ["append", -> { db.append("s", "w") }, -> { db.append("b1", "w") }],
        ["delete", -> { db.delete("s") }, -> { db.delete("b2") }],
        ["set_many", -> { db.set_many(keys.first(2).to_h { |k| [k, "v"] }) },
         -> { db.set_many(keys.to_h { |k| [k, "v"] }) }],
      ].each do |name, light, heavy|
        assert_equal 0, auto_releases_of(db, &light), "#{name} of a few bytes is held"
        assert_operator auto_releases_of(db, &heavy), :>=, 1, "#{name} of many bytes is released"
      end
      assert_equal ["#{big}w", nil, big], db.get_many(%w[b1 b2 b3])
      assert_equal 200, keys.count { |k| db[k] == "v" }
    end
  end

  # get_many copied up to 1000 values per step whatever their size (values may be up to
  # 1 GiB each); a step now stops once it holds 4 MiB of values (one value may pass), as a
  # scan's step does. Counted in steps (stats[:chunks]: the steps that asked for more).
  def test_a_get_many_step_of_large_values_copies_a_few
    %i[hold release].each do |mode|
      Senju::DB.open(memory: true, gvl: mode) do |db|
        keys = Array.new(20) { |i| "k#{i}" }
        keys.each_with_index { |k, i| db[k] = i.chr * (1 << 20) }
        before = db.stats[:chunks]
        values = db.get_many(keys)
        assert_equal 4, db.stats[:chunks] - before, "#{mode}: 5 steps of 4 values of 1 MiB"
        assert_equal(keys.each_index.map { |i| i.chr * (1 << 20) }, values, mode)
      end
    end
  end

  # DB#path replaced bytes that are not valid UTF-8 with U+FFFD, so it named another file;
  # it is the bytes given now (binary where they are not valid in the filesystem encoding).
  # Paths are taken as File.open takes them (File.path): objects with to_str too, and a NUL
  # byte is ArgumentError.
  def test_path_is_the_bytes_it_was_opened_with
    raw = File.join(tmpdir.b, "x\xff.sj".b)
    path = Senju::DB.open(raw) do |db|
      db["k"] = "v"
      db.path
    end
    assert_equal raw, path
    assert_equal Encoding::ASCII_8BIT, path.encoding
    Senju::DB.open(path, create: false) { |db| assert_equal "v", db["k"] }

    utf = File.join(tmpdir, "\u00e9.sj")
    fs = Encoding.find("filesystem")
    encoding = utf.dup.force_encoding(fs).valid_encoding? ? fs : Encoding::ASCII_8BIT
    Senju::DB.open(utf) do |db|
      assert_equal utf.b, db.path.b
      assert_equal encoding, db.path.encoding
    end

    require "pathname"
    to_str = Object.new
    to_str.define_singleton_method(:to_str) { utf }
    [Pathname.new(utf), to_str].each do |p|
      Senju::DB.open(p, create: false) { |db| assert_equal utf.b, db.path.b }
    end
    assert_raises(ArgumentError) { Senju::DB.open("#{utf}\0more") }
    e = assert_raises(TypeError) { Senju::DB.open(42) }
    assert_equal "path must be a String or Pathname, not Integer", e.message
  end

  # size was the one method that did not check for a fork: in a child it read the parent's
  # counters (a stale copy) where every other call raises ForkedError.
  def test_size_in_a_forked_child_raises_forked_error
    skip "needs fork" unless Process.respond_to?(:fork)
    Senju::DB.open(memory: true) do |db|
      db["k"] = "v"
      out, status = in_child do
        db.size.to_s
      rescue Senju::ForkedError => e
        e.class.name
      end
      assert_predicate status, :success?
      assert_equal "Senju::ForkedError", out
      assert_equal 1, db.size
    end
  end

  # clear returned nil where Hash#clear returns self, and update/merge! ignored a block
  # where Hash#update calls it for each key present: value = block.call(key, old, new).
  def test_clear_returns_self_and_update_takes_a_block
    Senju::DB.open(memory: true) do |db|
      db["a"] = "1"
      assert_same db, db.clear
      assert_equal 0, db.size
      db["a"] = "1"
      seen = []
      got = db.update({ "a" => "2", "b" => "3" }) do |k, old, new|
        seen << [k, old, new]
        "#{old}+#{new}"
      end
      assert_same db, got
      assert_equal [["a", "1", "2"]], seen
      assert_equal({ "a" => "1+2", "b" => "3" }, db.to_h)
      db.merge!({ "a" => "x" }, { "c" => "4" }) { |_k, old, _new| old }
      assert_equal({ "a" => "1+2", "b" => "3", "c" => "4" }, db.to_h)
      assert_raises(TypeError) { db.update({ "a" => "y" }) { nil } }
      assert_equal "1+2", db["a"]
    end
  end

  # `db[key]` and `delete` copy values of up to 128 bytes on the stack, longer ones to the
  # heap, and read values of 64 KiB or more straight into the new String: every length
  # around those two borders comes back whole, in each GVL mode.
  def test_values_around_the_copy_borders_round_trip
    lengths = [0, 1, 127, 128, 129, 255, 256, 4096, 65_535, 65_536, 65_537]
    %i[auto release hold].each do |gvl|
      Senju::DB.open(db_path("borders-#{gvl}.sj"), gvl: gvl) do |db|
        lengths.each do |n|
          value = Random.new(n).bytes(n)
          db["k#{n}"] = value
          assert_equal value, db["k#{n}"], "#{gvl}: get of #{n} bytes"
          assert_equal Encoding::BINARY, db["k#{n}"].encoding
          assert db.key?("k#{n}")
        end
        lengths.each do |n|
          assert_equal Random.new(n).bytes(n), db.delete("k#{n}"), "#{gvl}: delete of #{n} bytes"
          assert_nil db["k#{n}"]
          refute db.key?("k#{n}")
        end
      end
    end
  end
end
