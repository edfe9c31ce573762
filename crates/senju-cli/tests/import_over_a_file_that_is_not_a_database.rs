//! `senju import --truncate` opens the database before it replaces it, so it refuses a file
//! that is not a senju database (a damaged header, or `notes.txt` named by mistake) instead
//! of overwriting it as it once did. The refusal stays, but the error said only "bad magic;
//! check the path": it now says how to import into a fresh database at that path, and
//! `import --help` says it too.

mod common;

use common::{Dir, fails, run};

#[test]
fn import_says_how_to_replace_a_file_that_is_not_a_database() {
    let d = Dir::new("import-not-a-db");
    let db = d.file("casket.sj");
    run(&["set", &db, "a", "1"]);
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[..8].fill(0);
    std::fs::write(&db, &bytes).unwrap();
    let notes = d.file("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    std::fs::write(d.file("in.tsv"), "k\tv\n").unwrap();

    let advice = "is not a senju database; to import into a fresh database at this path, \
                  remove or rename it first";
    for (path, before) in [(&db, bytes.clone()), (&notes, b"my notes\n".to_vec())] {
        for truncate in [true, false] {
            let mut args = vec!["import", path.as_str(), "in.tsv"];
            let input = d.file("in.tsv");
            args[2] = &input;
            if truncate {
                args.push("--truncate");
            }
            fails(&args, advice);
            assert_eq!(std::fs::read(path).unwrap(), before, "{path} changed");
        }
    }
    let help = run(&["import", "--help"]);
    assert!(help.contains("remove or rename"), "{help}");
}
