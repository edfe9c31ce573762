//! Operating-system helpers around the database file: the advisory writer lock (`flock`),
//! anonymous memory files for [`Db::memory`](crate::Db::memory), and random salts.
//!
//! A writer takes `flock(LOCK_EX | LOCK_NB)`, a read-only handle `flock(LOCK_SH | LOCK_NB)`,
//! on the open file description, so it is held until
//! the descriptor is closed (or [`unlock`] is called) and it also excludes a second `open` of
//! the same file inside one process. `flock` does not report the holder, so each writer
//! records its pid in the file header right after taking the lock; a refused opener reads it.
//!
//! Every holder gives its lock back with [`unlock`] rather than leaving that to the close:
//! the open file description outlives our descriptor while any copy of it is open, and a
//! child process that another thread forks holds a copy of every descriptor until it calls
//! `exec` (`O_CLOEXEC` closes them only then). A lock left to the close could so outlive its
//! holder for that window and refuse the next opener. [`Unlocking`] does it on every path.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd};

/// Which advisory lock to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A writer: excludes every other handle.
    Exclusive,
    /// A read-only handle: shares with other read-only handles, excludes writers.
    Shared,
}

/// Takes the advisory lock without waiting. `Ok(false)` when another open file description
/// holds a lock that conflicts.
pub(crate) fn try_lock(file: &File, kind: Kind) -> io::Result<bool> {
    let op = match kind {
        Kind::Exclusive => libc::LOCK_EX,
        Kind::Shared => libc::LOCK_SH,
    };
    // SAFETY: a plain syscall on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(false) } else { Err(err) }
}

/// Releases the advisory lock.
pub(crate) fn unlock(file: &File) -> io::Result<()> {
    // SAFETY: a plain syscall on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// A file whose advisory lock is given back ([`unlock`]) when this is dropped, unless
/// [`keep`](Unlocking::keep) says the lock now belongs to something else.
pub(crate) struct Unlocking {
    file: File,
    armed: bool,
}

impl Unlocking {
    /// Wraps a file whose lock this process has just taken.
    pub(crate) fn new(file: File) -> Self {
        Self { file, armed: true }
    }

    /// Leaves the lock in place: dropping only closes this descriptor.
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }
}

impl Deref for Unlocking {
    type Target = File;

    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for Unlocking {
    fn drop(&mut self) {
        if self.armed {
            // Nothing to do if this fails: the close right after gives the lock back unless
            // another copy of the descriptor is open.
            let _ = unlock(&self.file);
        }
    }
}

/// An anonymous, growable in-memory file (`memfd_create`).
pub(crate) fn memfd() -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated literal; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"senju".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// A random 64-bit value from the kernel (falls back to time and pid if `getrandom` fails).
pub(crate) fn random_u64() -> u64 {
    let mut v = [0u8; 8];
    // SAFETY: `v` is a writable 8-byte buffer.
    let n = unsafe { libc::getrandom(v.as_mut_ptr().cast(), v.len(), 0) };
    if n == 8 {
        return u64::from_le_bytes(v);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_file_description_is_refused() {
        let dir = std::env::temp_dir().join(format!("senju-flock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        assert!(try_lock(&a, Kind::Exclusive).unwrap());
        assert!(!try_lock(&b, Kind::Exclusive).unwrap());
        assert!(!try_lock(&b, Kind::Shared).unwrap());
        unlock(&a).unwrap();
        assert!(try_lock(&b, Kind::Shared).unwrap());
        assert!(try_lock(&a, Kind::Shared).unwrap(), "shared locks coexist");
        assert!(!try_lock(&File::open(&path).unwrap(), Kind::Exclusive).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A copy of the descriptor left open (as a child forked by another thread holds one
    /// until it execs) does not keep a dropped [`Unlocking`]'s lock; a kept one stays.
    #[test]
    fn unlocking_gives_the_lock_back_while_a_copy_of_the_descriptor_is_open() {
        let dir = std::env::temp_dir().join(format!("senju-unlocking-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let a = File::create(&path).unwrap();
        assert!(try_lock(&a, Kind::Shared).unwrap());
        let copy = a.try_clone().unwrap();
        drop(Unlocking::new(a));
        assert!(try_lock(&File::open(&path).unwrap(), Kind::Exclusive).unwrap());
        drop(copy);

        let b = File::open(&path).unwrap();
        assert!(try_lock(&b, Kind::Exclusive).unwrap());
        let copy = b.try_clone().unwrap();
        Unlocking::new(b).keep();
        assert!(!try_lock(&File::open(&path).unwrap(), Kind::Shared).unwrap(), "kept");
        drop(copy);
        assert!(try_lock(&File::open(&path).unwrap(), Kind::Shared).unwrap(), "closed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
