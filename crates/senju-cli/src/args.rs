//! Flags of `senju perf`, spelled as `tkrzw_dbm_perf` spells them.
//!
//! One parser serves the three workloads; each accepts only the flags `tkrzw_dbm_perf`
//! accepts for it (plus `--dbm memory` and the hidden test flag of `wicked`), so a typo or a
//! flag of another workload is an error rather than silently ignored.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use senju::Db;

/// Which engine to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    File,
    Memory,
}

impl Engine {
    /// The name printed in `impl=`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::File => "file",
            Engine::Memory => "memory",
        }
    }
}

/// Which `perf` workload the flags are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    Sequence,
    Parallel,
    Wicked,
}

/// The options of `senju perf`. Fields a workload does not take keep their defaults.
#[derive(Clone, Debug)]
pub(crate) struct PerfArgs {
    pub(crate) path: Option<PathBuf>,
    pub(crate) engine: Engine,
    pub(crate) iter: u64,
    pub(crate) threads: u64,
    pub(crate) size: usize,
    /// Tkrzw's bucket count, passed on as a capacity hint (expected records).
    pub(crate) buckets: u64,
    /// `--auto_rebuild`: the database's automatic rebuild threshold (off unless given, as
    /// `tkrzw_dbm_perf` never rebuilds unless told).
    pub(crate) auto_rebuild: Option<u64>,
    pub(crate) random_key: bool,
    pub(crate) random_value: bool,
    pub(crate) seed: u64,
    pub(crate) validate: bool,
    /// `sequence`: which phases to run.
    pub(crate) set: bool,
    pub(crate) get: bool,
    pub(crate) remove: bool,
    /// `sequence --batch`: operations per `set_many`/`get_many`/`remove_many` call (1: one
    /// call per operation).
    pub(crate) batch: usize,
    /// `parallel --keys`: key numbers are reduced modulo this (0: no reduction).
    pub(crate) keys: u64,
    /// `parallel --sleep`: pause after every operation.
    pub(crate) sleep: Duration,
    /// `parallel --rebuild`, `wicked --rebuild`: rebuild the database now and then.
    pub(crate) rebuild: bool,
    /// `wicked --iterator`, `--clear`, `--sync`: the occasional operations.
    pub(crate) iterator: bool,
    pub(crate) clear: bool,
    pub(crate) sync: bool,
    /// `wicked --debug_corrupt_model` (hidden): alters the model after the run so that
    /// `--validate` must fail; the tests use it to show that validation can fail.
    pub(crate) corrupt_model: bool,
}

fn number<T: std::str::FromStr>(flag: &str, v: Option<&&str>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse().map_err(|_| format!("{flag}: not a number: {v}"))
}

impl PerfArgs {
    pub(crate) fn parse(workload: Workload, argv: &[&str]) -> Result<PerfArgs, String> {
        use Workload::{Parallel, Sequence, Wicked};
        let mut a = PerfArgs {
            path: None,
            engine: Engine::File,
            iter: 10_000,
            threads: 1,
            size: 8,
            buckets: 0,
            auto_rebuild: None,
            random_key: false,
            random_value: false,
            seed: 0,
            validate: false,
            set: false,
            get: false,
            remove: false,
            batch: 1,
            keys: 0,
            sleep: Duration::ZERO,
            rebuild: false,
            iterator: false,
            clear: false,
            sync: false,
            corrupt_model: false,
        };
        let mut it = argv.iter();
        while let Some(&flag) = it.next() {
            match (flag, workload) {
                ("--path", _) => a.path = Some(it.next().ok_or("--path needs a value")?.into()),
                ("--dbm", _) => {
                    a.engine = match *it.next().ok_or("--dbm needs a value")? {
                        "auto" | "file" | "hash" => Engine::File,
                        "memory" | "tiny" => Engine::Memory,
                        other => return Err(format!("--dbm: unknown engine {other}")),
                    }
                }
                ("--iter", _) => a.iter = within(flag, number(flag, it.next())?, 1, u64::MAX)?,
                ("--threads", _) => {
                    a.threads = within(flag, number(flag, it.next())?, 1, MAX_THREADS)?;
                }
                ("--size", _) => {
                    a.size = within(flag, number(flag, it.next())?, 0, senju::MAX_VALUE_LEN)?;
                }
                ("--buckets", _) => a.buckets = number(flag, it.next())?,
                ("--auto_rebuild", _) => a.auto_rebuild = Some(number(flag, it.next())?),
                ("--random_seed", _) => a.seed = number(flag, it.next())?,
                // wicked always draws keys and value lengths at random; the flags are
                // accepted there for symmetry and change nothing.
                ("--random_key", _) => a.random_key = true,
                ("--random_value", _) => a.random_value = true,
                ("--validate", _) => a.validate = true,
                ("--set_only", Sequence) => a.set = true,
                ("--get_only", Sequence) => a.get = true,
                ("--remove_only", Sequence) => a.remove = true,
                ("--batch", Sequence) => {
                    a.batch = within(flag, number(flag, it.next())?, 1, usize::MAX)?;
                }
                ("--keys", Parallel) => a.keys = number(flag, it.next())?,
                ("--sleep", Parallel) => {
                    let secs: f64 = number(flag, it.next())?;
                    a.sleep = Duration::try_from_secs_f64(secs)
                        .map_err(|_| format!("--sleep: not a duration in seconds: {secs}"))?;
                }
                ("--rebuild", Parallel | Wicked) => a.rebuild = true,
                ("--iterator", Wicked) => a.iterator = true,
                ("--clear", Wicked) => a.clear = true,
                ("--sync", Wicked) => a.sync = true,
                ("--debug_corrupt_model", Wicked) => a.corrupt_model = true,
                (other, _) => return Err(format!("unknown option: {other}")),
            }
        }
        if workload == Sequence && !(a.set || a.get || a.remove) {
            (a.set, a.get, a.remove) = (true, true, true);
        }
        if workload == Wicked {
            (a.random_key, a.random_value) = (true, true);
            if a.corrupt_model && !a.validate {
                return Err("--debug_corrupt_model needs --validate".into());
            }
        }
        Ok(a)
    }

    /// Opens the database the flags ask for: the file at `path` (emptied first if `truncate`)
    /// or a new in-memory one, with `--buckets` as the capacity hint and automatic rebuilds
    /// only if `--auto_rebuild` asks for them.
    pub(crate) fn open(&self, path: &std::path::Path, truncate: bool) -> Result<Db, String> {
        let builder = Db::builder()
            .capacity_hint(self.buckets)
            .auto_rebuild(self.auto_rebuild)
            .recovery_progress(crate::progress::recovery_bar());
        match self.engine {
            Engine::Memory => builder.memory(),
            Engine::File => builder.truncate(truncate).open(path),
        }
        .map_err(|e| e.to_string())
    }

    /// The database file to use, and a guard that deletes it when dropped if it is a
    /// temporary one (no `--path`, file engine), on success and on error alike.
    pub(crate) fn file_path(&self) -> (PathBuf, TempFile) {
        match (&self.path, self.engine) {
            (Some(p), _) => (p.clone(), TempFile(None)),
            (None, engine) => {
                let name = format!("senju-perf-{}.sj", std::process::id());
                let path = std::env::temp_dir().join(name);
                (path.clone(), TempFile::new((engine == Engine::File).then_some(path)))
            }
        }
    }
}

/// The most `--threads`: more than any machine runs at once, and few enough that a typo
/// (`--threads 1000000`) is an error, not a million threads.
const MAX_THREADS: u64 = 4096;

/// `n`, the value of `flag`, if it lies in `lo..=hi`; else an error naming the range.
fn within<T: PartialOrd + std::fmt::Display>(flag: &str, n: T, lo: T, hi: T) -> Result<T, String> {
    if n < lo || n > hi {
        return Err(format!("{flag}: {n} is out of range ({lo} to {hi})"));
    }
    Ok(n)
}

/// Deletes a temporary database file when dropped. Declare it before the database handle,
/// so that the handle is closed first.
///
/// The file is also listed in [`TEMP_FILES`], so that an exit that runs no destructors (a
/// failed write to standard output, see [`crate::report::exit`]) removes it too.
pub(crate) struct TempFile(Option<PathBuf>);

/// The temporary files of every live [`TempFile`].
static TEMP_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

impl TempFile {
    fn new(path: Option<PathBuf>) -> TempFile {
        if let Some(p) = &path {
            register_temp_file(p);
        }
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
            forget_temp_file(p);
        }
    }
}

/// Lists `path` among the files that an exit skipping destructors removes (an interrupt
/// included): a temporary database, or a new file staged beside the one it will replace.
pub(crate) fn register_temp_file(path: &std::path::Path) {
    TEMP_FILES.lock().unwrap_or_else(PoisonError::into_inner).push(path.to_path_buf());
}

/// Takes `path` off that list: its owner removed it, or renamed it into place.
pub(crate) fn forget_temp_file(path: &std::path::Path) {
    TEMP_FILES.lock().unwrap_or_else(PoisonError::into_inner).retain(|q| q != path);
}

/// Removes the files of every live [`TempFile`] and staged file: called on the way out by
/// an exit that skips their destructors (a failed write to standard output, an interrupt).
/// Another thread may still write to such a file; unlinking it is safe while it is open,
/// and the process ends right after.
pub(crate) fn remove_temp_files() {
    for p in TEMP_FILES.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_out_of_range_are_errors_naming_the_range() {
        let parse = |args: &[&str]| PerfArgs::parse(Workload::Sequence, args);
        for (args, range) in [
            (&["--iter", "0"][..], "(1 to"),
            (&["--threads", "0"], "(1 to 4096)"),
            (&["--threads", "1000000"], "(1 to 4096)"),
            (&["--batch", "0"], "(1 to"),
            (&["--size", "1073741825"], "(0 to 1073741824)"),
        ] {
            let e = parse(args).err().unwrap_or_else(|| panic!("{args:?} was accepted"));
            assert!(e.starts_with(&format!("{}: ", args[0])) && e.contains(range), "{e}");
        }
        let a = parse(&["--iter", "1", "--threads", "4096", "--size", "1073741824"]).unwrap();
        assert_eq!((a.iter, a.threads, a.size), (1, 4096, 1 << 30));
    }

    #[test]
    fn flags_belong_to_their_workload() {
        let p = PerfArgs::parse(Workload::Parallel, &["--keys", "10", "--sleep", "0.001"]);
        let p = p.unwrap();
        assert_eq!((p.keys, p.sleep), (10, Duration::from_millis(1)));
        assert!(PerfArgs::parse(Workload::Sequence, &["--keys", "10"]).is_err());
        assert!(PerfArgs::parse(Workload::Parallel, &["--iterator"]).is_err());
        assert!(PerfArgs::parse(Workload::Wicked, &["--set_only"]).is_err());
        let w = PerfArgs::parse(Workload::Wicked, &["--clear", "--validate"]).unwrap();
        assert!(w.clear && w.validate && w.random_key && w.random_value);
        assert!(PerfArgs::parse(Workload::Wicked, &["--debug_corrupt_model"]).is_err());
    }

    #[test]
    fn sequence_runs_every_phase_unless_told() {
        let s = PerfArgs::parse(Workload::Sequence, &[]).unwrap();
        assert!(s.set && s.get && s.remove);
        let s = PerfArgs::parse(Workload::Sequence, &["--get_only"]).unwrap();
        assert!(!s.set && s.get && !s.remove);
    }
}
