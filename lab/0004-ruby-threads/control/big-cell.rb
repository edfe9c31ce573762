# One cell of the big case (64 KiB values overwritten over 256 keys, set then get, one
# thread, gvl: :auto) in a process of its own, for A/B runs of two builds (big-ab.sh).
# AR=off turns automatic rebuilds off (default: on, 64 MiB); SECS sets the cell's length.
# Prints ops/s, finished rebuild passes, the file's high-water mark and live/dead MiB.
require "senju"
require "tmpdir"
V = Random.new(1).bytes(64 << 10)
ar = ENV["AR"] == "off" ? 0 : nil
Dir.mktmpdir do |d|
  db = Senju::DB.open(File.join(d, "b.sj"), gvl: :auto, auto_rebuild: ar)
  256.times { |i| db[format("%016d", i)] = V }
  rng = Random.new(1); ops = 0
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < (ENV["SECS"] || "2").to_f
    4.times { k = format("%016d", rng.rand(256)); db[k] = V; db[k] }
    ops += 8
  end
  el = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  st = db.stats
  puts "#{(ops/el).round} ops/s passes=#{st[:auto_rebuilds]} file_bytes=#{st[:file_bytes]>>20}MiB live=#{st[:live_bytes]>>20} dead=#{st[:dead_bytes]>>20}"
  db.close
end
