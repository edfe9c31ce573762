//! The new file that `import --truncate`, `rebuild`, `check --repair` and `export` write
//! beside their target is named `TARGET.TAG-PID`. If a file of that name already existed
//! (left by a crash, or by a process with the same id in another container), the engine
//! opened it with `truncate` and filled it, and on an error it was removed: a file this
//! process had not created was wiped. The new file is now created with `create_new`, under
//! `TARGET.TAG-PID-N` for the first N free where the plain name is taken, and only a file
//! this process created is ever written or removed.

mod common;

use common::{Dir, import_through_fifo, mkfifo, run};

#[test]
fn import_truncate_leaves_a_file_with_its_copy_name_alone() {
    let d = Dir::new("staged-name-taken");
    let db = d.file("casket.sj");
    run(&["set", &db, "old", "record"]);
    let fifo = d.file("input.tsv");
    mkfifo(&fifo);
    let mut theirs = String::new();

    let out = import_through_fifo(
        &d,
        &db,
        &fifo,
        "a\t1\n",
        |pid| {
            theirs = format!("{db}.import-{pid}");
            std::fs::write(&theirs, "not this process's file").unwrap();
        },
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run(&["export", &db, "-"]), "a\t1\n");
    assert_eq!(
        std::fs::read_to_string(&theirs).ok().as_deref(),
        Some("not this process's file"),
        "the import wrote or removed a file it did not create"
    );
    assert_eq!(d.names().len(), 3, "{:?}", d.names());
}
