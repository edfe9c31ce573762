//! Locks for senju, a key-value database built for many threads.
//!
//! Three raw locks, each a state word with a written protocol (see `docs/design.md`), each
//! drop-in through the [`lock_api`] traits:
//!
//! | lock | for | waiting | fairness |
//! |---|---|---|---|
//! | [`SpinRwLock`] | short CPU-bound sections (bucket locks, in-memory tables); read-mostly data (readers that meet turn on a reader bias: reads then write no shared line) | spin briefly, yield, then park ([`Relax`] policy) | a waiting writer keeps new readers out |
//! | [`FairRwLock`] | sections that may be long or contended | spin briefly, then park | phase-fair: a registered reader waits at most one write phase; writers take turns with the `Mutex`'s bounded hand-off |
//! | [`Mutex`] | exclusive sections | spin briefly, then park | barging; a thread still waiting after its barging phase queues, and a queued waiter is handed the lock after `K` bypasses (default 8) |
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

mod bias;
mod fair_rwlock;
mod mutex;
mod primitive;
pub mod relax;
mod spin_rwlock;

pub use fair_rwlock::{FAIR_RWLOCK_HANDOFF_AFTER, MAX_FAIR_READERS, RawFairRwLock};
pub use mutex::RawMutex;
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

/// A reader-writer lock on [`RawFairRwLock`] (phase-fair: a registered reader waits at most
/// one write phase, writers take turns with the [`Mutex`]'s bounded hand-off; upgradable
/// reads; spins briefly, then parks).
#[cfg(not(loom))]
pub type FairRwLock<T> = lock_api::RwLock<RawFairRwLock, T>;
/// A read guard of [`FairRwLock`].
#[cfg(not(loom))]
pub type FairRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawFairRwLock, T>;
/// A write guard of [`FairRwLock`].
#[cfg(not(loom))]
pub type FairRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawFairRwLock, T>;
/// An upgradable read guard of [`FairRwLock`].
#[cfg(not(loom))]
pub type FairRwLockUpgradableReadGuard<'a, T> =
    lock_api::RwLockUpgradableReadGuard<'a, RawFairRwLock, T>;

/// The general-purpose reader-writer lock: [`FairRwLock`], since no side can starve.
#[cfg(not(loom))]
pub type RwLock<T> = FairRwLock<T>;
/// A read guard of [`RwLock`].
#[cfg(not(loom))]
pub type RwLockReadGuard<'a, T> = FairRwLockReadGuard<'a, T>;
/// A write guard of [`RwLock`].
#[cfg(not(loom))]
pub type RwLockWriteGuard<'a, T> = FairRwLockWriteGuard<'a, T>;
/// An upgradable read guard of [`RwLock`].
#[cfg(not(loom))]
pub type RwLockUpgradableReadGuard<'a, T> = FairRwLockUpgradableReadGuard<'a, T>;

/// A mutex on [`RawMutex`] (barging; a thread still waiting after its barging phase queues,
/// and after 8 bypasses the lock is handed to a queued waiter; spins briefly, then parks).
#[cfg(not(loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;
/// A guard of [`Mutex`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
