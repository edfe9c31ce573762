//! `senju check --repair` checked the file, then salvaged it, then put the copy in place,
//! each step taking and dropping its own shared lock: a writer could open the database in
//! between, and its writes went to the file that the repair then renamed to `.broken`. The
//! repair now holds a shared lock from its check until the copy is in place, so a writer
//! is refused meanwhile. (A debug-build hook, `SENJU_TEST_REPAIR_PAUSE`, stops the
//! repair between its check and its salvage.)

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Dir, damage_one_value, hundred_records, run, senju};

#[test]
fn a_writer_cannot_open_the_database_while_it_is_repaired() {
    let d = Dir::new("repair-held");
    let db = d.file("held.sj");
    hundred_records(&db);
    damage_one_value(&db);
    let flag = d.file("paused");
    let child = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["check", &db, "--repair"])
        .env("SENJU_TEST_REPAIR_PAUSE", &flag)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !std::path::Path::new(&flag).exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "the repair never paused");
        std::thread::sleep(Duration::from_millis(10));
    }
    let write = senju(&["set", &db, "late", "write"]);
    let err = String::from_utf8_lossy(&write.stderr).into_owned();
    std::fs::remove_file(&flag).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("kept 99 record(s)"), "{stdout}");
    assert!(!write.status.success(), "a write went in during the repair: {err}");
    assert!(err.contains("in use"), "{err}");
    assert_eq!(run(&["get", &db, "key000"]), "value number 000\n");
}
