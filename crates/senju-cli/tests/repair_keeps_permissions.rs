//! `senju check --repair` put the salvaged copy in place with the permissions a new file
//! gets (0644 under the usual umask), so a database kept private (0600) became readable by
//! everyone. The copy now gets the database's mode (and owner, where this process may set
//! it) before it replaces the database, as `rebuild` does.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Dir, damage_one_value, hundred_records, mode, run};

#[test]
fn repair_keeps_the_mode_of_the_database() {
    let d = Dir::new("repair-mode");
    let db = d.file("casket.sj");
    hundred_records(&db);
    damage_one_value(&db);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();

    let r = run(&["check", &db, "--repair"]);
    assert!(r.contains("kept 99 record(s)"), "{r}");
    assert_eq!(mode(&db), 0o600, "the repaired database is readable by others");
    assert_eq!(mode(&format!("{db}.broken")), 0o600);
}
