# frozen_string_literal: true

# Where releasing the GVL starts to pay, for the :auto thresholds in
# ext/senju/src/db.rs (BIG_VALUE, BIG_BATCH): throughput of :release vs :hold at 1 and 2
# threads (THREADS=1,2,8 for others), for single set+get of values of several sizes and
# get_many/set_many of several batch sizes, modes alternating, median of ROUNDS rounds.
#
#   ruby -I bindings/ruby/lib bindings/ruby/bench/thresholds.rb [ROUNDS] [SECONDS]

require "senju"

ROUNDS = Integer(ARGV[0] || 3)
SECONDS = Float(ARGV[1] || 0.3)
THREADS = (ENV["THREADS"] || "1,2").split(",").map { |t| Integer(t) }

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def rate(db, threads, &op)
  go = Queue.new
  ws = Array.new(threads) do
    Thread.new do
      deadline = go.pop
      n = 0
      n += op.call(db) until now >= deadline
      n
    end
  end
  deadline = now + SECONDS
  threads.times { go << deadline }
  ws.sum(&:value) / SECONDS
end

def row(label, setup, &op)
  by = Hash.new { |h, k| h[k] = [] }
  ROUNDS.times do |r|
    modes = r.even? ? %i[hold release] : %i[release hold]
    modes.each do |mode|
      Senju::DB.open(memory: true, gvl: mode) do |db|
        setup.call(db)
        THREADS.each { |t| by[[mode, t]] << rate(db, t, &op) }
      end
    end
  end
  med = ->(xs) { xs.sort[xs.size / 2] }
  cells = THREADS.flat_map { |t| [med.(by[[:hold, t]]), med.(by[[:release, t]])] }
  ratios = cells.each_slice(2).map { |h, r| format("%5.2f", r / h) }
  puts "| #{label.ljust(22)} | #{cells.map { |c| format("%9.0f", c) }.join(" | ")} | #{ratios.join(" | ")} |"
end

puts "load: #{File.read("/proc/loadavg").split[0, 3].join(" ")}, rounds #{ROUNDS} x #{SECONDS} s"
heads = THREADS.flat_map { |t| ["hold #{t}t", "release #{t}t"] } + THREADS.map { |t| "rel/hold #{t}t" }
puts "| case (ops/s, an op = one item) | #{heads.join(" | ")} |"
puts "|#{"---|" * (heads.size + 1)}"
[1024, 4096, 16_384, 65_536].each do |size|
  v = "x" * size
  keys = Array.new(64) { |i| "key#{i}" }
  row("set+get #{size / 1024} KiB", ->(db) { keys.each { |k| db[k] = v } }) do |db|
    k = keys.sample
    db[k] = v
    db[k]
    2
  end
end
[16, 64, 256, 1000].each do |n|
  keys = Array.new(n) { |i| format("key%013d", i) }
  pairs = keys.to_h { |k| [k, "v" * 16] }
  row("get_many+set_many #{n}", ->(db) { db.set_many(pairs) }) do |db|
    db.set_many(pairs)
    db.get_many(keys)
    2 * n
  end
end
