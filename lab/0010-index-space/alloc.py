#!/usr/bin/env python3
"""Replays where `senju perf sequence --set_only` puts its chunks, to compare free-space
policies without running the engine: 128 shards, 8-byte keys and values (22-byte records),
keys spread evenly, tables and record chunks sized as `shard.rs` sizes them.

  python3 alloc.py N shard    # each shard reuses only its own freed tables (before 2026-11-23)
  python3 alloc.py N global   # one free-space map for all shards, neighbours merged

Prints the end of the allocated space, the index slots, and the free bytes left inside.
For N = 10,000,000 it gives 409.0 MB (shard) and 321.6 MB (global); the engine measured
408,965,120 and 321,564,672 bytes.
"""
import bisect
import random
import sys

PAGE, HDR, SHARDS, REC, MAX_CHUNK = 4096, 48, 128, 22, 32 << 10


def index_chunk_len(slots):
    return -(-(HDR + slots * 8) // PAGE) * PAGE


def slots_of(length):
    return (length - HDR) // 8


def table_len_for(live, num, den):
    return index_chunk_len(max(1, -(-(live * den) // num)))


class Space:
    def __init__(self, policy):
        self.policy = policy
        self.end = PAGE + (SHARDS * 128 + PAGE - 1) // PAGE * PAGE
        self.free = []  # global: sorted, merged (offset, length)

    def take(self, own, need, want):
        """`need..=want` bytes: the first free extent holding `need` (all of it if shorter
        than `want`), else `want` fresh bytes at the end."""
        pool = own if self.policy == "shard" else self.free
        for i, (o, l) in enumerate(pool):
            if l >= need:
                got = min(l, want)
                if got == l:
                    pool.pop(i)
                else:
                    pool[i] = (o + got, l - got)
                return o, got
        o = self.end
        self.end += want
        return o, want

    def give(self, own, o, l):
        if self.policy == "shard":
            own.append((o, l))
            return
        i = bisect.bisect_left(self.free, (o, l))
        self.free.insert(i, (o, l))
        if i + 1 < len(self.free) and o + l == self.free[i + 1][0]:
            self.free[i] = (o, l + self.free[i + 1][1])
            self.free.pop(i + 1)
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == self.free[i][0]:
            self.free[i - 1] = (self.free[i - 1][0], self.free[i - 1][1] + self.free[i][1])
            self.free.pop(i)


class Shard:
    def __init__(self):
        self.count, self.table, self.left, self.seq, self.own = 0, None, 0, 0, []


def main():
    n, policy = int(sys.argv[1]), sys.argv[2]
    space, shards = Space(policy), [Shard() for _ in range(SHARDS)]
    random.seed(3)
    for _ in range(n):
        s = shards[random.getrandbits(7)]
        if s.table is None or (s.count + 1) * 8 > slots_of(s.table[1]) * 7:
            want = max(table_len_for(s.count + 1, 2, 3), PAGE)
            old, s.table = s.table, space.take(s.own, want, want)
            if old:
                space.give(s.own, *old)
        if s.left < REC:
            need = -(-(HDR + REC) // PAGE) * PAGE
            _, got = space.take(s.own, need, max(need, min(PAGE << min(s.seq, 3), MAX_CHUNK)))
            s.seq, s.left = s.seq + 1, got - HDR
        s.left -= REC
        s.count += 1
    slots = sum(slots_of(sh.table[1]) for sh in shards)
    free = sum(l for _, l in space.free) + sum(l for sh in shards for _, l in sh.own)
    print(f"{policy}: {n} records, end {space.end / 1e6:.1f} MB, {slots} slots, {free / 1e6:.1f} MB free")


if __name__ == "__main__":
    main()
