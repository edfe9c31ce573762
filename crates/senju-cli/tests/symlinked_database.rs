//! `rebuild`, `check --repair` and `import --truncate` put a fresh file in the database's
//! place with a rename. Given a symbolic link to the database, they renamed over the link
//! (or, for the repair, moved the link itself to `PATH.broken`): the link became a regular
//! file holding the new data while the real database stayed stale or damaged, and the two
//! diverged. They now follow the links first and replace the file the link points to, in
//! that file's directory (`PATH.broken` goes beside it); the link stays a link.

mod common;

use std::path::Path;

use common::{Dir, run, senju};

/// `d/data/real.sj` with dead records, and `d/link.sj`, a relative link to it.
fn linked(d: &Dir) -> (String, String) {
    std::fs::create_dir(d.0.join("data")).unwrap();
    let real = d.file("data/real.sj");
    {
        let h = senju::Db::open(&real).unwrap();
        for round in 0..3u8 {
            for i in 0..500u32 {
                h.set(format!("key{i:03}").as_bytes(), &[b'a' + round; 100]).unwrap();
            }
        }
        h.close().unwrap();
    }
    let link = d.file("link.sj");
    std::os::unix::fs::symlink("data/real.sj", &link).unwrap();
    (real, link)
}

fn is_link(p: &str) -> bool {
    std::fs::symlink_metadata(p).unwrap().file_type().is_symlink()
}

fn dead_bytes(db: &str) -> u64 {
    let s: serde_json::Value = serde_json::from_str(&run(&["stats", db, "--json"])).unwrap();
    s["dead_bytes"].as_u64().unwrap()
}

#[test]
fn rebuild_through_a_link_rebuilds_the_database() {
    let d = Dir::new("link-rebuild");
    let (real, link) = linked(&d);
    assert!(dead_bytes(&real) > 0);
    run(&["rebuild", &link]);
    assert!(is_link(&link), "the link was replaced by a file");
    assert_eq!(dead_bytes(&real), 0, "the database itself was not rebuilt");
    assert_eq!(run(&["count", &real]), "500\n");
    assert_eq!(run(&["get", &link, "key042"]), format!("{}\n", "c".repeat(100)));
    assert_eq!(d.names(), ["data", "link.sj"]);
}

#[test]
fn repair_through_a_link_repairs_the_database() {
    let d = Dir::new("link-repair");
    let (real, link) = linked(&d);
    // Damage the last value of one key (salvage keeps an older one of the same key).
    let mut bytes = std::fs::read(&real).unwrap();
    let at = bytes.windows(100).rposition(|w| w == [b'c'; 100]).expect("a live value");
    bytes[at + 50] ^= 0x40;
    std::fs::write(&real, &bytes).unwrap();
    assert!(!senju(&["check", &real]).status.success());

    let r = run(&["check", &link, "--repair"]);
    assert!(r.starts_with("repaired ") && r.contains("kept 500 record(s)"), "{r}");
    assert!(is_link(&link), "the link was moved away");
    let checked = senju(&["check", &real]);
    assert!(checked.status.success(), "the database is still damaged");
    assert!(Path::new(&format!("{real}.broken")).exists(), "the damaged file goes beside it");
    assert!(!Path::new(&format!("{link}.broken")).exists());
}

#[test]
fn import_truncate_through_a_link_replaces_the_database() {
    let d = Dir::new("link-import");
    let (real, link) = linked(&d);
    std::fs::write(d.file("in.tsv"), "a\t1\nb\t2\n").unwrap();
    run(&["import", &link, &d.file("in.tsv"), "--truncate"]);
    assert!(is_link(&link), "the link was replaced by a file");
    assert_eq!(run(&["count", &real]), "2\n");
    assert_eq!(d.names(), ["data", "in.tsv", "link.sj"]);
}
