require "senju"
n = 200_000
keys = Array.new(n) { |i| "key#{i}" }
res = {}
Senju::DB.open(memory: true) do |db|
  %i[delete append].each do |op|
    db.set_many(keys.to_h { |k| [k, "value"] })
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    if op == :delete
      keys.each { |k| db.delete(k) }
    else
      keys.each { |k| db.append(k, "x") }
    end
    res[op] = n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)
  end
end
puts res.map { |k, v| "#{k}=#{v.round}" }.join(" ")
