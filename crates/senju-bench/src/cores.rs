//! The language multi-core check of founding document `000` (part 3): T threads each do the
//! same number of integer multiplications; with real parallelism the time stays flat up to
//! the core count, with a global interpreter lock it grows with T.
//!
//! Every language runs the same loop, `x = (x * 1103515245 + 12345) mod 2^32`, a dependent
//! chain nothing can vectorize or skip. Interpreters and compilers found on `PATH` are used
//! (Python, Ruby, Perl with ithreads, Java, Go, Node with `worker_threads`); the others are
//! listed as skipped with the reason. Rust runs in this process. Java and Go programs are
//! compiled at run time into a temporary directory.
//!
//! Each language gets one calibration run that sizes the loop so one thread takes about
//! [`CoresParams::target_ms`], then one process runs a warm-up (discarded) and every thread
//! count `rounds` times, round after round. The figure is the speedup
//! `T × median(time at 1) / median(time at T)`: T for perfect scaling, 1 for none.
//! Nothing here asserts on time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::stats::Spread;

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoresParams {
    /// Thread counts.
    pub threads: Vec<usize>,
    /// The calibrated time of one thread's loop, in milliseconds.
    pub target_ms: u64,
    /// Runs of every thread count.
    pub rounds: usize,
    /// Languages to try (names as [`Language::name`] spells them); all when empty.
    pub languages: Vec<String>,
}

impl Default for CoresParams {
    /// Threads {1, 2, 4, 8}, 100 ms per thread, 3 rounds, every language.
    fn default() -> Self {
        Self { threads: vec![1, 2, 4, 8], target_ms: 100, rounds: 3, languages: Vec::new() }
    }
}

/// A language of the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// CPython (`python3`), `threading`.
    Python,
    /// Ruby (`ruby`), `Thread`.
    Ruby,
    /// Perl (`perl`), `threads` (ithreads).
    Perl,
    /// Java (`javac` and `java`), `Thread`.
    Java,
    /// Go (`go`), goroutines.
    Go,
    /// Node.js (`node`), `worker_threads`.
    Node,
    /// Rust, `std::thread`, in this process.
    Rust,
}

impl Language {
    /// Every language, in the order tables show them.
    pub const ALL: [Language; 7] = [
        Language::Python,
        Language::Ruby,
        Language::Perl,
        Language::Java,
        Language::Go,
        Language::Node,
        Language::Rust,
    ];

    /// Its name in tables and filters.
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Ruby => "ruby",
            Language::Perl => "perl",
            Language::Java => "java",
            Language::Go => "go",
            Language::Node => "node",
            Language::Rust => "rust",
        }
    }

    /// Multiplications of the first calibration run: about a few milliseconds.
    fn first_guess(self) -> u64 {
        match self {
            Language::Python | Language::Ruby | Language::Perl => 100_000,
            _ => 1_000_000,
        }
    }
}

/// How one language fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Measured.
    Measured,
    /// Not installed or not usable here (see the reason).
    Skipped,
}

/// One thread count of one language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoresRow {
    /// Threads.
    pub threads: usize,
    /// Wall seconds of the threaded section, across rounds.
    pub seconds: Spread,
    /// `threads × median seconds at 1 thread / median seconds here`.
    pub speedup: f64,
}

/// One language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanguageResult {
    /// The language.
    pub language: Language,
    /// Measured or skipped.
    pub outcome: Outcome,
    /// The version line its tool printed (or `rustc`'s for Rust).
    pub version: Option<String>,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// Multiplications per thread (after calibration).
    pub multiplications_per_thread: u64,
    /// One row per thread count.
    pub rows: Vec<CoresRow>,
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoresReport {
    /// What was run.
    pub params: CoresParams,
    /// One entry per language, in [`Language::ALL`] order.
    pub languages: Vec<LanguageResult>,
}

/// One row of the document's tables: seconds at 1, 2, 4, 8 threads on a 4-core Core i7 860.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Seed2012 {
    /// The language and version as the document names it.
    pub language: &'static str,
    /// Multiplications per thread.
    pub multiplications: u64,
    /// Seconds at 1, 2, 4 and 8 threads.
    pub seconds: [f64; 4],
}

impl Seed2012 {
    /// Speedups at 1, 2, 4 and 8 threads, as this module defines them.
    pub fn speedups(&self) -> [f64; 4] {
        let t = [1.0, 2.0, 4.0, 8.0];
        std::array::from_fn(|i| t[i] * self.seconds[0] / self.seconds[i])
    }
}

/// The tables of founding document `000` (the document prints Ruby and Perl; it names Java
/// and Python without figures).
pub const SEED_2012: [Seed2012; 3] = [
    Seed2012 {
        language: "Ruby 1.8.7",
        multiplications: 100_000,
        seconds: [3.16, 6.44, 12.87, 25.62],
    },
    Seed2012 { language: "Ruby 1.9", multiplications: 100_000, seconds: [1.76, 3.63, 7.13, 14.13] },
    Seed2012 {
        language: "Perl 5.14.2",
        multiplications: 100_000_000,
        seconds: [8.35, 8.46, 9.22, 16.02],
    },
];

/// Runs the check for every language in `params`; `progress` hears one line per step.
pub fn run(params: &CoresParams, progress: &mut dyn FnMut(&str)) -> CoresReport {
    let dir = std::env::temp_dir().join(format!("senju-lab-cores-{}", std::process::id()));
    let languages = Language::ALL
        .into_iter()
        .filter(|l| params.languages.is_empty() || params.languages.iter().any(|n| n == l.name()))
        .map(|l| {
            progress(&format!("cores {}", l.name()));
            match measure(l, params, &dir) {
                Ok(r) => r,
                Err(reason) => LanguageResult {
                    language: l,
                    outcome: Outcome::Skipped,
                    version: None,
                    reason: Some(reason),
                    multiplications_per_thread: 0,
                    rows: Vec::new(),
                },
            }
        })
        .collect();
    // Best effort: a leftover temporary directory is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    CoresReport { params: params.clone(), languages }
}

/// A runnable program: the command line before the two arguments (multiplications, threads).
struct Program {
    argv: Vec<String>,
    version: Option<String>,
}

fn measure(l: Language, params: &CoresParams, dir: &Path) -> Result<LanguageResult, String> {
    let program = if l == Language::Rust { None } else { Some(prepare(l, dir)?) };
    let run = |n: u64, threads: &[usize]| -> Result<Vec<(usize, f64)>, String> {
        match &program {
            None => Ok(threads.iter().map(|&t| (t, rust_threads(t, n))).collect()),
            Some(p) => run_program(p, n, threads, params.target_ms),
        }
    };
    // Calibrate: grow the loop until one thread takes at least 20 ms, then scale it. Each
    // calibration run goes twice and keeps the faster, so a JIT's first pass does not count.
    let target = params.target_ms.max(1) as f64 / 1000.0;
    let one = |n: u64| -> Result<f64, String> {
        Ok(run(n, &[1, 1])?.iter().map(|r| r.1).fold(f64::INFINITY, f64::min))
    };
    let mut n = l.first_guess();
    let mut secs = one(n)?;
    while secs < 0.02 && n < 1 << 40 {
        n *= 10;
        secs = one(n)?;
    }
    let n = ((n as f64 * target / secs.max(1e-6)) as u64).max(1000);
    let mut list = vec![1];
    for _ in 0..params.rounds.max(1) {
        list.extend(&params.threads);
    }
    let results = run(n, &list)?;
    let mut per_t: Vec<(usize, Vec<f64>)> = params.threads.iter().map(|&t| (t, vec![])).collect();
    // The first line is the warm-up.
    for &(t, s) in results.iter().skip(1) {
        if let Some(e) = per_t.iter_mut().find(|e| e.0 == t) {
            e.1.push(s);
        }
    }
    let spreads: Vec<(usize, Spread)> =
        per_t.into_iter().map(|(t, v)| (t, Spread::of(v))).collect();
    let one = spreads.iter().find(|(t, _)| *t == 1).map(|(_, s)| s.median);
    let rows = spreads
        .into_iter()
        .map(|(threads, seconds)| {
            // Without a 1-thread measurement, speedups are relative to the first count.
            let base = one.map_or(seconds.median, |b| b * threads as f64);
            CoresRow { threads, speedup: base / seconds.median.max(1e-9), seconds }
        })
        .collect();
    Ok(LanguageResult {
        language: l,
        outcome: Outcome::Measured,
        version: match &program {
            None => Some(format!("rustc (this binary), {} threads available", cpus())),
            Some(p) => p.version.clone(),
        },
        reason: None,
        multiplications_per_thread: n,
        rows,
    })
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `threads` threads × `n` multiplications; wall seconds.
fn rust_threads(threads: usize, n: u64) -> f64 {
    let n = std::hint::black_box(n);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                let mut x: u64 = 1;
                for _ in 0..n {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345) & 0xFFFF_FFFF;
                }
                std::hint::black_box(x)
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

/// Whether `tool` is on `PATH` (and, if so, its path).
fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// The first non-empty line `tool args` prints on stdout or stderr.
fn version(tool: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(tool).args(args).stdin(Stdio::null()).output().ok()?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

fn need(tool: &str) -> Result<PathBuf, String> {
    which(tool).ok_or_else(|| format!("{tool} not found on PATH"))
}

fn write_source(dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Runs a build step; its output becomes the error on failure.
fn build(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("{what} failed: {}", err.lines().next().unwrap_or("").trim()))
    }
}

fn prepare(l: Language, dir: &Path) -> Result<Program, String> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    match l {
        Language::Python => {
            let tool = need("python3")?;
            let src = write_source(dir, "cores.py", PYTHON)?;
            Ok(Program { version: version(&tool, &["--version"]), argv: vec![s(tool), s(src)] })
        }
        Language::Ruby => {
            let tool = need("ruby")?;
            let src = write_source(dir, "cores.rb", RUBY)?;
            Ok(Program { version: version(&tool, &["--version"]), argv: vec![s(tool), s(src)] })
        }
        Language::Perl => {
            let tool = need("perl")?;
            build(Command::new(&tool).args(["-Mthreads", "-e", "1"]), "perl -Mthreads")
                .map_err(|_| "perl is built without ithreads (use threads fails)".to_string())?;
            let src = write_source(dir, "cores.pl", PERL)?;
            let v = version(&tool, &["-e", "print $^V"]).map(|v| format!("perl {v}"));
            Ok(Program { version: v, argv: vec![s(tool), s(src)] })
        }
        Language::Java => {
            let javac = need("javac")?;
            let java = need("java")?;
            let src = write_source(&dir.join("java"), "Cores.java", JAVA)?;
            build(
                Command::new(&javac).arg("-d").arg(dir.join("java")).arg(&src),
                "javac Cores.java",
            )?;
            Ok(Program {
                version: version(&java, &["-version"]),
                argv: vec![s(java), "-cp".into(), s(dir.join("java")), "Cores".into()],
            })
        }
        Language::Go => {
            let go = need("go")?;
            let src = write_source(&dir.join("go"), "cores.go", GO)?;
            let exe = dir.join("go").join("cores");
            build(
                Command::new(&go)
                    .arg("build")
                    .arg("-o")
                    .arg(&exe)
                    .arg(&src)
                    .env("GOTOOLCHAIN", "local")
                    .env("GO111MODULE", "off")
                    .current_dir(dir.join("go")),
                "go build cores.go",
            )?;
            Ok(Program { version: version(&go, &["version"]), argv: vec![s(exe)] })
        }
        Language::Node => {
            let tool = need("node")?;
            let src = write_source(dir, "cores.js", NODE)?;
            let v = version(&tool, &["--version"]).map(|v| format!("node {v}"));
            Ok(Program { version: v, argv: vec![s(tool), s(src)] })
        }
        Language::Rust => unreachable!("Rust runs in process"),
    }
}

/// Runs `program N T1,T2,...` and parses its `threads=T elapsed_s=S` lines. A run that takes
/// far longer than planned is killed, so a broken interpreter cannot hang the lab.
fn run_program(
    p: &Program,
    n: u64,
    threads: &[usize],
    target_ms: u64,
) -> Result<Vec<(usize, f64)>, String> {
    let list: Vec<String> = threads.iter().map(usize::to_string).collect();
    let thread_sum: u64 = threads.iter().map(|&t| t as u64).sum();
    let limit = Duration::from_millis(60_000 + 4 * target_ms.max(1) * thread_sum);
    let mut child = Command::new(&p.argv[0])
        .args(&p.argv[1..])
        .arg(n.to_string())
        .arg(list.join(","))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", p.argv[0]))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("waiting for child: {e}"))? {
            break status;
        }
        if t0.elapsed() > limit {
            // Best effort: the child may have exited meanwhile.
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} took longer than {} s; killed", p.argv[0], limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut stdout).map_err(|e| format!("reading child output: {e}"))?;
    }
    if let Some(mut e) = child.stderr.take() {
        // Best effort: stderr only decorates the error message.
        let _ = e.read_to_string(&mut stderr);
    }
    if !status.success() {
        return Err(format!(
            "{} exited with {status}: {}",
            p.argv[0],
            stderr.lines().next().unwrap_or("").trim()
        ));
    }
    let parsed: Vec<(usize, f64)> = stdout
        .lines()
        .filter_map(|line| {
            let field = |k: &str| {
                line.split_whitespace().find_map(|w| w.strip_prefix(k)).map(str::to_string)
            };
            Some((field("threads=")?.parse().ok()?, field("elapsed_s=")?.parse().ok()?))
        })
        .collect();
    if parsed.len() != threads.len() {
        return Err(format!(
            "{} printed {} results for {} runs",
            p.argv[0],
            parsed.len(),
            threads.len()
        ));
    }
    Ok(parsed)
}

const PYTHON: &str = r#"import sys, threading, time
def work(n):
    x = 1
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return x
n = int(sys.argv[1])
for t in map(int, sys.argv[2].split(",")):
    ths = [threading.Thread(target=work, args=(n,)) for _ in range(t)]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    print("threads=%d elapsed_s=%.6f" % (t, time.perf_counter() - t0), flush=True)
"#;

const RUBY: &str = r#"n = ARGV[0].to_i
ARGV[1].split(",").map(&:to_i).each do |t|
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  t.times.map { Thread.new { x = 1; n.times { x = (x * 1103515245 + 12345) & 0xFFFFFFFF }; x } }.each(&:join)
  printf("threads=%d elapsed_s=%.6f\n", t, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
  $stdout.flush
end
"#;

const PERL: &str = r#"use strict; use warnings; use threads; use Time::HiRes qw(time);
$| = 1;
my ($n, $list) = @ARGV;
for my $t (split /,/, $list) {
  my $t0 = time;
  my @th = map { threads->create(sub { my $x = 1; for (1 .. $n) { $x = ($x * 1103515245 + 12345) & 0xFFFFFFFF } return $x }) } 1 .. $t;
  $_->join for @th;
  printf "threads=%d elapsed_s=%.6f\n", $t, time - $t0;
}
"#;

const JAVA: &str = r#"import java.util.Locale;
public class Cores {
  public static void main(String[] a) throws Exception {
    final long n = Long.parseLong(a[0]);
    for (String ts : a[1].split(",")) {
      int t = Integer.parseInt(ts);
      Thread[] th = new Thread[t];
      final long[] out = new long[t * 8];
      long t0 = System.nanoTime();
      for (int i = 0; i < t; i++) {
        final int k = i;
        th[i] = new Thread(() -> {
          long x = 1;
          for (long j = 0; j < n; j++) x = (x * 1103515245L + 12345L) & 0xFFFFFFFFL;
          out[k * 8] = x;
        });
        th[i].start();
      }
      for (Thread x : th) x.join();
      double s = (System.nanoTime() - t0) / 1e9;
      System.out.println(String.format(Locale.ROOT, "threads=%d elapsed_s=%.6f check=%d", t, s, out[0]));
    }
  }
}
"#;

const GO: &str = r#"package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	n, _ := strconv.ParseInt(os.Args[1], 10, 64)
	for _, ts := range strings.Split(os.Args[2], ",") {
		t, _ := strconv.Atoi(ts)
		out := make([]uint64, t*8)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < t; i++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				x := uint64(1)
				for j := int64(0); j < n; j++ {
					x = (x*1103515245 + 12345) & 0xFFFFFFFF
				}
				out[k*8] = x
			}(i)
		}
		wg.Wait()
		fmt.Printf("threads=%d elapsed_s=%.6f check=%d\n", t, time.Since(t0).Seconds(), out[0])
	}
}
"#;

const NODE: &str = r#"const { Worker } = require('worker_threads');
const n = Number(process.argv[2]);
const list = process.argv[3].split(',').map(Number);
const body = `const { parentPort, workerData } = require('worker_threads');
parentPort.once('message', () => {
  let x = 1;
  for (let j = 0; j < workerData; j++) { x = (Math.imul(x, 1103515245) + 12345) >>> 0; }
  parentPort.postMessage(x);
});
parentPort.postMessage('ready');`;
async function run(t) {
  const ws = Array.from({ length: t }, () => new Worker(body, { eval: true, workerData: n }));
  await Promise.all(ws.map((w) => new Promise((r) => w.once('message', r))));
  const t0 = process.hrtime.bigint();
  await Promise.all(ws.map((w) => new Promise((r) => { w.once('message', r); w.postMessage('go'); })));
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`threads=${t} elapsed_s=${s.toFixed(6)}`);
  await Promise.all(ws.map((w) => w.terminate()));
}
(async () => { for (const t of list) await run(t); })();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_is_measured_and_a_missing_language_is_skipped() {
        let params = CoresParams {
            threads: vec![1, 2],
            target_ms: 5,
            rounds: 1,
            languages: vec!["rust".into()],
        };
        let report = run(&params, &mut |_| {});
        let rust = &report.languages[0];
        assert_eq!(rust.outcome, Outcome::Measured);
        assert_eq!(rust.rows.len(), 2);
        assert!(rust.rows.iter().all(|r| r.speedup > 0.0 && r.seconds.median > 0.0));
        assert!(need("senju-no-such-interpreter").is_err());
    }

    #[test]
    fn seed_speedups() {
        let ruby = SEED_2012[1].speedups();
        assert!((ruby[0] - 1.0).abs() < 1e-9 && ruby[3] < 1.1);
    }
}
