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

/// Sets the permission bits of `path` (following links).
pub(crate) fn chmod(path: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether these tests run as root (some need to make files another user's).
pub(crate) fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs `senju` as the user `nobody` (65534) through `setpriv`, where these tests run as
/// root and `setpriv` is there; `None` (and a note on stderr, for a test to skip) where not.
pub(crate) fn as_nobody(args: &[&str]) -> Option<Output> {
    if !is_root() {
        eprintln!("skipped: needs root to run senju as nobody");
        return None;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_senju")])
        .args(args)
        .output();
    match out {
        Ok(o) => Some(o),
        Err(e) => {
            eprintln!("skipped: cannot run setpriv: {e}");
            None
        }
    }
}

/// Makes a FIFO at `path`.
pub(crate) fn mkfifo(path: &str) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {path}");
}

/// Runs `senju import DB FIFO --truncate` (`fifo` made by [`mkfifo`]) and returns its
/// output. The import opens the FIFO before it creates its copy and waits there until this
/// opens the other end; `before` runs first, with the import's process id. With
/// `while_filling`, once a new name `DB.import-...` appears beside the database, it runs with
/// that path while the import waits for its input; then `input` is written and the FIFO
/// closed.
pub(crate) fn import_through_fifo(
    d: &Dir,
    db: &str,
    fifo: &str,
    input: &str,
    before: impl FnOnce(u32),
    while_filling: Option<&dyn Fn(&str)>,
) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["import", db, fifo, "--truncate"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    before(child.id());
    let there = d.names();
    let mut w = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
    if let Some(f) = while_filling {
        let name = std::path::Path::new(db).file_name().unwrap().to_str().unwrap();
        let prefix = format!("{name}.import-");
        // Polled (the import has nothing to signal with), for up to a minute.
        let copy = (0..30_000).find_map(|_| {
            let found =
                d.names().into_iter().find(|n| n.starts_with(&prefix) && !there.contains(n));
            if found.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            found
        });
        f(&d.file(&copy.expect("the import created its copy")));
    }
    w.write_all(input.as_bytes()).unwrap();
    drop(w);
    child.wait_with_output().unwrap()
}

/// Fills `db` with 100 records (`key000` .. `key099`, values `value number NNN`).
pub(crate) fn hundred_records(db: &str) {
    for i in 0..100 {
        run(&["set", db, &format!("key{i:03}"), &format!("value number {i:03}")]);
    }
}

/// Flips a bit in the stored value of `key042`, so that its record fails its checksum (a
/// `check --repair` then keeps 99 records of 100).
pub(crate) fn damage_one_value(db: &str) {
    let mut bytes = std::fs::read(db).unwrap();
    let needle = b"value number 042";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("value in file");
    bytes[at + 2] ^= 0x40;
    std::fs::write(db, &bytes).unwrap();
}
