//! `senju check --repair` chose the name for the damaged file with `Path::exists`, which
//! follows links, so a dangling symbolic link `DB.broken` counted as free; the hard link
//! then failed (the name was taken) and the fallback `std::fs::copy` followed the link and
//! wrote the damaged database wherever it pointed (or overwrote a `.broken` file that
//! appeared in between). A name is now free only if nothing has it, links included, and the
//! fallback copies into a file it creates (`create_new`): no link is followed, nothing is
//! overwritten.

mod common;

use common::{Dir, damage_one_value, hundred_records, run};

/// A database of 100 records with one value damaged.
fn damaged(d: &Dir) -> String {
    let db = d.file("casket.sj");
    hundred_records(&db);
    damage_one_value(&db);
    db
}

#[test]
fn repair_does_not_write_through_a_dangling_broken_link() {
    let d = Dir::new("repair-broken-link");
    let db = damaged(&d);
    let elsewhere = d.file("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, format!("{db}.broken")).unwrap();

    let r = run(&["check", &db, "--repair"]);
    assert!(r.contains("kept 99 record(s)"), "{r}");
    assert!(r.contains(&format!("kept as {db}.broken.2")), "{r}");
    assert!(
        std::fs::symlink_metadata(&elsewhere).is_err(),
        "the damaged database was written through the link"
    );
    let link = std::fs::symlink_metadata(format!("{db}.broken")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    assert_eq!(run(&["count", &db]), "99\n");
    assert_eq!(
        d.names(),
        ["casket.sj", "casket.sj.broken", "casket.sj.broken.2"],
        "a copy was left behind"
    );
}
