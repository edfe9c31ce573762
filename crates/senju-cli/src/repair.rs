//! `senju check [--repair]`: verifies a database file with `senju::check` and, if asked,
//! salvages its intact records with `senju::salvage` into a fresh file that replaces it
//! (the damaged file is kept beside it as `PATH.broken`). A repair holds a shared lock on
//! the file from its check until the copy is in place, so no writer can open it meanwhile.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use senju::{CheckReport, SalvageReport};
use serde_json::json;

use crate::ops::{open_error, print_json};
use crate::progress::Progress;
use crate::replace::{self, Staged, with_suffix};

fn report_json(path: &Path, r: &CheckReport) -> serde_json::Value {
    json!({
        "path": path.display().to_string(),
        "ok": r.is_ok(),
        "closed_cleanly": r.closed_cleanly,
        "file_bytes": r.file_bytes,
        "shards": r.shards,
        "record_chunks": r.record_chunks,
        "index_chunks": r.index_chunks,
        "scanned_records": r.scanned_records,
        "records": r.records,
        "torn_chunks": r.torn_chunks,
        "damage_count": r.damage_count,
        "damage": r.damage.iter().map(|d| json!({"offset": d.offset, "what": d.what}))
            .collect::<Vec<_>>(),
    })
}

fn salvage_json(r: &SalvageReport) -> serde_json::Value {
    json!({
        "records": r.records,
        "expected_records": r.expected_records,
        "header_damaged": r.header_damaged,
        "damaged_regions": r.damaged_regions,
        "skipped_bytes": r.skipped_bytes,
        "damage": r.damage.iter().map(|d| json!({"offset": d.offset, "what": d.what}))
            .collect::<Vec<_>>(),
    })
}

/// Gives the damaged file `target` a second name, `TARGET.broken` or `TARGET.broken.N` for
/// the first N free, and returns it: a hard link, or where the file system has none a copy
/// with `target`'s owner and mode. A name is taken if anything has it, a dangling symbolic
/// link included: no link is followed and no file overwritten.
fn keep_broken(target: &Path) -> Result<PathBuf, String> {
    use std::io::ErrorKind::AlreadyExists;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |broken: &Path, e: std::io::Error| {
        format!("cannot keep the damaged {} as {}: {e}", target.display(), broken.display())
    };
    for n in 1..=1000 {
        let broken = match n {
            1 => with_suffix(target, ".broken"),
            n => with_suffix(target, &format!(".broken.{n}")),
        };
        if std::fs::symlink_metadata(&broken).is_ok() {
            continue;
        }
        match std::fs::hard_link(target, &broken) {
            Ok(()) => return Ok(broken),
            Err(e) if e.kind() == AlreadyExists => continue,
            Err(_) => {}
        }
        let mut to = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&broken)
        {
            Ok(f) => f,
            Err(e) if e.kind() == AlreadyExists => continue,
            Err(e) => return Err(failed(&broken, e)),
        };
        let copied = std::fs::File::open(target)
            .and_then(|mut from| std::io::copy(&mut from, &mut to))
            .and_then(|_| to.sync_all())
            .map_err(|e| failed(&broken, e))
            .and_then(|()| replace::keep_owner_and_mode(target, &broken));
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&broken);
            return Err(e);
        }
        return Ok(broken);
    }
    Err(format!(
        "cannot keep the damaged {}: {}.broken.1000 is taken",
        target.display(),
        target.display()
    ))
}

/// Runs `f` with a progress bar labelled `label`, sized by the first report.
fn with_bar<T>(label: &'static str, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
    let mut bar: Option<Progress> = None;
    let out =
        f(&mut |done, total| bar.get_or_insert_with(|| Progress::new(label, total)).tick(done));
    if let Some(b) = bar {
        b.finish();
    }
    out
}

/// Opens `path` and takes a shared lock on it, as check and salvage do for their reads,
/// for a repair to hold from its check until the salvaged copy has replaced the file: a
/// writer (which needs the lock alone) cannot open the database in between and write
/// records that the copy would not have. `None` where the file cannot be opened: the check
/// then reports why.
fn hold_shared(path: &Path) -> Result<Option<std::fs::File>, String> {
    let Ok(file) = std::fs::File::open(path) else { return Ok(None) };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(match senju::check(path) {
            Err(e) => open_error(path, e),
            Ok(_) => format!("cannot repair {}: another process holds it open", path.display()),
        }),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(format!("cannot repair {}: cannot lock it: {e}", path.display()))
        }
    }
}

/// For the tests: with `SENJU_TEST_REPAIR_PAUSE` set to a path (in a debug build only), a
/// repair creates that file after its check and waits until it is removed, so that a test
/// can act while the repair holds the database.
fn pause_for_tests() {
    if cfg!(debug_assertions)
        && let Some(flag) = std::env::var_os("SENJU_TEST_REPAIR_PAUSE")
        && std::fs::write(&flag, b"").is_ok()
    {
        while std::fs::exists(&flag).unwrap_or(false) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// `senju check`.
pub(crate) fn check(path: &Path, repair: bool, as_json: bool) -> Result<ExitCode, String> {
    let _held = if repair { hold_shared(path)? } else { None };
    let report = with_bar("check", |p| senju::check_with_progress(path, p))
        .map_err(|e| open_error(path, e))?;
    if report.is_ok() {
        if as_json {
            print_json(&report_json(path, &report));
        } else {
            let mut line = format!(
                "{}: OK: {} records in {} shards, {} bytes",
                path.display(),
                report.records,
                report.shards,
                report.file_bytes
            );
            if !report.closed_cleanly {
                line += &format!(
                    "; not closed cleanly (the next writable open recovers it; {} chunk(s) end \
                     in a record torn by the crash, which recovery drops)",
                    report.torn_chunks
                );
            }
            if repair {
                line += "; nothing to repair";
            }
            outln!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let first = report.first_damage().expect("a damaged report names its damage");
    if !repair {
        if as_json {
            print_json(&report_json(path, &report));
        } else {
            for d in &report.damage {
                outln!("damage {d}");
            }
        }
        eprintln!(
            "senju: {} is damaged {first}{}; `senju check --repair {}` salvages the intact \
             records",
            path.display(),
            match report.damage_count {
                1 => String::new(),
                n => format!(" ({n} damaged places in all)"),
            },
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    // The file repaired is the one `path` points to: the salvaged copy and `.broken` go
    // beside it, and a link to it stays a link.
    let target = replace::target(path)?;
    // The salvage fills an empty file this process created (the engine opens it as a new
    // database), so the records are never readable by others while it runs.
    let tmp = Staged::beside(&target, "repair").map_err(|e| {
        format!("cannot repair {}: cannot create a copy beside it: {e}", path.display())
    })?;
    if !tmp.may_replace(&target) {
        return Err(format!(
            "cannot repair {}: {} is another user's file in a sticky directory, which only \
             they may replace",
            path.display(),
            target.display()
        ));
    }
    pause_for_tests();
    let salvaged = with_bar("salvage", |p| senju::salvage_with_progress(path, &tmp.path, p));
    let s = salvaged.map_err(|e| format!("cannot repair {}: {e}", path.display()))?;
    // The damaged file gets its second name first, so that `path` names a whole file at
    // every moment: the damaged one until the rename, the salvaged one after.
    let broken = keep_broken(&target)?;
    if let Err(e) = tmp.put_in_place(&target) {
        let _ = std::fs::remove_file(&broken);
        return Err(format!("cannot repair {}: {e}; it is unchanged", path.display()));
    }
    let after = senju::check(path).map_err(|e| open_error(path, e))?;
    if !after.is_ok() {
        return Err(format!(
            "the salvaged copy {} does not check out either ({}); the damaged file is {}",
            path.display(),
            after.first_damage().map_or_else(String::new, ToString::to_string),
            broken.display()
        ));
    }
    if as_json {
        print_json(&json!({
            "check": report_json(path, &report),
            "salvage": salvage_json(&s),
            "broken": broken.display().to_string(),
        }));
    } else {
        let of = s.expected_records.map_or_else(String::new, |n| format!(" of {n}"));
        let lost = match s.expected_records {
            Some(n) if n > s.records => format!("; {} record(s) lost", n - s.records),
            _ => String::new(),
        };
        outln!(
            "repaired {}: first damage {first}; kept {} record(s){of}{lost}; skipped {} \
             damaged region(s), {} bytes{}; the damaged file is kept as {}",
            path.display(),
            s.records,
            s.damaged_regions,
            s.skipped_bytes,
            if s.header_damaged { "; the file header was damaged" } else { "" },
            broken.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
