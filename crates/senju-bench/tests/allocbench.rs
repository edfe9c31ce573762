//! `senju-allocbench` runs every allocator in its own child process and prints the tables;
//! a child refuses to measure when the dispatcher runs another allocator than asked for.
//! Nothing here looks at how fast anything was.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_senju-allocbench");

#[test]
fn a_quick_run_prints_every_allocator_beside_the_2012_table() {
    let out = Command::new(BIN).args(["--quick", "--threads", "1,2"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("| threads | pairs | system | mimalloc | jemalloc |"), "{stdout}");
    assert!(stdout.contains("## Same-thread frees") && stdout.contains("## Cross-thread frees"));
    // The 2012 figures, exactly as the founding document prints them.
    assert!(stdout.contains("| 1 | 1.6 [0.61 s] | 2.9 [0.34 s] | 4.2 [0.24 s] |"), "{stdout}");
    assert!(stdout.contains("| 2 | 0.3 [3.26 s] | 5.9 [0.17 s] | 8.3 [0.12 s] |"), "{stdout}");
}

#[test]
fn each_child_runs_the_allocator_it_names() {
    for name in ["system", "mimalloc", "jemalloc"] {
        let out = Command::new(BIN)
            .env("SENJU_ALLOC", name)
            .args(["child", "--frees", "cross", "--threads", "2", "--pairs", "1000"])
            .args(["--size", "1024"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.starts_with("elapsed_s=") && stdout.contains(" peak_rss_kib="));
    }
    let bogus = Command::new(BIN)
        .env("SENJU_ALLOC", "tcmalloc")
        .args(["child", "--frees", "local", "--threads", "1", "--pairs", "10", "--size", "8"])
        .output()
        .unwrap();
    assert!(!bogus.status.success());
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("but the process runs system"));
}
