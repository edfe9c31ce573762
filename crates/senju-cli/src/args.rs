//! Flags of `senju perf`, spelled as `tkrzw_dbm_perf` spells them.

use std::path::PathBuf;

/// Which engine to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    File,
    Memory,
}

/// The options of `perf sequence`.
#[derive(Clone, Debug)]
pub(crate) struct SequenceArgs {
    pub(crate) path: Option<PathBuf>,
    pub(crate) engine: Engine,
    pub(crate) iter: u64,
    pub(crate) threads: u64,
    pub(crate) size: usize,
    /// Tkrzw's bucket count, passed on as a capacity hint (expected records).
    pub(crate) buckets: u64,
    pub(crate) random_key: bool,
    pub(crate) random_value: bool,
    pub(crate) seed: u64,
    pub(crate) set: bool,
    pub(crate) get: bool,
    pub(crate) remove: bool,
    pub(crate) validate: bool,
}

fn number<T: std::str::FromStr>(flag: &str, v: Option<&&str>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse().map_err(|_| format!("{flag}: not a number: {v}"))
}

impl SequenceArgs {
    pub(crate) fn parse(argv: &[&str]) -> Result<SequenceArgs, String> {
        let mut a = SequenceArgs {
            path: None,
            engine: Engine::File,
            iter: 10_000,
            threads: 1,
            size: 8,
            buckets: 0,
            random_key: false,
            random_value: false,
            seed: 0,
            set: false,
            get: false,
            remove: false,
            validate: false,
        };
        let mut it = argv.iter();
        while let Some(&flag) = it.next() {
            match flag {
                "--path" => a.path = Some(it.next().ok_or("--path needs a value")?.into()),
                "--dbm" => {
                    a.engine = match *it.next().ok_or("--dbm needs a value")? {
                        "auto" | "file" | "hash" => Engine::File,
                        "memory" | "tiny" => Engine::Memory,
                        other => return Err(format!("--dbm: unknown engine {other}")),
                    }
                }
                "--iter" => a.iter = number(flag, it.next())?,
                "--threads" => a.threads = number::<u64>(flag, it.next())?.max(1),
                "--size" => a.size = number(flag, it.next())?,
                "--buckets" => a.buckets = number(flag, it.next())?,
                "--random_seed" => a.seed = number(flag, it.next())?,
                "--random_key" => a.random_key = true,
                "--random_value" => a.random_value = true,
                "--set_only" => a.set = true,
                "--get_only" => a.get = true,
                "--remove_only" => a.remove = true,
                "--validate" => a.validate = true,
                other => return Err(format!("unknown option: {other}")),
            }
        }
        if !(a.set || a.get || a.remove) {
            (a.set, a.get, a.remove) = (true, true, true);
        }
        Ok(a)
    }
}
