//! `senju export` created its output with `File::create`, truncating an existing file before
//! reading a single record: an export that failed (here, on a damaged record) destroyed the
//! previous export and left an empty or partial file. The export now goes to a temporary
//! file beside the output, which replaces the output only once every record is written and
//! synced; on error the temporary is removed and the old output is untouched. The new file
//! keeps the old one's permissions.

mod common;

use common::{Dir, fails, mode, run};

#[test]
fn a_failed_export_leaves_the_old_output_alone() {
    let d = Dir::new("export-fail");
    let db = d.file("casket.sj");
    for i in 0..200 {
        run(&["set", &db, &format!("key{i:03}"), &format!("value number {i:03}")]);
    }
    let out = d.file("backup.tsv");
    run(&["export", &db, &out, "--sort"]);
    let good = std::fs::read(&out).unwrap();
    assert_eq!(good.iter().filter(|&&b| b == b'\n').count(), 200);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A successful export replaces the file and keeps its mode.
    run(&["set", &db, "extra", "x"]);
    run(&["export", &db, &out, "--sort"]);
    assert_eq!(std::fs::read(&out).unwrap().iter().filter(|&&b| b == b'\n').count(), 201);
    assert_eq!(mode(&out), 0o600, "the new export keeps the old one's permissions");
    run(&["remove", &db, "extra"]);
    run(&["export", &db, &out, "--sort"]);
    assert!(std::fs::read(&out).unwrap() == good);

    // Damage one record: the export fails part way, and the old file stays as it was.
    let mut bytes = std::fs::read(&db).unwrap();
    let needle = b"value number 123";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("value in file");
    bytes[at + 2] ^= 0x40;
    std::fs::write(&db, &bytes).unwrap();
    for sort in [false, true] {
        let mut args = vec!["export", &db, &out];
        if sort {
            args.push("--sort");
        }
        fails(&args, "");
        assert!(std::fs::read(&out).unwrap() == good, "the failed export changed {out}");
        assert_eq!(mode(&out), 0o600);
        assert_eq!(d.names(), ["backup.tsv", "casket.sj"], "no temporary file is left");
    }
}

/// A pipe (or a device) has nothing to keep: the records are written into it as a stream,
/// and it stays a pipe.
#[test]
fn a_pipe_is_written_as_a_stream() {
    use std::os::unix::fs::FileTypeExt;
    let d = Dir::new("export-fifo");
    let db = d.file("casket.sj");
    run(&["set", &db, "k", "v"]);
    let fifo = d.file("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    run(&["export", &db, &fifo]);
    assert_eq!(reader.join().unwrap(), b"k\tv\n");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}
