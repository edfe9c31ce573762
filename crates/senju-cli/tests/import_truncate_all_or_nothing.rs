//! `senju import --truncate` emptied the database when it opened it, before reading a line
//! of input: a bad line (or an unreadable input) left the database emptied plus whatever came
//! before the bad line. `--truncate` now imports into a fresh file beside the database and
//! puts it in the database's place only once the whole input is in, keeping the database's
//! permissions; on any error the database is left as it was. Without `--truncate` a failed
//! import keeps what came before the bad line and says how many records that was.

mod common;

use common::{Dir, fails, mode, run};

fn filled(d: &Dir) -> String {
    let db = d.file("casket.sj");
    let lines: String = (0..50).map(|i| format!("key{i:02}\tvalue{i}\n")).collect();
    std::fs::write(d.file("good.tsv"), lines).unwrap();
    run(&["import", &db, &d.file("good.tsv")]);
    db
}

#[test]
fn a_failed_truncating_import_leaves_the_database_as_it_was() {
    let d = Dir::new("import-truncate");
    let db = filled(&d);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = run(&["export", &db, "-", "--sort"]);
    std::fs::write(d.file("bad.tsv"), "a\t1\nb\t2\nc\\q\t3\n").unwrap();
    std::fs::create_dir(d.file("a-directory")).unwrap();

    fails(&["import", &db, &d.file("bad.tsv"), "--truncate"], "line 3: key, byte 2");
    assert_eq!(run(&["export", &db, "-", "--sort"]), before, "the database changed");
    fails(&["import", &db, &d.file("a-directory"), "--truncate"], "cannot read");
    assert_eq!(run(&["export", &db, "-", "--sort"]), before, "the database changed");
    fails(&["import", &db, &d.file("a-directory")], "cannot read");
    assert_eq!(run(&["count", &db]), "50\n");
    assert_eq!(mode(&db), 0o600);
    assert_eq!(d.names(), ["a-directory", "bad.tsv", "casket.sj", "good.tsv"]);

    // A good one replaces the records, keeping the permissions.
    std::fs::write(d.file("two.tsv"), "x\t1\ny\t2\n").unwrap();
    let out = run(&["import", &db, &d.file("two.tsv"), "--truncate"]);
    assert!(out.starts_with("imported 2 records"), "{out}");
    assert_eq!(run(&["export", &db, "-", "--sort"]), "x\t1\ny\t2\n");
    assert_eq!(mode(&db), 0o600, "the new file keeps the database's permissions");

    // Without --truncate the lines before the bad one stay, and the message says so.
    fails(&["import", &db, &d.file("bad.tsv")], "(2 records before it were imported)");
    assert_eq!(run(&["export", &db, "-", "--sort"]), "a\t1\nb\t2\nx\t1\ny\t2\n");

    // A truncating import into a new database creates it.
    let fresh = d.file("fresh.sj");
    run(&["import", &fresh, &d.file("two.tsv"), "--truncate"]);
    assert_eq!(run(&["count", &fresh]), "2\n");
}
