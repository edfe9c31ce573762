# One cell of the big case (64 KiB values overwritten over 256 keys, set then get, one
# thread, gvl: :auto). Run as a script it is one cell in a process of its own, for A/B runs
# of two builds (big-ab.sh): AR=off turns automatic rebuilds off (default: on, 64 MiB), SECS
# sets the cell's length (default 2 s). It prints ops/s, finished rebuild passes, the file's
# high-water mark and live/dead MiB. big-auto-rebuild.rb calls `big_cell` in one process.
require "senju"
require "tmpdir"

BIG_VALUE = Random.new(1).bytes(64 << 10)

# Runs a cell of `secs` seconds with `auto_rebuild: ar`; returns ops/s, the store's stats
# before closing and the file's size after closing (bytes).
def big_cell(ar, secs)
  Dir.mktmpdir do |d|
    path = File.join(d, "b.sj")
    db = Senju::DB.open(path, gvl: :auto, auto_rebuild: ar)
    256.times { |i| db[format("%016d", i)] = BIG_VALUE }
    rng = Random.new(1)
    ops = 0
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < secs
      4.times { k = format("%016d", rng.rand(256)); db[k] = BIG_VALUE; db[k] }
      ops += 8
    end
    el = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    st = db.stats
    db.close
    [ops / el, st, File.size(path)]
  end
end

if $PROGRAM_NAME == __FILE__
  ops, st, = big_cell(ENV["AR"] == "off" ? 0 : nil, (ENV["SECS"] || "2").to_f)
  puts "#{ops.round} ops/s passes=#{st[:auto_rebuilds]} file_bytes=#{st[:file_bytes] >> 20}MiB " \
       "live=#{st[:live_bytes] >> 20} dead=#{st[:dead_bytes] >> 20}"
end
