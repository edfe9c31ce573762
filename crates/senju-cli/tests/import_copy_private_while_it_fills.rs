//! `senju import --truncate` (like `rebuild` and `check --repair`, which share the code)
//! let the engine create its copy with the mode a new file gets (0644 under the usual
//! umask) and gave it the database's mode only once complete, so the records of a private
//! (0600) database were readable by everyone while the copy filled. The copy is now created
//! first, by this process, readable by its owner only, and gets the database's owner and
//! mode once complete; the engine opens that empty file as a new database.

mod common;

use common::{Dir, chmod, import_through_fifo, mkfifo, mode, run};

#[test]
fn the_copy_of_a_private_database_is_private_while_it_fills() {
    let d = Dir::new("import-copy-private");
    let db = d.file("casket.sj");
    run(&["set", &db, "secret", "value"]);
    chmod(&db, 0o600);
    let fifo = d.file("input.tsv");
    mkfifo(&fifo);

    let out = import_through_fifo(
        &d,
        &db,
        &fifo,
        "a\t1\nb\t2\n",
        |_| {},
        Some(&|copy| {
            assert_eq!(mode(copy) & 0o077, 0, "the copy {copy} is open to others while it fills")
        }),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run(&["export", &db, "-", "--sort"]), "a\t1\nb\t2\n");
    assert_eq!(mode(&db), 0o600);
    assert_eq!(d.names(), ["casket.sj", "input.tsv"]);
}
