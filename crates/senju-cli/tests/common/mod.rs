//! Helpers shared by the `senju perf` integration tests: run the built binary and read its
//! output.

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
