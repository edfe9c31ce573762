//! An interrupt (Ctrl-C: SIGINT) ended `senju` at once, so the new file that `import
//! --truncate`, `rebuild` and `check --repair` stage beside the database (and `perf`'s
//! temporary database) stayed behind. An interrupt now removes them and exits with status
//! 130 and a one-line message. Here an import waits for its input (a FIFO) with its copy
//! staged when it is interrupted.

mod common;

use std::cell::Cell;

use common::{Dir, import_through_fifo, mkfifo, run};

/// Whether the process `pid` (a child not yet waited for) has ended.
fn ended(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name in parentheses: Z once it exited.
    stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z'))
}

#[test]
fn an_interrupted_import_leaves_no_staged_copy() {
    let d = Dir::new("interrupt");
    let db = d.file("casket.sj");
    run(&["set", &db, "kept", "value"]);
    let fifo = d.file("input.tsv");
    mkfifo(&fifo);
    let pid = Cell::new(0);
    let out = import_through_fifo(
        &d,
        &db,
        &fifo,
        "",
        |p| pid.set(p),
        Some(&|copy| {
            assert!(std::path::Path::new(copy).exists());
            let sent = std::process::Command::new("kill")
                .args(["-INT", &pid.get().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
            // Waits for the process to end before the input closes, for up to a minute.
            for _ in 0..30_000 {
                if ended(pid.get()) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            assert!(ended(pid.get()), "the import did not end on SIGINT");
        }),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("senju: interrupted"), "{stderr}");
    assert_eq!(d.names(), ["casket.sj", "input.tsv"], "the staged copy is left behind");
    // The import held the database open for writing (its lock): it is left as a crash
    // leaves it, and the next writable open recovers it with its records.
    run(&["set", &db, "after", "interrupt"]);
    assert_eq!(run(&["get", &db, "kept"]), "value\n");
}
