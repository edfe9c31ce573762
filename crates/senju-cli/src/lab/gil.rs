//! `senju lab gil`: founding documents `000` (Ruby threads use one core) and `002` (release
//! the GVL around native work). Runs the Python and Ruby bindings' own thread benchmarks
//! (`bindings/*/bench/bench_threads.*`) when they and the bindings are built; otherwise lists
//! each as skipped, with the reason and the command that builds it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::table::Table;
use super::{Common, Mode, Outcome, progress, to_value};

/// One binding's benchmark.
struct Binding {
    name: &'static str,
    /// Interpreters to try, in order; a relative path is inside the source tree (the
    /// virtual environment `make python` installs the binding into).
    interpreters: &'static [&'static str],
    /// Relative to the source tree.
    script: &'static str,
    /// Extra interpreter arguments before the script (with `{root}` for the source tree).
    load_path: Option<&'static str>,
    /// A one-liner that succeeds when the binding is importable.
    probe: &'static [&'static str],
    build: &'static str,
}

const BINDINGS: [Binding; 2] = [
    Binding {
        name: "python",
        interpreters: &["target/pyenv/bin/python", "python3"],
        script: "bindings/python/bench/bench_threads.py",
        load_path: None,
        probe: &["-c", "import senju"],
        build: "make python  (builds the wheel and installs it into target/pyenv)",
    },
    Binding {
        name: "ruby",
        interpreters: &["ruby"],
        script: "bindings/ruby/bench/bench_threads.rb",
        load_path: Some("bindings/ruby/lib"),
        probe: &["-e", "require 'senju'"],
        build: "make ruby  (builds the extension into bindings/ruby/lib/senju/)",
    },
];

#[derive(Serialize)]
struct Entry {
    binding: &'static str,
    status: &'static str,
    reason: Option<String>,
    build_command: &'static str,
    command: Option<String>,
    results: Option<serde_json::Value>,
}

/// The source tree: the current directory or an ancestor with `crates/senju-cli`, else the
/// tree this binary was built from, if it still exists.
fn source_tree() -> Option<PathBuf> {
    let here = std::env::current_dir().ok()?;
    let found =
        here.ancestors().find(|d| d.join("crates/senju-cli").is_dir()).map(Path::to_path_buf);
    let tree = found.or_else(|| {
        let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        built.join("crates/senju-cli").is_dir().then_some(built)
    })?;
    Some(tree.canonicalize().unwrap_or(tree))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Runs `cmd` to completion or until `limit`, returning (success, stdout, stderr).
fn run_with_limit(cmd: &mut Command, limit: Duration) -> Result<(bool, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    // Drain both pipes on threads, so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            // Best effort: a read error leaves what was read.
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            // Best effort, as above.
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for a child: {e}"))? {
            break Some(s);
        }
        if t0.elapsed() > limit {
            // Best effort: it may have exited meanwhile.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    match status {
        Some(s) => Ok((s.success(), stdout, stderr)),
        None => Err(format!("killed after {} s", limit.as_secs())),
    }
}

/// The line of an interpreter's error output that says what went wrong: the first that
/// names an error (`[BUG] Segmentation fault`, `...Error: ...`), else the last.
fn error_line(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines
        .iter()
        .find(|l| l.contains("[BUG]") || l.contains("Error") || l.contains("error:"))
        .or(lines.last())
        .map_or(String::new(), |l| l.to_string())
}

fn measure(
    b: &Binding,
    root: Option<&Path>,
    mode: Mode,
    script_args: &[String],
    outputs: &mut String,
) -> Entry {
    let skip = |reason: String| Entry {
        binding: b.name,
        status: "skipped",
        reason: Some(reason),
        build_command: b.build,
        command: None,
        results: None,
    };
    let Some(root) = root else {
        return skip("the senju source tree (with bindings/) was not found from here".into());
    };
    let script = root.join(b.script);
    if !script.is_file() {
        return skip(format!("{} does not exist in this source tree", b.script));
    }
    let interpreter = b.interpreters.iter().find_map(|i| {
        if i.contains('/') {
            root.join(i).is_file().then(|| root.join(i).to_string_lossy().into_owned())
        } else {
            on_path(i).then(|| i.to_string())
        }
    });
    let Some(interpreter) = interpreter else {
        return skip(format!("{} not found", b.interpreters.join(" or ")));
    };
    let mut pre: Vec<String> = Vec::new();
    if let Some(lib) = b.load_path {
        pre.push("-I".into());
        pre.push(lib.into());
    }
    let probe = run_with_limit(
        Command::new(&interpreter).args(&pre).args(b.probe).current_dir(root),
        Duration::from_secs(60),
    );
    match probe {
        Ok((true, _, _)) => {}
        Ok((false, _, err)) => {
            return skip(format!("the {} binding is not built: {}", b.name, error_line(&err)));
        }
        Err(e) => return skip(format!("probing the {} binding: {e}", b.name)),
    }
    let json =
        std::env::temp_dir().join(format!("senju-lab-gil-{}-{}.json", b.name, std::process::id()));
    let mut args = pre.clone();
    args.push(b.script.into());
    if mode != Mode::Full {
        args.push("--quick".into());
    }
    args.extend(script_args.iter().cloned());
    args.push("--json".into());
    args.push(json.to_string_lossy().into_owned());
    let command = format!("{interpreter} {}", args.join(" "));
    let ran = run_with_limit(
        Command::new(&interpreter).args(&args).current_dir(root),
        Duration::from_secs(if mode == Mode::Full { 1800 } else { 300 }),
    );
    let entry = |status: &'static str, reason: Option<String>, results| Entry {
        binding: b.name,
        status,
        reason,
        build_command: b.build,
        command: Some(command.clone()),
        results,
    };
    let result = match ran {
        Ok((true, stdout, _)) => {
            *outputs += &format!("### {} (`{command}`)\n\n{stdout}\n", b.name);
            match std::fs::read_to_string(&json)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            {
                Ok(v) => entry("measured", None, Some(v)),
                Err(e) => entry("failed", Some(format!("no JSON results: {e}")), None),
            }
        }
        Ok((false, _, stderr)) => entry("failed", Some(error_line(&stderr)), None),
        Err(e) => entry("failed", Some(e), None),
    };
    // Best effort: the temporary file may not exist.
    let _ = std::fs::remove_file(&json);
    result
}

pub(crate) fn run(c: &Common, extra: &[String]) -> Result<Outcome, String> {
    // `--threads` and `--rounds` mean the same to both scripts.
    let mut script_args: Vec<String> = Vec::new();
    if !c.threads.is_empty() {
        let list: Vec<String> = c.threads.iter().map(usize::to_string).collect();
        script_args.extend(["--threads".to_string(), list.join(",")]);
    }
    if let Some(r) = c.rounds {
        script_args.extend(["--rounds".to_string(), r.to_string()]);
    }
    // Below --full, only senju's three modes run (the binding's own question: what each GIL
    // policy costs), which keeps the default under a minute; --full, or --peers after `--`,
    // brings in every peer.
    if c.mode() != Mode::Full && !extra.iter().any(|a| a == "--peers") {
        script_args.extend(["--peers".to_string(), "senju-auto,senju-release,senju-hold".into()]);
    }
    script_args.extend(extra.iter().cloned());
    let script_args = &script_args;
    let root = source_tree();
    let mut progress = progress();
    let mut outputs = String::new();
    let entries: Vec<Entry> = BINDINGS
        .iter()
        .map(|b| {
            progress(&format!("gil {}", b.name));
            measure(b, root.as_deref(), c.mode(), script_args, &mut outputs)
        })
        .collect();
    let mut out = String::from(
        "## The bindings' thread benchmarks\n\nEach binding's `bench/bench_threads` script \
         measures threads calling the database with the interpreter lock held and released \
         (founding documents 000 and 002).\n\n",
    );
    let mut table = Table::new(&["binding", "status", "detail"]);
    for e in &entries {
        let detail = match (&e.reason, &e.command) {
            (Some(r), _) if e.status == "skipped" => format!("{r}; build: `{}`", e.build_command),
            (Some(r), _) => r.clone(),
            (None, Some(cmd)) => format!("`{cmd}`"),
            (None, None) => String::new(),
        };
        table.row(vec![e.binding.into(), e.status.into(), detail]);
    }
    out += &table.render();
    if !outputs.is_empty() {
        out += "\n";
        out += &outputs;
    }
    let failed: Vec<&str> =
        entries.iter().filter(|e| e.status == "failed").map(|e| e.binding).collect();
    if !failed.is_empty() {
        outln!("{out}");
        return Err(format!("the {} benchmark failed (see the table above)", failed.join(" and ")));
    }
    Ok(Outcome {
        text: out,
        results: to_value(&serde_json::json!({ "bindings": entries })),
        chart: None,
    })
}
