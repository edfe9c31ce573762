//! Helpers shared by the integration tests: run the built binary, read its output, and work
//! in a scratch directory. Each test binary uses a part of them.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the `senju` binary built for these tests.
pub(crate) fn senju(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_senju")).args(args).output().unwrap()
}

/// Runs `senju` and returns its stdout, failing the test (with both streams) if it fails.
pub(crate) fn run(args: &[&str]) -> String {
    let out = senju(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `senju`, which must fail with status 1 and one `senju: ...` line on stderr containing
/// `needle`; returns that line.
pub(crate) fn fails(args: &[&str], needle: &str) -> String {
    let out = senju(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.starts_with("senju: ") && err.lines().count() == 1, "{args:?}: {err:?}");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err:?}");
    err
}

/// A fresh directory, removed on drop.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Dir {
    pub(crate) fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("senju-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    /// The path of `name` inside the directory, as a string.
    pub(crate) fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }

    /// The names in the directory, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Permission bits of `path` (following links).
pub(crate) fn mode(path: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}
