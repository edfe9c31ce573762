//! glibc's `pthread_rwlock_t` (the default and each `pthread_rwlockattr_setkind_np` kind) and
//! `pthread_mutex_t`, wrapped for the benchmark traits.
//!
//! A pthread lock must not move once initialized, so each one lives in its own `Box` next to
//! the data it protects and is destroyed in `Drop`. Return codes of lock and unlock calls are
//! checked with `assert_eq!`: a non-zero code means the benchmark misused the lock.

use core::cell::UnsafeCell;
use core::marker::PhantomData;

use crate::peers::{BenchMutex, BenchRwLock};

/// `PTHREAD_RWLOCK_PREFER_READER_NP` in glibc's `<pthread.h>`: the first member of the
/// anonymous enum there, and glibc's default.
pub const PTHREAD_RWLOCK_PREFER_READER_NP: libc::c_int = 0;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NP`: the second member. The Linux manual page
/// `pthread_rwlockattr_setkind_np(3)` says glibc ignores it (recursive read locks would
/// deadlock), so it behaves like `PREFER_READER_NP`; founding document `000` found the same.
pub const PTHREAD_RWLOCK_PREFER_WRITER_NP: libc::c_int = 1;
/// `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP` in glibc's `<pthread.h>`: the third member
/// (after `PREFER_READER_NP` = 0 and `PREFER_WRITER_NP` = 1) of the anonymous enum there.
pub const PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP: libc::c_int = 2;

unsafe extern "C" {
    // Declared by hand: the `libc` crate does not export it. glibc:
    // `int pthread_rwlockattr_setkind_np(pthread_rwlockattr_t *attr, int pref)`.
    fn pthread_rwlockattr_setkind_np(
        attr: *mut libc::pthread_rwlockattr_t,
        pref: libc::c_int,
    ) -> libc::c_int;
}

/// Which reader/writer preference a [`PthreadRwLock`] is initialized with.
pub trait RwLockKind: Send + Sync + 'static {
    /// The value for `pthread_rwlockattr_setkind_np`, or `None` to initialize with default
    /// attributes (glibc: prefer readers).
    const KIND: Option<libc::c_int>;
}

/// glibc's default: readers enter during a read phase even while a writer waits.
#[derive(Debug)]
pub enum DefaultKind {}

impl RwLockKind for DefaultKind {
    const KIND: Option<libc::c_int> = None;
}

/// `PTHREAD_RWLOCK_PREFER_READER_NP` set explicitly (the same policy as the default).
#[derive(Debug)]
pub enum ReaderKind {}

impl RwLockKind for ReaderKind {
    const KIND: Option<libc::c_int> = Some(PTHREAD_RWLOCK_PREFER_READER_NP);
}

/// `PTHREAD_RWLOCK_PREFER_WRITER_NP`: despite the name, glibc lets new readers in while a
/// writer waits, as with `PREFER_READER_NP`.
#[derive(Debug)]
pub enum WriterKind {}

impl RwLockKind for WriterKind {
    const KIND: Option<libc::c_int> = Some(PTHREAD_RWLOCK_PREFER_WRITER_NP);
}

/// `PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP`: new readers wait behind a waiting writer.
#[derive(Debug)]
pub enum WriterNonrecursiveKind {}

impl RwLockKind for WriterNonrecursiveKind {
    const KIND: Option<libc::c_int> = Some(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
}

struct RwInner<T> {
    lock: UnsafeCell<libc::pthread_rwlock_t>,
    data: UnsafeCell<T>,
}

/// A `pthread_rwlock_t` of kind `K` protecting a `T`.
pub struct PthreadRwLock<K: RwLockKind, T> {
    inner: Box<RwInner<T>>,
    kind: PhantomData<fn() -> K>,
}

// SAFETY: the pthread rwlock may be used from any thread; `T` is only reached through the
// lock (shared under a read lock, exclusive under the write lock), so the usual
// `RwLock<T>: Send + Sync` bounds apply.
unsafe impl<K: RwLockKind, T: Send> Send for PthreadRwLock<K, T> {}
// SAFETY: as above: `&T` is shared between readers (needs `T: Sync`), `&mut T` moves
// between writers (needs `T: Send`).
unsafe impl<K: RwLockKind, T: Send + Sync> Sync for PthreadRwLock<K, T> {}

impl<K: RwLockKind, T> PthreadRwLock<K, T> {
    /// A new, unlocked lock of kind `K`.
    pub fn new(value: T) -> Self {
        let inner = Box::new(RwInner {
            lock: UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER),
            data: UnsafeCell::new(value),
        });
        if let Some(kind) = K::KIND {
            let mut attr = core::mem::MaybeUninit::<libc::pthread_rwlockattr_t>::uninit();
            // SAFETY: `attr` is writable storage for one attribute object.
            let rc = unsafe { libc::pthread_rwlockattr_init(attr.as_mut_ptr()) };
            assert_eq!(rc, 0, "pthread_rwlockattr_init");
            // SAFETY: `attr` was initialized just above.
            let rc = unsafe { pthread_rwlockattr_setkind_np(attr.as_mut_ptr(), kind) };
            assert_eq!(rc, 0, "pthread_rwlockattr_setkind_np({kind})");
            // SAFETY: the lock sits in its final place (the box) and is not in use; `attr` is
            // initialized. Re-initializing a statically initialized rwlock is allowed.
            let rc = unsafe { libc::pthread_rwlock_init(inner.lock.get(), attr.as_ptr()) };
            assert_eq!(rc, 0, "pthread_rwlock_init");
            // SAFETY: `attr` is initialized and no longer needed.
            unsafe { libc::pthread_rwlockattr_destroy(attr.as_mut_ptr()) };
        }
        Self { inner, kind: PhantomData }
    }
}

impl<K: RwLockKind, T> Drop for PthreadRwLock<K, T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no guard is alive, so the lock is unlocked and unused.
        unsafe { libc::pthread_rwlock_destroy(self.inner.lock.get()) };
    }
}

impl<K: RwLockKind, T: Send + Sync> BenchRwLock<T> for PthreadRwLock<K, T> {
    fn new(value: T) -> Self {
        PthreadRwLock::new(value)
    }

    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let lock = self.inner.lock.get();
        // SAFETY: the lock was initialized in `new` and has not moved (it lives in the box).
        let rc = unsafe { libc::pthread_rwlock_rdlock(lock) };
        assert_eq!(rc, 0, "pthread_rwlock_rdlock");
        let unlock = Unlock(|| {
            // SAFETY: this thread holds the read lock taken above.
            let rc = unsafe { libc::pthread_rwlock_unlock(lock) };
            debug_assert_eq!(rc, 0, "pthread_rwlock_unlock");
        });
        // SAFETY: the read lock is held, so no writer holds `&mut T` until `unlock` runs.
        let out = f(unsafe { &*self.inner.data.get() });
        drop(unlock);
        out
    }

    fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let lock = self.inner.lock.get();
        // SAFETY: the lock was initialized in `new` and has not moved (it lives in the box).
        let rc = unsafe { libc::pthread_rwlock_wrlock(lock) };
        assert_eq!(rc, 0, "pthread_rwlock_wrlock");
        let unlock = Unlock(|| {
            // SAFETY: this thread holds the write lock taken above.
            let rc = unsafe { libc::pthread_rwlock_unlock(lock) };
            debug_assert_eq!(rc, 0, "pthread_rwlock_unlock");
        });
        // SAFETY: the write lock is held, so this is the only reference to the data.
        let out = f(unsafe { &mut *self.inner.data.get() });
        drop(unlock);
        out
    }
}

struct MutexInner<T> {
    lock: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
}

/// A default-kind `pthread_mutex_t` protecting a `T`.
pub struct PthreadMutex<T> {
    inner: Box<MutexInner<T>>,
}

// SAFETY: the pthread mutex may be locked and unlocked from any thread (by the same thread
// for each hold); `T` is reached only under the lock, so `T: Send` suffices for both.
unsafe impl<T: Send> Send for PthreadMutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for PthreadMutex<T> {}

impl<T> PthreadMutex<T> {
    /// A new, unlocked mutex (`PTHREAD_MUTEX_INITIALIZER`).
    pub fn new(value: T) -> Self {
        Self {
            inner: Box::new(MutexInner {
                lock: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
                data: UnsafeCell::new(value),
            }),
        }
    }
}

impl<T> Drop for PthreadMutex<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no guard is alive, so the mutex is unlocked and unused.
        unsafe { libc::pthread_mutex_destroy(self.inner.lock.get()) };
    }
}

impl<T: Send> BenchMutex<T> for PthreadMutex<T> {
    fn new(value: T) -> Self {
        PthreadMutex::new(value)
    }

    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let lock = self.inner.lock.get();
        // SAFETY: the mutex is initialized and has not moved (it lives in the box).
        let rc = unsafe { libc::pthread_mutex_lock(lock) };
        assert_eq!(rc, 0, "pthread_mutex_lock");
        let unlock = Unlock(|| {
            // SAFETY: this thread holds the mutex taken above.
            let rc = unsafe { libc::pthread_mutex_unlock(lock) };
            debug_assert_eq!(rc, 0, "pthread_mutex_unlock");
        });
        // SAFETY: the mutex is held, so this is the only reference to the data.
        let out = f(unsafe { &mut *self.inner.data.get() });
        drop(unlock);
        out
    }
}

/// Runs its closure on drop, so a panicking critical section still unlocks.
struct Unlock<F: FnMut()>(F);

impl<F: FnMut()> Drop for Unlock<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_lock_and_unlock() {
        let a = PthreadRwLock::<DefaultKind, u32>::new(1);
        let b = PthreadRwLock::<WriterNonrecursiveKind, u32>::new(2);
        let c = PthreadRwLock::<ReaderKind, u32>::new(3);
        let d = PthreadRwLock::<WriterKind, u32>::new(4);
        a.write(|v| *v += 1);
        b.write(|v| *v += 1);
        c.write(|v| *v += 1);
        d.write(|v| *v += 1);
        assert_eq!(a.read(|v| *v) + b.read(|v| *v), 5);
        assert_eq!(c.read(|v| *v) + d.read(|v| *v), 9);
        let m = PthreadMutex::new(0u32);
        m.lock(|v| *v = 7);
        assert_eq!(m.lock(|v| *v), 7);
    }
}
