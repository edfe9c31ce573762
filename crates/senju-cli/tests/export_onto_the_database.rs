//! `senju export DB DB` (or an output that is a symbolic or hard link to the database)
//! created the output with `File::create`, which truncated the database while it was mapped:
//! the export died of SIGBUS and the database was left empty. `import DB DB --truncate`
//! emptied the database before reading it as input. Both now compare the files (device and
//! inode, after following links) and refuse with one line and status 1, touching nothing.

mod common;

use common::{Dir, fails, run};

fn filled(d: &Dir) -> String {
    let db = d.file("casket.sj");
    for i in 0..50 {
        run(&["set", &db, &format!("key{i}"), &format!("value{i}")]);
    }
    db
}

#[test]
fn export_refuses_to_write_over_the_database() {
    let d = Dir::new("export-self");
    let db = filled(&d);
    let before = std::fs::read(&db).unwrap();
    std::os::unix::fs::symlink(&db, d.file("link.tsv")).unwrap();
    std::fs::hard_link(&db, d.file("hard.tsv")).unwrap();
    for out in [db.clone(), d.file("link.tsv"), d.file("hard.tsv"), d.file("./casket.sj")] {
        fails(&["export", &db, &out], "is the database itself");
        assert!(std::fs::read(&db).unwrap() == before, "export to {out} changed the database");
    }
    assert_eq!(run(&["count", &db]), "50\n");
    assert_eq!(d.names(), ["casket.sj", "hard.tsv", "link.tsv"], "nothing left beside it");
}

#[test]
fn import_refuses_to_read_the_database_as_input() {
    let d = Dir::new("import-self");
    let db = filled(&d);
    std::os::unix::fs::symlink(&db, d.file("link.tsv")).unwrap();
    for input in [db.clone(), d.file("link.tsv")] {
        fails(&["import", &db, &input, "--truncate"], "is the database itself");
        fails(&["import", &db, &input], "is the database itself");
        assert_eq!(run(&["count", &db]), "50\n");
    }
    assert_eq!(run(&["get", &db, "key7"]), "value7\n");
}
