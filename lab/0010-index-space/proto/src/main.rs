//! Two index layouts for N keys in 128 tables (a key's chosen by the top 7 hash bits, as
//! senju's shards are), timed side by side (alternating, ROUNDS rounds, medians), in memory,
//! one thread:
//!
//! - `lp`: senju's index today. Slots of 8 bytes (record offset, 21 tag bits), linear probing,
//!   tombstone-free here (no removals), replaced by a table 2/3 full when an insert would pass
//!   7/8, positions from the tag bits (no record read to grow).
//! - `lh`: 64-byte buckets of 8 such slots; each key has two candidate buckets (from its tag
//!   and a bijective mix of it), addressed by linear hashing, so the table grows one bucket at
//!   a time and its load stays at its limit (0.90 or 0.85 here); an insert goes to the less
//!   full candidate, and when both are full, moves one entry of a candidate to its other
//!   bucket (a random walk of at most 64 moves).
//!
//! Records are 16-byte (key, value) pairs in one array, written in insertion order, so a
//! record read costs what it costs in the engine (a miss for a random key). Keys are the
//! numbers 0..N as 8 ASCII digits, hashed with XXH3 as senju does. Reported per layout: ns per
//! insert, per lookup in insertion order and in random order, and index bytes per key.

use std::hint::black_box;
use std::time::Instant;

use xxhash_rust::xxh3::xxh3_64_with_seed;

const TAG_BITS: u32 = 21;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const OFF_BITS: u32 = 43;
const SALT: u64 = 0x5eed;

fn key_of(i: u64) -> [u8; 8] {
    let mut k = [b'0'; 8];
    let mut n = i;
    for d in k.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

fn hash(k: &[u8; 8]) -> u64 {
    xxh3_64_with_seed(k, SALT)
}

fn slot(off: u64, h: u64) -> u64 {
    (off + 1) | ((h & TAG_MASK) << OFF_BITS)
}

fn slot_off(s: u64) -> u64 {
    (s & ((1 << OFF_BITS) - 1)) - 1
}

fn slot_tag(s: u64) -> u64 {
    s >> OFF_BITS
}

/// The records: key and value of each insert, in order.
struct Records(Vec<[u64; 2]>);

impl Records {
    fn key_at(&self, off: u64) -> u64 {
        self.0[off as usize][0]
    }
}

fn key_word(k: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*k)
}

trait Index {
    fn insert(&mut self, recs: &Records, h: u64, k: u64, off: u64);
    fn find(&self, recs: &Records, h: u64, k: u64) -> Option<u64>;
    fn bytes(&self) -> usize;
    fn prefetch(&self, h: u64);
}

// ----- linear probing, whole-table growth -----

struct Lp {
    slots: Vec<u64>,
    count: usize,
}

impl Lp {
    fn new() -> Lp {
        Lp { slots: vec![0; 509], count: 0 }
    }
    fn home(&self, tag: u64) -> usize {
        ((tag * self.slots.len() as u64) >> TAG_BITS) as usize
    }
    fn grow(&mut self) {
        let n = ((self.count + 1) * 3).div_ceil(2);
        let mut new = vec![0u64; n];
        for &s in &self.slots {
            if s != 0 {
                let mut p = ((slot_tag(s) * n as u64) >> TAG_BITS) as usize;
                while new[p] != 0 {
                    p += 1;
                    if p == n {
                        p = 0;
                    }
                }
                new[p] = s;
            }
        }
        self.slots = new;
    }
}

impl Lp {
    /// The slot holding key `k` (`Ok`), or the empty slot where it would go (`Err`).
    fn probe(&self, recs: &Records, h: u64, k: u64) -> Result<usize, usize> {
        let n = self.slots.len();
        let tag = h & TAG_MASK;
        let mut p = self.home(tag);
        loop {
            let s = self.slots[p];
            if s == 0 {
                return Err(p);
            }
            if slot_tag(s) == tag && recs.key_at(slot_off(s)) == k {
                return Ok(p);
            }
            p += 1;
            if p == n {
                p = 0;
            }
        }
    }
}

impl Index for Lp {
    fn insert(&mut self, recs: &Records, h: u64, k: u64, off: u64) {
        if (self.count + 1) * 8 > self.slots.len() * 7 {
            self.grow();
        }
        match self.probe(recs, h, k) {
            Ok(p) => self.slots[p] = slot(off, h),
            Err(p) => {
                self.slots[p] = slot(off, h);
                self.count += 1;
            }
        }
    }
    fn find(&self, recs: &Records, h: u64, k: u64) -> Option<u64> {
        self.probe(recs, h, k).ok().map(|p| slot_off(self.slots[p]))
    }
    fn bytes(&self) -> usize {
        self.slots.len() * 8
    }
    fn prefetch(&self, h: u64) {
        prefetch(&self.slots[self.home(h & TAG_MASK)]);
    }
}

fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
}

// ----- two-choice buckets, linear hashing -----

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket([u64; 8]);

impl Bucket {
    fn used(&self) -> usize {
        self.0.iter().filter(|&&s| s != 0).count()
    }
}

struct Lh {
    b: Vec<Bucket>,
    level: u32,
    split: usize,
    count: usize,
    max_load: f64,
    rng: u64,
    moves: u64,
    giveups: u64,
}

/// A bijection on 21 bits: the second candidate comes from the same stored bits.
fn mix(t: u64) -> u64 {
    let mut t = t.wrapping_mul(0x9E3B5) & TAG_MASK;
    t ^= t >> 11;
    t = t.wrapping_mul(0x5BD1F) & TAG_MASK;
    t ^ (t >> 9)
}

impl Lh {
    fn new(max_load: f64) -> Lh {
        Lh {
            b: vec![Bucket::default()],
            level: 0,
            split: 0,
            count: 0,
            max_load,
            rng: 0x9E37_79B9,
            moves: 0,
            giveups: 0,
        }
    }
    fn addr(&self, t: u64) -> usize {
        let mut a = (t & ((1 << self.level) - 1)) as usize;
        if a < self.split {
            a = (t & ((1 << (self.level + 1)) - 1)) as usize;
        }
        a
    }
    fn cands(&self, tag: u64) -> (usize, usize) {
        (self.addr(tag), self.addr(mix(tag)))
    }
    fn split_one(&mut self) {
        let old = self.split;
        self.b.push(Bucket::default());
        self.split += 1;
        if self.split == 1 << self.level {
            self.level += 1;
            self.split = 0;
        }
        let entries = self.b[old].0;
        self.b[old] = Bucket::default();
        for s in entries.into_iter().filter(|&s| s != 0) {
            let (a, c) = self.cands(slot_tag(s));
            let to = if a == old || c == old {
                old
            } else if self.b[a].used() <= self.b[c].used() {
                a
            } else {
                c
            };
            let free = self.b[to].0.iter().position(|&x| x == 0).expect("a split bucket has room");
            self.b[to].0[free] = s;
        }
    }
    /// Places `s` (tag `tag`), moving entries between candidates if both are full.
    fn place(&mut self, mut s: u64) -> bool {
        let (mut a, c) = self.cands(slot_tag(s));
        if self.b[c].used() < self.b[a].used() {
            a = c;
        }
        for _ in 0..64 {
            if let Some(free) = self.b[a].0.iter().position(|&x| x == 0) {
                self.b[a].0[free] = s;
                return true;
            }
            // Evict a random entry of `a` to its other bucket.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let j = (self.rng % 8) as usize;
            let victim = self.b[a].0[j];
            self.b[a].0[j] = s;
            self.moves += 1;
            s = victim;
            let (x, y) = self.cands(slot_tag(s));
            a = if x == a { y } else { x };
        }
        // Give up: put the last victim back by splitting until it fits.
        self.giveups += 1;
        loop {
            self.split_one();
            let (x, y) = self.cands(slot_tag(s));
            for t in [x, y] {
                if let Some(free) = self.b[t].0.iter().position(|&v| v == 0) {
                    self.b[t].0[free] = s;
                    return false;
                }
            }
        }
    }
}

impl Index for Lh {
    fn insert(&mut self, recs: &Records, h: u64, k: u64, off: u64) {
        let tag = h & TAG_MASK;
        let (a, c) = self.cands(tag);
        for t in [a, c] {
            for s in self.b[t].0.iter_mut() {
                if *s != 0 && slot_tag(*s) == tag && recs.key_at(slot_off(*s)) == k {
                    *s = slot(off, h);
                    return;
                }
            }
        }
        while (self.count + 1) as f64 > self.max_load * 8.0 * self.b.len() as f64 {
            self.split_one();
        }
        self.place(slot(off, h));
        self.count += 1;
    }
    fn find(&self, recs: &Records, h: u64, k: u64) -> Option<u64> {
        let tag = h & TAG_MASK;
        let (a, c) = self.cands(tag);
        for t in [a, c] {
            for &s in &self.b[t].0 {
                if s != 0 && slot_tag(s) == tag && recs.key_at(slot_off(s)) == k {
                    return Some(slot_off(s));
                }
            }
        }
        None
    }
    fn bytes(&self) -> usize {
        if std::env::var_os("LH_DEBUG").is_some() && self.count > 10_000 {
            eprintln!(
                "lh: {} keys, {} moves, {} give-ups, load {:.3}",
                self.count,
                self.moves,
                self.giveups,
                self.count as f64 / (8.0 * self.b.len() as f64)
            );
        }
        self.b.len() * 64
    }
    fn prefetch(&self, h: u64) {
        let (a, c) = self.cands(h & TAG_MASK);
        prefetch(&self.b[a]);
        prefetch(&self.b[c]);
    }
}

/// 128 tables, a key's chosen by the top 7 bits of its hash, as senju's shards are.
struct Sharded(Vec<Box<dyn Index>>);

impl Sharded {
    fn of(&self, h: u64) -> &dyn Index {
        &*self.0[(h >> 57) as usize]
    }
}

impl Index for Sharded {
    fn insert(&mut self, recs: &Records, h: u64, k: u64, off: u64) {
        self.0[(h >> 57) as usize].insert(recs, h, k, off);
    }
    fn find(&self, recs: &Records, h: u64, k: u64) -> Option<u64> {
        self.of(h).find(recs, h, k)
    }
    fn bytes(&self) -> usize {
        self.0.iter().map(|i| i.bytes()).sum()
    }
    fn prefetch(&self, h: u64) {
        self.of(h).prefetch(h);
    }
}

/// One round: N inserts, N lookups in insertion order, N in random order. Returns ns per op.
fn round(n: u64, make: &dyn Fn() -> Box<dyn Index>) -> ([f64; 3], f64) {
    let mut idx = Sharded((0..128).map(|_| make()).collect());
    let mut recs = Records(Vec::with_capacity(n as usize));
    let t = Instant::now();
    for i in 0..n {
        let k = key_of(i);
        let h = hash(&k);
        idx.prefetch(h);
        let off = recs.0.len() as u64;
        recs.0.push([key_word(&k), i]);
        idx.insert(&recs, h, key_word(&k), off);
    }
    let ins = t.elapsed().as_nanos() as f64 / n as f64;
    let lookups = |order: &dyn Fn(u64) -> u64| {
        let t = Instant::now();
        let mut found = 0u64;
        for i in 0..n {
            let k = key_of(order(i));
            let h = hash(&k);
            idx.prefetch(h);
            found += u64::from(idx.find(&recs, h, key_word(&k)).is_some());
        }
        assert_eq!(black_box(found), n);
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let seq = lookups(&|i| i);
    // A random permutation of 0..n: multiply by an odd constant modulo a power of two above
    // n, skipping what falls outside.
    let m = n.next_power_of_two();
    let mut perm = Vec::with_capacity(n as usize);
    let mut x = 0u64;
    while (perm.len() as u64) < n {
        let v = x.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1) & (m - 1);
        if v < n {
            perm.push(v);
        }
        x += 1;
    }
    let rnd = lookups(&|i| perm[i as usize]);
    ([ins, seq, rnd], idx.bytes() as f64 / n as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    type Make = Box<dyn Fn() -> Box<dyn Index>>;
    let layouts: Vec<(&str, Make)> = vec![
        ("lp (7/8 -> 2/3)", Box::new(|| Box::new(Lp::new()))),
        ("lh 8x2 at 0.90", Box::new(|| Box::new(Lh::new(0.90)))),
        ("lh 8x2 at 0.85", Box::new(|| Box::new(Lh::new(0.85)))),
        ("lh 8x2 at 0.80", Box::new(|| Box::new(Lh::new(0.80)))),
    ];
    let mut res: Vec<Vec<[f64; 3]>> = vec![Vec::new(); layouts.len()];
    let mut bytes = vec![0.0; layouts.len()];
    for r in 0..rounds {
        for (i, (name, make)) in layouts.iter().enumerate() {
            let (t, b) = round(n, make);
            eprintln!(
                "round {r} {name}: insert {:.0} ns, get in order {:.0} ns, get random {:.0} ns, {b:.2} index bytes/key",
                t[0], t[1], t[2]
            );
            res[i].push(t);
            bytes[i] = b;
        }
    }
    println!(
        "| layout | insert ns (median) | get, insertion order | get, random order | index bytes per key |"
    );
    println!("|---|---|---|---|---|");
    for (i, (name, _)) in layouts.iter().enumerate() {
        let col = |c: usize| median(res[i].iter().map(|t| t[c]).collect());
        println!("| {name} | {:.0} | {:.0} | {:.0} | {:.2} |", col(0), col(1), col(2), bytes[i]);
    }
}
