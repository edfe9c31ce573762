# The bench_threads.rb batch cell alone (set_many of 1000 pairs, then get_many of the same
# 1000 keys, per thread, over 100,000 prefilled keys), 3 rounds of 1 and 2 threads, gvl:
# :release; prints ops/s, cores busy and how many automatic rebuilds ran. Argument `off`
# opens with auto_rebuild: 0. With THREADS, one cell of that many threads (SECONDS long,
# default 0.5) instead, printed as "threads Mops/s cores".
# Usage: ruby -I bindings/ruby/lib lab/0004-ruby-threads/batch_cell.rb [default|off [THREADS [SECONDS]]]
require "senju"
require "tmpdir"
KEYS = 100_000; BATCH = 1000; V = ("v" * 16).b.freeze
def key(i) = format("%08d", i).b
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
def cell(threads, gvl, ar, secs = 0.5)
  path = File.join(Dir.tmpdir, "senju-batch-cell-#{Process.pid}.sj")
  File.delete(path) if File.exist?(path)
  opts = { gvl: gvl, truncate: true }
  opts[:auto_rebuild] = ar unless ar.nil?
  db = Senju::DB.open(path, **opts)
  (0...KEYS).each_slice(BATCH) { |s| db.set_many(s.to_h { |i| [key(i), V] }) }
  go = Queue.new
  ws = Array.new(threads) { |t| Thread.new { r = Random.new(t+1); keys = Array.new(BATCH) { key(r.rand(KEYS)) }; pairs = keys.to_h { |k| [k, V] }; d = go.pop; n = 0; until now >= d; db.set_many(pairs); db.get_many(keys); n += 2*BATCH; end; n } }
  t0 = now; c0 = cpu; d = t0 + secs; threads.times { go << d }
  ops = ws.sum(&:value); wall = now - t0; c = cpu - c0
  st = db.stats
  db.close; File.delete(path)
  [ops / wall, c / wall, st[:auto_rebuilds]]
end
ar = ARGV[0] == "off" ? 0 : nil
if ARGV[1]
  r, c, = cell(Integer(ARGV[1]), :release, ar, Float(ARGV[2] || 0.5))
  printf("%d %.2f %.2f\n", Integer(ARGV[1]), r / 1e6, c)
  exit
end
3.times do
  [1, 2].each do |t|
    r, c, n = cell(t, :release, ar)
    printf("ar=%s T=%d %.2fM ops/s, %.2f cores, auto_rebuilds %s\n", ARGV[0], t, r / 1e6, c, n.inspect)
  end
end
