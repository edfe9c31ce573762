# Index bytes per record after N inserts spread over 128 shards, for each growth target
# (a table grows when one more entry would pass 7/8 of its slots, to the smallest whole
# number of pages holding the live entries at num/den). Deterministic but for the shard
# counts drawn from a normal approximation of the binomial. `python3 sim-grow.py`.
import random, math
def chunk_len(slots): return ((48+slots*8+4095)//4096)*4096
def slots_of(l): return (l-48)//8
def run(N, shards=128, num=2, den=3, seed=1):
    rnd=random.Random(seed)
    # multinomial counts approx: each shard gets binomial
    counts=[0]*shards
    # simulate growth sequence per shard: sizes only depend on count trajectory; count final = c
    tot=0
    p=1/shards
    for s in range(shards):
        c=int(rnd.gauss(N*p, math.sqrt(N*p*(1-p))))
        slots=0; used=0
        # grow events: when (used+1)*8 > slots*7 -> new size for used+1 live
        # jump directly
        while True:
            if slots==0:
                slots=slots_of(chunk_len(max(1,-(-(1*den)//num)))); continue
            limit=(slots*7)//8  # max used s.t. (used+1)*8<=slots*7  -> used+1 <= slots*7/8
            lim=math.floor(slots*7/8)  # used+1 <= lim
            if c<=lim: break
            live=lim+1  # inserting the (lim+1)th entry grows
            slots=slots_of(chunk_len(-(-(live*den)//num)))
        tot+=slots
    return tot
for num,den in [(2,3),(7,10),(3,4),(4,5)]:
    row=[]
    for N in [1_000_000,2_000_000,5_000_000,10_000_000,15_000_000,20_000_000]:
        row.append(f"{8*run(N,num=num,den=den)/N:5.2f}")
    # average over many sizes
    avg=sum(8*run(N,num=num,den=den)/N for N in range(1_000_000,20_000_001,250_000))/len(range(1_000_000,20_000_001,250_000))
    print(num,den,row,f"avg {avg:.2f}")
