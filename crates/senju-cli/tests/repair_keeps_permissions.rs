//! `senju check --repair` put the salvaged copy in place with the permissions a new file
//! gets (0644 under the usual umask), so a database kept private (0600) became readable by
//! everyone. The copy now gets the database's mode (and owner, where this process may set
//! it) before it replaces the database, as `rebuild` does.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Dir, mode, run};

#[test]
fn repair_keeps_the_mode_of_the_database() {
    let d = Dir::new("repair-mode");
    let db = d.file("casket.sj");
    for i in 0..100 {
        run(&["set", &db, &format!("key{i:03}"), &format!("value number {i:03}")]);
    }
    let mut bytes = std::fs::read(&db).unwrap();
    let needle = b"value number 042";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("value in file");
    bytes[at + 2] ^= 0x40;
    std::fs::write(&db, &bytes).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();

    let r = run(&["check", &db, "--repair"]);
    assert!(r.contains("kept 99 record(s)"), "{r}");
    assert_eq!(mode(&db), 0o600, "the repaired database is readable by others");
    assert_eq!(mode(&format!("{db}.broken")), 0o600);
}
