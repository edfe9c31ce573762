//! `senju export FILE` writes a new file beside FILE and renames it over FILE. That
//! changed who may do what: as root the new file was root's (only the mode was copied); a
//! FILE the user could not write (mode 444, or another user's) was replaced, since a rename
//! needs only the directory; and a FILE the user could write in a directory they could not
//! (or in a sticky directory such as /tmp, owned by someone else) could no longer be
//! written at all. The new file now gets the old one's owner where this process may set it;
//! a FILE this process may not write is refused, as writing it in place was; and one it may
//! write but not replace is written in place. Hard links to FILE keep the old records
//! (documented in `export --help` and the README). The tests that need a second user run
//! `senju` as `nobody` through `setpriv` and skip where that cannot be done.

mod common;

use std::os::unix::fs::MetadataExt;

use common::{Dir, as_nobody, chmod, is_root, mode, run};

/// A database of two records, readable by everyone.
fn database(d: &Dir) -> String {
    let db = d.file("casket.sj");
    run(&["set", &db, "a", "1"]);
    run(&["set", &db, "b", "2"]);
    chmod(&db, 0o644);
    db
}

const RECORDS: &str = "a\t1\nb\t2\n";

#[test]
fn export_keeps_the_owner_of_the_old_file() {
    if !is_root() {
        eprintln!("skipped: needs root to give a file to another user");
        return;
    }
    let d = Dir::new("export-owner");
    let db = database(&d);
    let out = d.file("out.tsv");
    std::fs::write(&out, "old\n").unwrap();
    std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    chmod(&out, 0o640);

    run(&["export", &db, &out, "--sort"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), RECORDS);
    let m = std::fs::metadata(&out).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65534), "the export took the file from its owner");
    assert_eq!(mode(&out), 0o640);
}

#[test]
fn export_refuses_a_file_it_may_not_write() {
    let d = Dir::new("export-read-only");
    let db = database(&d);
    chmod(d.0.to_str().unwrap(), 0o777);
    let mine = d.file("mine.tsv");
    let roots = d.file("roots.tsv");
    for f in [&mine, &roots] {
        std::fs::write(f, "old\n").unwrap();
    }
    chmod(&mine, 0o444);
    chmod(&roots, 0o644);
    if is_root() {
        std::os::unix::fs::chown(&mine, Some(65534), Some(65534)).unwrap();
    }
    for f in [&mine, &roots] {
        let Some(o) = as_nobody(&["export", &db, f, "--sort"]) else { return };
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{f} was replaced: {err}");
        assert!(err.contains("Permission denied"), "{err}");
        assert_eq!(std::fs::read_to_string(f).unwrap(), "old\n");
    }
    assert_eq!(d.names(), ["casket.sj", "mine.tsv", "roots.tsv"]);
}

#[test]
fn export_writes_in_place_a_file_it_may_write_but_not_replace() {
    let d = Dir::new("export-in-place");
    let db = database(&d);
    let locked = d.file("locked");
    let sticky = d.file("sticky");
    for (dir, m) in [(&locked, 0o755), (&sticky, 0o1777)] {
        std::fs::create_dir(dir).unwrap();
        chmod(dir, m);
        std::fs::write(format!("{dir}/out.tsv"), "old\n").unwrap();
        chmod(&format!("{dir}/out.tsv"), 0o666);
    }
    for dir in [&locked, &sticky] {
        let out = format!("{dir}/out.tsv");
        let Some(o) = as_nobody(&["export", &db, &out, "--sort"]) else { return };
        assert!(o.status.success(), "{out}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), RECORDS);
        assert_eq!(std::fs::metadata(&out).unwrap().uid(), 0, "{out} was replaced");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 1, "a new file was left in {dir}");
    }
}

#[test]
fn export_replaces_the_name_it_is_given_not_other_hard_links() {
    let d = Dir::new("export-hard-link");
    let db = database(&d);
    let out = d.file("out.tsv");
    let other = d.file("other.tsv");
    std::fs::write(&out, "old\n").unwrap();
    std::fs::hard_link(&out, &other).unwrap();

    run(&["export", &db, &out, "--sort"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), RECORDS);
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "old\n");
}

/// Every path under `/dev` was written in place as if it named a stream, so an export to a
/// file in `/dev/shm` truncated it first and a failed export left it cut. Such a file is
/// now replaced whole (a new inode); `/dev/stdout` and `/dev/fd/N` are still written in place.
#[test]
fn export_replaces_a_regular_file_under_dev() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let d = Dir::new("export-dev-shm");
    let db = database(&d);
    let out = shm.join(format!("senju-export-test-{}.tsv", std::process::id()));
    let out_s = out.to_str().unwrap();
    std::fs::write(&out, "old\tcontents\n").unwrap();
    let before = std::fs::metadata(&out).unwrap().ino();
    run(&["export", &db, out_s, "--sort"]);
    let after = std::fs::metadata(&out).unwrap().ino();
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert_ne!(before, after, "the file was written in place");
    assert!(!text.contains("old\tcontents"), "{text}");
}
