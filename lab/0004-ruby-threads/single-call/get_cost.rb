# Instructions per single call: prefills 100,000 keys, then N random `db[k]` (OP=set: `db[k] = v`);
# run under callgrind with N = 0 and N = 100000 and divide the difference by 100,000.
#   OP=get valgrind --tool=callgrind ruby -I bindings/ruby/lib get_cost.rb senju|kyoto N
require "senju"
require "kyotocabinet"
require "tmpdir"
peer, n = ARGV[0], Integer(ARGV[1])
op = ENV.fetch("OP", "get")
def key(i) = format("key%013d", i)
V = ("v" * 16).b.freeze
dir = Dir.mktmpdir
db = if peer == "senju"
  Senju::DB.open(File.join(dir, "a.sj"), gvl: :auto, truncate: true)
else
  d = KyotoCabinet::DB.new(0)
  d.open(File.join(dir, "a.kch#bnum=400000"), KyotoCabinet::DB::OWRITER | KyotoCabinet::DB::OCREATE | KyotoCabinet::DB::OTRUNCATE) or raise
  d
end
100_000.times { |i| db[key(i)] = V }
rng = Random.new(1)
if op == "get"
  n.times { db[key(rng.rand(100_000))] }
else
  n.times { db[key(rng.rand(100_000))] = V }
end
db.close
