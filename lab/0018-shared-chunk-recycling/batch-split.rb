# Lab 0018 control: the Ruby batch cell split into its halves (set_many of 1000 pairs, and
# get_many of 1000 keys, over 1000 of 100,000 16-byte keys per thread), 1 and 2 threads,
# gvl: :auto and :hold, with the cores the process kept busy. Run with
#   ruby -I bindings/ruby/lib lab/0018-shared-chunk-recycling/batch-split.rb

require "senju"
require "tmpdir"
KEYS=100_000; BATCH=1000
def key(i) = format("%016d", i)
V = "v" * 16
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# Ops/s of `threads` threads doing `op` until one shared deadline, and the cores the
# process kept busy meanwhile (as bench_threads.rb measures a cell).
def run(db, threads, op, secs = 0.5)
  ready = Queue.new
  go = Queue.new
  ths = Array.new(threads) do |t|
    Thread.new do
      rng = Random.new(t + 1)
      keys = Array.new(BATCH) { key(rng.rand(KEYS)) }
      pairs = keys.to_h { |k| [k, V] }
      ready << t
      deadline = go.pop
      n = 0
      until now >= deadline
        op == :set ? db.set_many(pairs) : db.get_many(keys)
        n += BATCH
      end
      n
    end
  end
  threads.times { ready.pop }
  t0 = now
  c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  threads.times { go << t0 + secs }
  ops = ths.sum(&:value)
  wall = now - t0
  [ops / wall, (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0) / wall]
end

Dir.mktmpdir do |d|
  %i[auto hold].each do |gvl|
  Senju::DB.open(File.join(d, "x#{gvl}.sj"), gvl: gvl) do |db|
    (0...KEYS).each_slice(BATCH) { |s| db.set_many(s.to_h { |i| [key(i), V] }) }
    3.times do
      %i[set get].each do |op|
        r1 = run(db, 1, op); r2 = run(db, 2, op)
        printf("%s %s 1T %.2fM (%.2f cores) 2T %.2fM (%.2f cores) x%.2f\n", gvl, op, r1[0]/1e6, r1[1], r2[0]/1e6, r2[1], r2[0]/r1[0])
      end
    end
  end
  end
end
