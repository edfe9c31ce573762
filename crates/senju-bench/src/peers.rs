//! The benchmark's view of a lock ([`BenchRwLock`], [`BenchMutex`]) and the list of peers.
//!
//! Every scenario is generic over these traits and monomorphized per peer, so no dynamic
//! dispatch sits on the measured path. A lock built on `lock_api` plugs in through the
//! blanket impls below; senju's locks, parking_lot's and the Tkrzw-style lock all do.

use crate::pthread::{
    DefaultKind, PthreadMutex, PthreadRwLock, ReaderKind, WriterKind, WriterNonrecursiveKind,
};
use crate::tkrzw_spin::TkrzwSpinRwLock;
use crate::work::Shared;
use crate::{flood, handoff, relay, throughput};

/// A reader-writer lock as the benchmark uses it: run a closure under a read or a write lock.
pub trait BenchRwLock<T>: Send + Sync {
    /// A new, unlocked lock protecting `value`.
    fn new(value: T) -> Self;
    /// Runs `f` under a shared lock.
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R;
    /// Runs `f` under the exclusive lock.
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// A mutex as the benchmark uses it: run a closure under the lock.
pub trait BenchMutex<T>: Send + Sync {
    /// A new, unlocked mutex protecting `value`.
    fn new(value: T) -> Self;
    /// Runs `f` under the lock.
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

impl<L: lock_api::RawRwLock + Send + Sync, T: Send + Sync> BenchRwLock<T>
    for lock_api::RwLock<L, T>
{
    fn new(value: T) -> Self {
        lock_api::RwLock::new(value)
    }
    #[inline]
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&lock_api::RwLock::read(self))
    }
    #[inline]
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut lock_api::RwLock::write(self))
    }
}

impl<L: lock_api::RawMutex + Send + Sync, T: Send> BenchMutex<T> for lock_api::Mutex<L, T> {
    fn new(value: T) -> Self {
        lock_api::Mutex::new(value)
    }
    #[inline]
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut lock_api::Mutex::lock(self))
    }
}

/// std's locks ignore poisoning here: a panicking worker fails the whole run anyway.
impl<T: Send + Sync> BenchRwLock<T> for std::sync::RwLock<T> {
    fn new(value: T) -> Self {
        std::sync::RwLock::new(value)
    }
    #[inline]
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&std::sync::RwLock::read(self).unwrap_or_else(std::sync::PoisonError::into_inner))
    }
    #[inline]
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut std::sync::RwLock::write(self).unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl<T: Send> BenchMutex<T> for std::sync::Mutex<T> {
    fn new(value: T) -> Self {
        std::sync::Mutex::new(value)
    }
    #[inline]
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut std::sync::Mutex::lock(self).unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl<T: Send + Sync> BenchRwLock<T> for spin::RwLock<T> {
    fn new(value: T) -> Self {
        spin::RwLock::new(value)
    }
    #[inline]
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&spin::RwLock::read(self))
    }
    #[inline]
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut spin::RwLock::write(self))
    }
}

impl<T: Send> BenchMutex<T> for spin::Mutex<T> {
    fn new(value: T) -> Self {
        spin::Mutex::new(value)
    }
    #[inline]
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut spin::Mutex::lock(self))
    }
}

/// A mutex seen as a reader-writer lock whose reads are exclusive too, so the throughput
/// scenario can run mutexes through the same code.
#[derive(Debug)]
pub struct Exclusive<M>(pub M);

impl<T: Send + Sync, M: BenchMutex<T>> BenchRwLock<T> for Exclusive<M> {
    fn new(value: T) -> Self {
        Self(M::new(value))
    }
    #[inline]
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.0.lock(|v| f(v))
    }
    #[inline]
    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.0.lock(f)
    }
}

/// A reader-writer lock in the benchmark, with its scenarios monomorphized for it.
#[derive(Clone, Copy)]
pub struct RwPeer {
    /// The name shown in tables and JSON (`"senju::SpinRwLock"`, `"pthread(default)"`, ...).
    pub name: &'static str,
    /// Whether this is one of senju's own locks (the targets are checked for these).
    pub senju: bool,
    pub(crate) throughput: fn(&throughput::CellSpec) -> throughput::CellRun,
    pub(crate) flood: fn(&flood::FloodSpec) -> flood::FloodRun,
    pub(crate) relay: fn(&relay::RelaySpec) -> relay::RelayRun,
}

impl RwPeer {
    /// The peer for lock type `L`.
    pub fn of<L: BenchRwLock<Shared> + 'static>(name: &'static str, senju: bool) -> Self {
        Self {
            name,
            senju,
            throughput: throughput::run_cell::<L>,
            flood: flood::run_once::<L>,
            relay: relay::run_once::<L>,
        }
    }
}

impl core::fmt::Debug for RwPeer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RwPeer").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A mutex in the benchmark, with its scenarios monomorphized for it.
#[derive(Clone, Copy)]
pub struct MutexPeer {
    /// The name shown in tables and JSON (`"senju::Mutex"`, `"pthread_mutex"`, ...).
    pub name: &'static str,
    /// Whether this is one of senju's own locks (the targets are checked for these).
    pub senju: bool,
    pub(crate) throughput: fn(&throughput::CellSpec) -> throughput::CellRun,
    pub(crate) handoff: fn(&handoff::HandoffSpec) -> handoff::HandoffRun,
}

impl MutexPeer {
    /// The peer for mutex type `M`.
    pub fn of<M: BenchMutex<Shared> + 'static>(name: &'static str, senju: bool) -> Self {
        Self {
            name,
            senju,
            throughput: throughput::run_cell::<Exclusive<M>>,
            handoff: handoff::run_once::<M>,
        }
    }
}

impl core::fmt::Debug for MutexPeer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MutexPeer").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Name of senju's spin reader-writer lock in results.
pub const SENJU_SPIN_RWLOCK: &str = "senju::SpinRwLock";
/// Name of senju's phase-fair reader-writer lock in results.
pub const SENJU_FAIR_RWLOCK: &str = "senju::FairRwLock";
/// Name of parking_lot's reader-writer lock in results.
pub const PARKING_LOT_RWLOCK: &str = "parking_lot::RwLock";
/// Name of senju's mutex in results.
pub const SENJU_MUTEX: &str = "senju::Mutex";
/// Name of parking_lot's mutex in results.
pub const PARKING_LOT_MUTEX: &str = "parking_lot::Mutex";
/// Name of glibc's default-kind rwlock in results.
pub const PTHREAD_RWLOCK_DEFAULT: &str = "pthread_rwlock(default)";
/// Name of the Tkrzw-style spin lock in results.
pub const TKRZW_SPIN: &str = "tkrzw-spin";

/// Every reader-writer lock peer, senju's first.
pub fn rw_peers() -> Vec<RwPeer> {
    vec![
        RwPeer::of::<senju_sync::SpinRwLock<Shared>>(SENJU_SPIN_RWLOCK, true),
        RwPeer::of::<senju_sync::FairRwLock<Shared>>(SENJU_FAIR_RWLOCK, true),
        RwPeer::of::<parking_lot::RwLock<Shared>>(PARKING_LOT_RWLOCK, false),
        RwPeer::of::<std::sync::RwLock<Shared>>("std::RwLock", false),
        RwPeer::of::<spin::RwLock<Shared>>("spin::RwLock", false),
        RwPeer::of::<PthreadRwLock<DefaultKind, Shared>>(PTHREAD_RWLOCK_DEFAULT, false),
        RwPeer::of::<PthreadRwLock<WriterNonrecursiveKind, Shared>>(
            PTHREAD_RWLOCK_WRITER_NONREC,
            false,
        ),
        RwPeer::of::<TkrzwSpinRwLock<Shared>>(TKRZW_SPIN, false),
    ]
}

/// Name of glibc's rwlock with `PTHREAD_RWLOCK_PREFER_READER_NP` in results.
pub const PTHREAD_RWLOCK_PREFER_READER: &str = "pthread_rwlock(prefer-reader)";
/// Name of glibc's rwlock with `PTHREAD_RWLOCK_PREFER_WRITER_NP` in results.
pub const PTHREAD_RWLOCK_PREFER_WRITER: &str = "pthread_rwlock(prefer-writer)";
/// Name of glibc's rwlock with `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP` in results.
pub const PTHREAD_RWLOCK_WRITER_NONREC: &str = "pthread_rwlock(writer-nonrec)";

/// The reader-writer locks of `senju lab rwlock`: [`rw_peers`] plus glibc's rwlock with each
/// explicit `pthread_rwlockattr_setkind_np` kind, so every glibc policy is measured.
pub fn rwlock_lab_peers() -> Vec<RwPeer> {
    let mut peers = rw_peers();
    let at =
        peers.iter().position(|p| p.name == PTHREAD_RWLOCK_DEFAULT).map_or(peers.len(), |i| i + 1);
    peers.splice(
        at..at,
        [
            RwPeer::of::<PthreadRwLock<ReaderKind, Shared>>(PTHREAD_RWLOCK_PREFER_READER, false),
            RwPeer::of::<PthreadRwLock<WriterKind, Shared>>(PTHREAD_RWLOCK_PREFER_WRITER, false),
        ],
    );
    peers
}

/// Every mutex peer, senju's first.
pub fn mutex_peers() -> Vec<MutexPeer> {
    vec![
        MutexPeer::of::<senju_sync::Mutex<Shared>>(SENJU_MUTEX, true),
        MutexPeer::of::<parking_lot::Mutex<Shared>>(PARKING_LOT_MUTEX, false),
        MutexPeer::of::<parking_lot::FairMutex<Shared>>("parking_lot::FairMutex", false),
        MutexPeer::of::<std::sync::Mutex<Shared>>("std::Mutex", false),
        MutexPeer::of::<spin::Mutex<Shared>>("spin::Mutex", false),
        MutexPeer::of::<PthreadMutex<Shared>>("pthread_mutex", false),
    ]
}

/// The peers whose name contains one of `filters` (case-insensitive); all if `filters` is
/// empty.
pub fn select<P: Copy>(peers: &[P], name: impl Fn(&P) -> &str, filters: &[String]) -> Vec<P> {
    peers
        .iter()
        .filter(|p| {
            filters.is_empty()
                || filters.iter().any(|f| name(p).to_lowercase().contains(&f.to_lowercase()))
        })
        .copied()
        .collect()
}
