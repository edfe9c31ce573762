# frozen_string_literal: true

require_relative "test_helper"

# Threads and the GVL: concurrent use against a model, close racing busy threads,
# Thread#kill / Thread#raise cancelling long calls (counted in chunks, never timed), and
# calls from a non-main Ractor.
class TestThreads < Minitest::Test
  include SenjuTestHelper

  MODES = %i[auto release hold].freeze

  # 8 threads on 16 shared counters and logs: every compare_and_set increment and every
  # append each thread made must be in the final state, no more, no fewer.
  def test_eight_threads_on_overlapping_keys_match_a_model
    MODES.each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl) do |db|
        keys = Array.new(16) { |i| "counter#{i}" }
        threads = Array.new(8) do |t|
          Thread.new do
            rng = Random.new(t)
            made = Hash.new(0)
            400.times do |i|
              k = keys.sample(random: rng)
              loop do # compare-and-set increment
                old = db[k]
                break if db.compare_and_set(k, old, ((old || "0").to_i + 1).to_s)
              end
              made[k] += 1
              db.append("log-#{k}", "#{t},")
              db.set_many({ "last-#{t}" => i.to_s, "mine-#{t}-#{i % 7}" => k }) if i % 10 == 0
              db.get_many(keys) if i % 25 == 0
            end
            made
          end
        end
        totals = Hash.new(0)
        per_thread = threads.map(&:value)
        per_thread.each { |made| made.each { |k, n| totals[k] += n } }
        keys.each do |k|
          assert_equal totals[k], (db[k] || "0").to_i, "#{gvl}: counter #{k}"
          log = (db["log-#{k}"] || "").split(",").tally
          per_thread.each_with_index do |made, t|
            assert_equal made[k], log.fetch(t.to_s, 0), "#{gvl}: appends of thread #{t} to #{k}"
          end
        end
        8.times { |t| assert_equal "390", db["last-#{t}"] }
        assert_equal 3200, totals.values.sum
      end
    end
  end

  # close() while 4 threads hammer the handle, 100 times: every thread ends with
  # ClosedError (never a crash or another error), and the handle is closed afterwards.
  def test_close_racing_busy_threads
    100.times do |round|
      gvl = MODES[round % 3]
      file = (round % 10).zero?
      db = file ? Senju::DB.open(db_path("race#{round}.sj"), gvl: gvl) : Senju::DB.open(memory: true, gvl: gvl)
      db.set_many(Array.new(2000) { |i| ["k#{i}", "v#{i}"] }.to_h)
      started = Queue.new
      threads = Array.new(4) do |t|
        Thread.new do
          ops = 0
          begin
            loop do
              k = "k#{(ops * 7 + t) % 2000}"
              case ops % 5
              when 0 then db[k] = "w#{ops}"
              when 1 then db[k]
              when 2 then db.get_many(Array.new(100) { |i| "k#{i}" })
              when 3 then db.set_many(Array.new(100) { |i| ["k#{i}", "x"] }.to_h)
              else db.each { nil }
              end
              ops += 1
              started << t if ops == 1
              Thread.pass # lets the main thread in soon under gvl: :hold too
            end
          rescue Senju::ClosedError
            ops
          end
        end
      end
      4.times { started.pop }
      db.close
      counts = threads.map(&:value) # re-raises anything but ClosedError
      assert(counts.all?(&:positive?), "round #{round}: every thread ran")
      assert db.closed?
      assert_raises(Senju::ClosedError) { db["k1"] }
    end
  end

  # How many times the long calls below repeat. Under :hold the main thread runs only when the
  # worker yields at a timeslice (every 100 ms), and one pass can take less than that, so the
  # worker must still be busy for many passes when the raise or kill comes.
  PASSES = 50

  # The chunks (the handle's stats[:chunks]) one call of `pass` runs.
  def chunks_per_pass(db, pass)
    start = db.stats[:chunks]
    pass.call
    db.stats[:chunks] - start
  end

  # Thread#raise during a big set_many: the call stops within a few chunks of the raise.
  # Progress is counted in chunks run (the handle's stats[:chunks]), never in time.
  def test_raise_stops_a_big_batch_within_a_few_chunks
    pairs = Array.new(400_000) { |i| ["key#{i}", "v"] }.to_h
    MODES.each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl) do |db|
        pass = -> { db.set_many(pairs) }
        per_pass = chunks_per_pass(db, pass)
        start = db.stats[:chunks]
        worker = Thread.new do
          Thread.current.report_on_exception = false
          PASSES.times { pass.call }
          :finished
        end
        Thread.pass until db.stats[:chunks] > start || !worker.alive?
        # Counted from when Thread#raise returns (it has reached the worker's unblocking
        # function or interrupt flag by then), not from before the call: on a loaded machine
        # this thread can lose the CPU between the two while the worker runs on.
        worker.raise(Interrupt, "stop")
        before = db.stats[:chunks]
        assert_raises(Interrupt) { worker.value }
        ran = db.stats[:chunks] - start
        assert_operator db.stats[:chunks] - before, :<=, 8, "#{gvl}: stopped within 8 chunks"
        assert_operator ran, :<, PASSES * per_pass, "#{gvl}: the batch was cut short"
      end
    end
  end

  # Thread#raise during a rebuild (gvl: :auto and :release, which release the GVL for it):
  # the rebuild stops before its next shard, commits the shards copied so far, and the
  # raise takes effect. A rebuild stopped that way counts one chunk (stats[:chunks]); one
  # that ran to its end, as every rebuild did before, counts none. A raise can also land
  # between two rebuilds (a few microseconds of each pass), so a round whose stop was not
  # counted is tried again.
  def test_raise_stops_a_rebuild_between_shards
    records = Array.new(200_000) { |i| ["key#{i}", "value #{i}"] }.to_h
    %i[auto release].each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl, shards: 256) do |db|
        db.set_many(records)
        stopped = 5.times.any? do
          start = db.stats[:chunks]
          worker = Thread.new do
            Thread.current.report_on_exception = false
            PASSES.times { db.rebuild }
            :finished
          end
          sleep 0.02 # lets the worker into a rebuild; not an assertion
          worker.raise(Interrupt, "stop")
          assert_raises(Interrupt) { worker.value }
          db.stats[:chunks] - start == 1
        end
        assert stopped, "#{gvl}: no raise stopped a rebuild partway"
        assert_equal records.size, db.size
        assert_equal "value 123", db["key123"]
        db.rebuild
        assert_equal "value 199999", db["key199999"]
      end
    end
  end

  # Thread#kill during a long native scan (db.keys) and a long get_many: each stops within a
  # few chunks, counted by the handle's chunk counter (stats[:chunks]).
  def test_kill_stops_a_long_scan_and_a_long_batch_within_a_few_chunks
    keys = Array.new(300_000) { |i| "key#{i}" }
    MODES.each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl, shards: 512) do |db|
        db.set_many(keys.to_h { |k| [k, "v"] })
        [-> { db.keys }, -> { db.get_many(keys) }].each_with_index do |pass, which|
          per_pass = chunks_per_pass(db, pass)
          start = db.stats[:chunks]
          worker = Thread.new do
            PASSES.times { pass.call }
            :finished
          end
          Thread.pass until db.stats[:chunks] > start || !worker.alive?
          worker.kill # counted from its return, as in the test above
          before = db.stats[:chunks]
          assert_nil worker.value, "#{gvl}/#{which}: killed, not finished"
          ran = db.stats[:chunks] - start
          assert_operator db.stats[:chunks] - before, :<=, 8, "#{gvl}/#{which}: stopped within 8 chunks"
          assert_operator ran, :<, PASSES * per_pass, "#{gvl}/#{which}: the call was cut short"
        end
      end
    end
  end

  # Ctrl-C (SIGINT) while the main thread is inside a long native scan, alone and with
  # another thread alive (then Ruby 3.1 does not call the UBF for the signal; the released
  # region's time bound is what notices it): the scan stops early, counted in chunks, and
  # Interrupt reaches the program, which exits normally. The script scans again and again
  # until the signal comes, so a parent that takes longer than one scan (65-105 ms here) to
  # send it cannot make the test fail: the scan it lands in is counted.
  def test_sigint_stops_a_long_scan_on_the_main_thread
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "senju"
      db = Senju::DB.open(memory: true, shards: 512)
      db.set_many(Array.new(500_000) { |i| ["key\#{i}", "v"] }.to_h)
      start = db.stats[:chunks]
      db.keys
      full = db.stats[:chunks] - start
      start = db.stats[:chunks]
      announce = -> { $stdout.puts "scanning"; $stdout.flush }
      if ARGV[0] == "threads"
        Thread.new { Thread.pass until db.stats[:chunks] > start; announce.call }
      end
      begin
        announce.call unless ARGV[0] == "threads"
        loop do
          start = db.stats[:chunks]
          db.keys
        end
      rescue Interrupt
        puts "interrupted after \#{db.stats[:chunks] - start} of \#{full} chunks"
      end
    RUBY
    %w[alone threads].each do |mode|
      IO.popen([RbConfig.ruby, "-I", lib, "-e", script, mode], "r+") do |io|
        assert_equal "scanning\n", io.gets
        Process.kill(:INT, io.pid)
        line = io.gets
        m = /\Ainterrupted after (\d+) of (\d+) chunks/.match(line)
        assert m, "#{mode}: #{line.inspect}"
        assert_operator m[1].to_i, :<, m[2].to_i, "#{mode}: the scan was cut short"
      end
      assert_predicate $?, :success?
    end
  end

  # The extension's classes (the cursor's, the exceptions') are all found while it loads.
  # Found on first use instead, inside magnus's `Lazy`, a lookup that gave up the GVL left
  # the next thread waiting for it with the GVL held, and the process hung (this file did,
  # once, on two threads making their first cursors). Here every lookup by name gives up
  # the GVL, so that hang would be certain; the script runs in a fresh process because the
  # classes are found once per process.
  def test_first_cursors_and_errors_of_many_threads_at_once
    lib = File.expand_path("../lib", __dir__)
    script = <<~RUBY
      require "senju"
      Object.singleton_class.prepend(Module.new do
        def const_get(*args)
          sleep(0.01)
          super
        end
      end)
      db = Senju::DB.open(memory: true)
      db["k"] = "v"
      closed = Senju::DB.open(memory: true)
      closed.close
      go = Queue.new
      threads = Array.new(8) do
        Thread.new do
          go.pop
          db.each { |_k, _v| nil }
          begin
            closed["k"]
          rescue Senju::ClosedError
            nil
          end
        end
      end
      8.times { go << true }
      threads.each(&:join)
      puts "done"
    RUBY
    IO.popen([RbConfig.ruby, "-I", lib, "-e", script]) do |io|
      unless IO.select([io], nil, nil, 60)
        Process.kill(:KILL, io.pid)
        flunk "8 threads making their first cursors hung"
      end
      assert_equal "done\n", io.read
    end
    assert_predicate $?, :success?
  end

  # Under :auto a short write keeps the GVL, except while it waits for a shard that another
  # thread holds (here a rebuild copying the only shard): then it waits as a batch does,
  # released. stats[:busy_waits] counts those waits; :hold never takes that path.
  def test_auto_write_waits_for_a_busy_shard_as_a_batch
    waits = %i[auto hold].to_h do |mode|
      Senju::DB.open(memory: true, shards: 1, gvl: mode) do |db|
        db.set_many(Array.new(300_000) { |i| [format("%08d", i), "v"] }.to_h)
        rebuilder = Thread.new { db.rebuild }
        loop do
          db["k"] = "v"
          db.append("a", "x")
          db.compare_and_set("c", nil, "1")
          db.delete("c")
          break unless rebuilder.alive?
        end
        rebuilder.join
        assert_equal "v", db["k"]
        assert_equal 300_002, db.size
        [mode, db.stats[:busy_waits]]
      end
    end
    assert_operator waits[:auto], :>, 0, "no write under :auto found the shard busy"
    assert_equal 0, waits[:hold]
  end

  # An interrupt that raises wins over a finished call, and the handle stays usable.
  def test_handle_is_usable_after_interrupted_calls
    Senju::DB.open(memory: true, gvl: :release) do |db|
      t = Thread.new do
        Thread.current.report_on_exception = false
        loop { db.get_many(Array.new(2000) { |i| "k#{i}" }) }
      end
      Thread.pass until db.stats[:chunks] >= 4
      t.raise(RuntimeError, "done")
      assert_raises(RuntimeError) { t.join }
      db["k"] = "v"
      assert_equal "v", db["k"]
    end
  end

  # The binding counts batch calls holding the GVL and threads in released regions, to let a
  # thread whose region ends wait awake for a batch call's release instead of sleeping in
  # Ruby's queue. Every path out of a call (results, a wrong type, a closed handle, an
  # interrupt) must give its counts back: one left behind would make every later released
  # region wait its full limit. With no call in flight all three counts are 0.
  def test_gvl_counts_return_to_zero_after_batches_errors_and_interrupts
    assert_equal [0, 0, 0], Senju.__gvl_counts, "before"
    MODES.each do |gvl|
      Senju::DB.open(memory: true, gvl: gvl) do |db|
        keys = Array.new(1500) { |i| "k#{i}" }
        pairs = keys.to_h { |k| [k, "v#{k}"] }
        db.set_many(pairs)
        threads = Array.new(4) do |t|
          Thread.new do
            30.times do |i|
              case (t + i) % 5
              when 0 then db.set_many(pairs)
              when 1 then assert_equal pairs.size, db.get_many(keys).compact.size
              when 2 then db.keys
              when 3 then db.each { |_k, _v| } # cursor chunks
              else assert_raises(TypeError) { db.get_many(keys + [1]) }
              end
            end
          end
        end
        threads.each(&:join)
        assert_equal [0, 0, 0], Senju.__gvl_counts, "#{gvl}: after calls and errors"
        worker = Thread.new do
          Thread.current.report_on_exception = false
          loop { db.get_many(keys) }
        end
        start = db.stats[:chunks]
        Thread.pass until db.stats[:chunks] >= start + 4
        worker.raise(RuntimeError, "stop")
        assert_raises(RuntimeError) { worker.join }
        assert_equal [0, 0, 0], Senju.__gvl_counts, "#{gvl}: after an interrupt"
      end
      assert_raises(Senju::ClosedError) { Senju::DB.open(memory: true, gvl: gvl).tap(&:close).get_many(["k"]) }
      assert_equal [0, 0, 0], Senju.__gvl_counts, "#{gvl}: after a closed handle"
    end
  end

  def test_call_from_a_non_main_ractor
    skip "Ractor needs Ruby 3.0+" unless defined?(Ractor)
    Senju::DB.open(memory: true) do |db|
      db["from-main"] = "1"
      shared = Ractor.make_shareable(db)
      assert Ractor.shareable?(shared)
      r = Ractor.new(shared) do |d|
        d["from-ractor"] = "2"
        d.set_many({ "a" => "x", "b" => "y" })
        [d["from-main"], d.get_many(%w[a b]), d.size, d.fetch("a"), d.keys.size]
      end
      assert_equal ["1", %w[x y], 4, "x", 4], r.take
      assert_equal "2", db["from-ractor"]
    end
  end
end
