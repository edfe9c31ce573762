//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("senju-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Lowers this process's soft limit on `resource` (a `libc::RLIMIT_*`) to `soft`, or to the
/// hard limit if that is lower. For test files that hold a single test: it applies to the
/// whole process.
#[cfg(target_os = "linux")]
pub fn set_soft_limit(resource: libc::__rlimit_resource_t, soft: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a plain system call with a valid pointer to a local.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut lim) }, 0);
    lim.rlim_cur = soft.min(lim.rlim_max);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(resource, &lim) }, 0);
}

/// A small deterministic generator (xorshift64) for tests that pick at random from a seed.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Values for the property tests: mostly short, some up to 5,000 bytes, and some of 4,000 to
/// 40,000 bytes, records in chunks of their own (which are recycled when replaced).
pub fn value() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..12),
        1 => proptest::collection::vec(any::<u8>(), 0..5000),
        1 => proptest::collection::vec(any::<u8>(), 4000..40_000),
    ]
}
