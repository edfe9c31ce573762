//! On a file system that cannot punch holes (exFAT, NFSv3, many FUSE file systems) `close`
//! leaves free space as it was: retired index tables keep their old slots there. `check` and
//! `salvage` must not take those bytes for damage in a healthy file. Its own test binary:
//! `senju::testing::NO_PUNCH` is process-wide.

mod common;

use std::sync::atomic::Ordering;

use common::TempDir;
use senju::Builder;

#[test]
fn free_space_that_close_could_not_punch_is_not_damage() {
    senju::testing::NO_PUNCH.store(true, Ordering::Relaxed);
    let dir = TempDir::new("no-punch");
    let path = dir.file("n.sj");
    // One shard, so its table grows (and retires tables into the free space) many times.
    let db = Builder::new().shards(1).auto_rebuild(None).open(&path).unwrap();
    for round in 0..3u32 {
        for k in 0..40_000u32 {
            db.set(&(k + round * 1_000_000).to_le_bytes(), &[round as u8 + 1; 20]).unwrap();
        }
    }
    db.close().unwrap();
    let report = senju::check(&path).unwrap();
    assert!(report.closed_cleanly);
    assert!(report.is_ok(), "a healthy file reported damaged: {:?}", report.damage);
    let out = dir.file("salvaged.sj");
    let salvaged = senju::salvage(&path, &out).unwrap();
    assert_eq!(salvaged.records, 120_000);
    assert_eq!(salvaged.damaged_regions, 0, "{:?}", salvaged.damage);
}
