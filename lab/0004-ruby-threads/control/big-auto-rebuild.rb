# The big case (64 KiB values overwritten over 256 keys, set then get, one thread, gvl: :auto)
# with automatic rebuilds at their default (auto_rebuild: nil, 64 MiB) and off (0),
# alternating, 6 rounds. SECS sets each cell's length (default 0.5 s, as the lab's cells).
#   SECS=2 ruby -I bindings/ruby/lib lab/0004-ruby-threads/control/big-auto-rebuild.rb
# Prints ops/s, finished rebuild passes and the file's size per cell, then the medians.
require_relative "big-cell"

res = Hash.new { |h, k| h[k] = [] }
6.times do
  [nil, 0].each do |ar|
    ops, st, size = big_cell(ar, (ENV["SECS"] || "0.5").to_f)
    res[ar.inspect] << ops
    puts "#{ar.inspect}: #{ops.round} ops/s passes=#{st[:auto_rebuilds]} file=#{size >> 20}MiB"
  end
end
res.each { |k, v| s = v.sort; puts "#{k} median #{((s[2] + s[3]) / 2).round}" }
