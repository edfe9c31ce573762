# frozen_string_literal: true

# Where the CPU time of one Ruby thread's batch loop goes, thread by thread: the bench's batch
# case (set_many of 1000 pairs, then get_many of their keys, on a store prefilled with
# 100,000 keys) for 2 s in one thread, with the ticks of every OS thread of the process read
# from /proc/self/task/*/stat before and after (1 tick = 10 ms).
#
#   ruby -I bindings/ruby/lib lab/0004-ruby-threads/thread_cpu.rb

require "senju"
require "tmpdir"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def cpu_now = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

# { [tid, name] => utime + stime in ticks } for every live thread of this process.
def ticks
  Dir.children("/proc/self/task").each_with_object({}) do |t, out|
    fields = File.read("/proc/self/task/#{t}/stat").rpartition(")").last.split
    out[[t, File.read("/proc/self/task/#{t}/comm").strip]] = fields[11].to_i + fields[12].to_i
  rescue Errno::ENOENT
    next # the thread exited between the listing and the read
  end
end

Dir.mktmpdir do |dir|
  Senju::DB.open(File.join(dir, "b.sj"), gvl: :auto) do |db|
    (0...100_000).each_slice(1000) { |s| db.set_many(s.to_h { |i| [format("key%013d", i), "v" * 16] }) }
    rng = Random.new(1)
    keys = Array.new(1000) { format("key%013d", rng.rand(100_000)) }
    pairs = keys.to_h { |k| [k, "v" * 16] }
    before = ticks
    c0 = cpu_now
    t0 = now
    ops = 0
    Thread.new do
      while now - t0 < 2.0
        db.set_many(pairs)
        db.get_many(keys)
        ops += 2000
      end
    end.join
    wall = now - t0
    puts format("%.2fM ops/s, %.2f cores busy", ops / wall / 1e6, (cpu_now - c0) / wall)
    ticks.each do |(tid, name), t|
      spent = t - before.fetch([tid, name], 0)
      puts "  #{name}: #{spent} ticks" if spent.positive?
    end
    puts "  automatic rebuilds: #{db.stats[:auto_rebuilds]}"
  end
end
