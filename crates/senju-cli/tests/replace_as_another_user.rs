//! `import --truncate`, `rebuild` and `check --repair` put a new file in place of the
//! database, and gave it the database's owner with a chown that failed the command when
//! it was refused, although only root may give a file away: a user with write access to
//! someone else's database (root's, mode 0666, in a directory everyone may write) could no
//! longer run them. The owner is now kept where this process may set it, and the mode
//! always. In a sticky directory (`/tmp`) such a user may not replace the file at all:
//! `import --truncate` then empties the database in place, as it did before it wrote a copy.
//! These tests run `senju` as `nobody` through `setpriv` and skip where that cannot be done.

mod common;

use std::os::unix::fs::MetadataExt;

use common::{Dir, as_nobody, chmod, damage_one_value, hundred_records, mode, run};

/// Runs `senju` as nobody; it must succeed. `None` where the test must skip.
fn ok_as_nobody(args: &[&str]) -> Option<String> {
    let o = as_nobody(args)?;
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8(o.stdout).unwrap())
}

/// Root's database of 100 records (one value damaged if `damage`), mode 0666, in `dir`.
fn roots_database(dir: &str, damage: bool) -> String {
    let db = format!("{dir}/casket.sj");
    hundred_records(&db);
    if damage {
        damage_one_value(&db);
    }
    chmod(&db, 0o666);
    db
}

/// A directory with mode `mode` holding an input file of one record that anyone may read.
fn shared_dir(tag: &str, mode: u32) -> (Dir, String) {
    let d = Dir::new(tag);
    chmod(d.0.to_str().unwrap(), mode);
    let input = d.file("in.tsv");
    std::fs::write(&input, "x\t1\n").unwrap();
    chmod(&input, 0o644);
    (d, input)
}

#[test]
fn another_user_with_write_access_may_replace_the_database() {
    let (d, input) = shared_dir("replace-other-user", 0o777);
    let dir = d.0.to_str().unwrap();

    let db = roots_database(dir, false);
    let Some(out) = ok_as_nobody(&["import", &db, &input, "--truncate"]) else { return };
    assert!(out.starts_with("imported 1 records"), "{out}");
    assert_eq!(run(&["export", &db, "-"]), "x\t1\n");
    assert_eq!(mode(&db), 0o666);
    ok_as_nobody(&["rebuild", &db]);
    assert_eq!(mode(&db), 0o666);

    std::fs::remove_file(&db).unwrap();
    let db = roots_database(dir, true);
    let out = ok_as_nobody(&["check", &db, "--repair"]).unwrap();
    assert!(out.contains("kept 99 record(s)"), "{out}");
    assert_eq!(mode(&db), 0o666);
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), 65534, "only root may give a file away");
}

#[test]
fn import_truncate_empties_in_place_what_it_may_not_replace() {
    let (d, input) = shared_dir("replace-sticky", 0o1777);
    let dir = d.0.to_str().unwrap();
    let db = roots_database(dir, false);

    let Some(out) = ok_as_nobody(&["import", &db, &input, "--truncate"]) else { return };
    assert!(out.starts_with("imported 1 records"), "{out}");
    assert_eq!(run(&["export", &db, "-"]), "x\t1\n");
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), 0);
    assert_eq!(d.names(), ["casket.sj", "in.tsv"]);
}
