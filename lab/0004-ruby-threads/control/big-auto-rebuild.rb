# The big case (64 KiB values overwritten over 256 keys, set then get, one thread, gvl: :auto)
# with automatic rebuilds at their default (auto_rebuild: nil, 64 MiB) and off (0),
# alternating, 6 rounds. SECS sets each cell's length (default 0.5 s, as the lab's cells).
#   SECS=2 ruby -I bindings/ruby/lib lab/0004-ruby-threads/control/big-auto-rebuild.rb
# Prints ops/s, finished rebuild passes and the file's size per cell, then the medians.
require "senju"
require "tmpdir"
V = Random.new(1).bytes(64 << 10)
def run(ar)
  Dir.mktmpdir do |d|
    db = Senju::DB.open(File.join(d, "b.sj"), gvl: :auto, auto_rebuild: ar)
    256.times { |i| db[format("%016d", i)] = V }
    rng = Random.new(1); ops = 0
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < (ENV["SECS"] || "0.5").to_f
      4.times { k = format("%016d", rng.rand(256)); db[k] = V; db[k] }
      ops += 8
    end
    el = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    st = db.stats
    db.close
    [ops / el, st[:auto_rebuilds], File.size(File.join(d, "b.sj")) >> 20]
  end
end
res = Hash.new { |h, k| h[k] = [] }
6.times do
  [nil, 0].each { |ar| r = run(ar); res[ar.inspect] << r[0]; puts "#{ar.inspect}: #{r[0].round} ops/s passes=#{r[1]} file=#{r[2]}MiB" }
end
res.each { |k, v| s = v.sort; puts "#{k} median #{((s[2] + s[3]) / 2).round}" }
