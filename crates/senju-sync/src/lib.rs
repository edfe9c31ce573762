//! Locks for senju, a key-value database built for many threads.
//!
//! Three raw locks, each a state word with a written protocol (see `docs/design.md`), each
//! drop-in through the [`lock_api`] traits:
//!
//! | lock | for | waiting | fairness |
//! |---|---|---|---|
//! | [`SpinRwLock`] | short CPU-bound sections (bucket locks, in-memory tables) | spin briefly, yield, then park ([`Relax`] policy) | a waiting writer keeps new readers out |
//! | [`FairRwLock`] | sections that may be long or contended | spin briefly, then park | phase-fair: a reader waits at most one write phase, writers in arrival order |
//! | [`Mutex`] | exclusive sections | spin briefly, then park | barging, but after `K` bypasses (default 8) the oldest waiter is handed the lock |
//!
//! Invariants kept by every lock here: no thread that has announced it waits can be overtaken
//! without bound (the bound is a count, which the tests check by counting); no waiter spins
//! without limit unless its [`Relax`] policy says so; every atomic comes from one `primitive`
//! module that switches to loom under `--cfg loom`, so the model checks the shipped code.
//!
//! ```
//! use senju_sync::{Mutex, SpinRwLock};
//!
//! let table = SpinRwLock::new(vec![0u64; 16]);
//! table.write()[3] = 7;
//! assert_eq!(table.read()[3], 7);
//!
//! let counter = Mutex::new(0);
//! std::thread::scope(|s| {
//!     for _ in 0..4 {
//!         s.spawn(|| *counter.lock() += 1);
//!     }
//! });
//! assert_eq!(*counter.lock(), 4);
//! ```

mod primitive;
pub mod relax;
mod spin_rwlock;

pub use relax::{Adaptive, Hooked, Park, Relax, Spin, Yield};
pub use spin_rwlock::{MAX_READERS, RawSpinRwLock};

/// A reader-writer lock on [`RawSpinRwLock`] (writer-preferring, short spins, then parks).
#[cfg(not(loom))]
pub type SpinRwLock<T> = lock_api::RwLock<RawSpinRwLock, T>;
/// A read guard of [`SpinRwLock`].
#[cfg(not(loom))]
pub type SpinRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawSpinRwLock, T>;
/// A write guard of [`SpinRwLock`].
#[cfg(not(loom))]
pub type SpinRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawSpinRwLock, T>;
