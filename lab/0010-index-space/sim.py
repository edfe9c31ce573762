#!/usr/bin/env python3
"""Index layouts that would grow one bucket at a time (linear hashing), simulated.

Linear hashing keeps the load factor steady (no saw-tooth between growths, no abandoned
table), but its unsplit buckets receive twice the keys of the split ones. Two candidate
buckets per key (the less full one takes the key) are meant to even that out. This counts,
for N random keys with 21-bit tags (senju's slot keeps 21 hash bits), how full the table
ends up and what inserts cost:

  python3 sim.py buckets SLOTS MAXLOAD N   # buckets of SLOTS slots, cuckoo moves allowed
  python3 sim.py segments SLOTS MAXLOAD N  # big segments, no moves (linear probing inside)

A split happens when the table's load would pass MAXLOAD, or (forced) when a key finds both
candidates full and no move frees a place. Prints the final and average load, forced splits,
the share of inserts that found both candidates full, and entries moved per insert.
"""
import random
import sys
from collections import deque

MASK = (1 << 21) - 1


def mix(t):
    """A bijection on 21 bits: the second candidate comes from the same stored bits."""
    t = (t * 0x9E3B5) & MASK
    t ^= t >> 11
    t = (t * 0x5BD1F) & MASK
    t ^= t >> 9
    return t


class Table:
    def __init__(self, slots, maxload, moves):
        self.slots, self.maxload, self.allow_moves = slots, maxload, moves
        self.level, self.split = 0, 0
        self.b = [[]]
        self.count = self.forced = self.full = self.moved = 0

    def n(self):
        return (1 << self.level) + self.split

    def addr(self, h):
        a = h & ((1 << self.level) - 1)
        if a < self.split:
            a = h & ((1 << (self.level + 1)) - 1)
        return a

    def cands(self, t):
        return self.addr(t), self.addr(mix(t))

    def do_split(self):
        old, new = self.split, (1 << self.level) + self.split
        self.b.append([])
        self.split += 1
        if self.split == 1 << self.level:
            self.level, self.split = self.level + 1, 0
        keep = []
        for t in self.b[old]:
            a, c = self.cands(t)
            if old in (a, c):
                keep.append(t)
            else:
                x = a if len(self.b[a]) <= len(self.b[c]) else c
                self.b[x].append(t)
        self.b[old] = keep

    def place(self, t):
        a, c = self.cands(t)
        x = a if len(self.b[a]) <= len(self.b[c]) else c
        if len(self.b[x]) < self.slots:
            self.b[x].append(t)
            return True
        self.full += 1
        if not self.allow_moves:
            return False
        # Breadth-first search for a chain of moves (at most 4) that frees a slot.
        q, seen = deque([(a, []), (c, [])]), {a, c}
        while q:
            bk, path = q.popleft()
            if len(path) >= 4:
                continue
            for j, u in enumerate(self.b[bk]):
                u1, u2 = self.cands(u)
                alt = u2 if u1 == bk else u1
                if alt in seen:
                    continue
                chain = path + [(bk, j, alt)]
                if len(self.b[alt]) < self.slots:
                    for fb, fj, to in reversed(chain):
                        self.b[to].append(self.b[fb][fj])
                        self.b[fb][fj] = None
                    for fb, _, _ in chain:
                        self.b[fb] = [v for v in self.b[fb] if v is not None]
                    self.b[chain[0][0]].append(t)
                    self.moved += len(chain)
                    return True
                seen.add(alt)
                q.append((alt, chain))
        return False

    def insert(self, t):
        while self.count + 1 > self.maxload * self.slots * self.n():
            self.do_split()
        while not self.place(t):
            self.do_split()
            self.forced += 1
        self.count += 1


def main():
    kind, slots, maxload, n = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    random.seed(1)
    tb = Table(slots, maxload, kind == "buckets")
    loads = []
    for k in range(n):
        tb.insert(random.getrandbits(21))
        if k > 20 * slots and k % 997 == 0:
            loads.append(tb.count / (slots * tb.n()))
    print(f"{kind} slots={slots} maxload={maxload} keys={n}: load final {tb.count / (slots * tb.n()):.3f}"
          f" avg {sum(loads) / len(loads):.3f} min {min(loads):.3f}; forced splits {tb.forced};"
          f" inserts finding both candidates full {tb.full / n:.3f}; entries moved per insert {tb.moved / n:.3f}")


if __name__ == "__main__":
    main()
