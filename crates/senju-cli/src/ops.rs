//! The everyday record commands: `get`, `set`, `remove`, `count`, `list`, `stats`,
//! `rebuild`, and the helpers they share (opening a database, writing standard output).

use std::ffi::OsStr;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use senju::{Db, OpenError};
use serde_json::json;

use crate::codec;
use crate::replace::{self, Staged};

/// Opens an existing database for reading only (a shared lock; never recovers or writes).
pub(crate) fn open_read(path: &Path) -> Result<Db, String> {
    Db::builder().read_only(true).open(path).map_err(|e| open_error(path, e))
}

/// Opens a database for writing, creating it if `create`.
pub(crate) fn open_write(path: &Path, create: bool) -> Result<Db, String> {
    try_open_write(path, create).map_err(|e| open_error(path, e))
}

/// [`open_write`] with the engine's error, for a command that explains some of them itself.
pub(crate) fn try_open_write(path: &Path, create: bool) -> Result<Db, OpenError> {
    Db::builder().create(create).recovery_progress(crate::progress::recovery_bar()).open(path)
}

/// The engine's message, with command-line advice where the engine's is about its API.
pub(crate) fn open_error(path: &Path, e: OpenError) -> String {
    match e {
        OpenError::NotFound { .. } => format!("{}: no such database file", path.display()),
        OpenError::NeedsRecovery { .. } => format!(
            "{} was not closed cleanly and needs recovery, which a reading command cannot do; \
             run a writing command once (e.g. `senju rebuild {0}`), or `senju check --repair \
             {0}`",
            path.display()
        ),
        e => e.to_string(),
    }
}

/// Writes `bytes` to standard output; a closed pipe ends the program quietly (status 141,
/// as a shell reports SIGPIPE), any other error with a message.
pub(crate) fn stdout_bytes(out: &mut impl Write, bytes: &[u8]) {
    if let Err(e) = out.write_all(bytes) {
        stdout_failed(&e);
    }
}

/// Ends the program after a failed write to standard output.
pub(crate) fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == ErrorKind::BrokenPipe {
        crate::report::exit(141);
    }
    eprintln!("senju: cannot write to standard output: {e}");
    crate::report::exit(1);
}

/// Flushes standard output with the same error handling.
pub(crate) fn flush(out: &mut impl Write) {
    if let Err(e) = out.flush() {
        stdout_failed(&e);
    }
}

/// Prints a JSON value and a newline.
pub(crate) fn print_json(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    stdout_bytes(&mut out, format!("{v}\n").as_bytes());
    flush(&mut out);
}

/// A key for messages: its text if printable UTF-8, else TSV-escaped.
pub(crate) fn shown(key: &[u8]) -> String {
    let mut v = Vec::new();
    codec::tsv_escape(key, &mut v);
    String::from_utf8_lossy(&v).into_owned()
}

fn close(db: Db) -> Result<(), String> {
    db.close().map_err(|e| e.to_string())
}

/// `senju get`.
pub(crate) fn get(path: &Path, key: &OsStr, as_json: bool) -> Result<(), String> {
    let db = open_read(path)?;
    let key = key.as_bytes();
    let Some(value) = db.get(key).map_err(|e| e.to_string())? else {
        return Err(format!("no record for key \"{}\" in {}", shown(key), path.display()));
    };
    if as_json {
        print_json(&json!({"key": codec::json_bytes(key), "value": codec::json_bytes(&value)}));
    } else {
        let mut out = std::io::stdout().lock();
        stdout_bytes(&mut out, &value);
        stdout_bytes(&mut out, b"\n");
        flush(&mut out);
    }
    close(db)
}

/// `senju set`.
pub(crate) fn set(
    path: &Path,
    key: &OsStr,
    value: &OsStr,
    no_overwrite: bool,
    append: bool,
) -> Result<(), String> {
    let db = open_write(path, true)?;
    let (key, value) = (key.as_bytes(), value.as_bytes());
    let e = |e: senju::StorageError| e.to_string();
    if no_overwrite {
        if !db.add(key, value).map_err(e)? {
            return Err(format!(
                "key \"{}\" already has a value (--no-overwrite); remove it first",
                shown(key)
            ));
        }
    } else if append {
        db.append(key, value).map_err(e)?;
    } else {
        db.set(key, value).map_err(e)?;
    }
    close(db)
}

/// `senju remove`.
pub(crate) fn remove(path: &Path, key: &OsStr) -> Result<(), String> {
    let db = open_write(path, false)?;
    let key = key.as_bytes();
    if !db.remove(key).map_err(|e| e.to_string())? {
        return Err(format!("no record for key \"{}\" in {}", shown(key), path.display()));
    }
    close(db)
}

/// `senju count`.
pub(crate) fn count(path: &Path, as_json: bool) -> Result<(), String> {
    let db = open_read(path)?;
    let n = db.len();
    if as_json {
        print_json(&json!({ "count": n }));
    } else {
        outln!("{n}");
    }
    close(db)
}

/// `senju list`.
pub(crate) fn list(
    path: &Path,
    prefix: Option<&OsStr>,
    limit: Option<u64>,
    keys_only: bool,
    as_json: bool,
) -> Result<(), String> {
    let db = open_read(path)?;
    let prefix = prefix.map_or(&[][..], OsStr::as_bytes);
    let limit = limit.unwrap_or(u64::MAX);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    let mut listed = 0;
    for item in db.iter() {
        if listed >= limit {
            break;
        }
        let (k, v) = item.map_err(|e| e.to_string())?;
        if !k.starts_with(prefix) {
            continue;
        }
        line.clear();
        let value = (!keys_only).then_some(&v[..]);
        if as_json {
            codec::json_line(&k, value, &mut line);
        } else {
            codec::tsv_line(&k, value, &mut line);
        }
        stdout_bytes(&mut out, &line);
        listed += 1;
    }
    flush(&mut out);
    close(db)
}

/// `senju stats`.
pub(crate) fn stats(path: &Path, as_json: bool) -> Result<(), String> {
    let db = open_read(path)?;
    let s = db.stats().map_err(|e| e.to_string())?;
    let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let rows: [(&str, u64); 8] = [
        ("records", s.records),
        ("shards", s.shards),
        ("file_size", file_len),
        ("file_bytes_used", s.file_bytes),
        ("table_slots", s.table_slots),
        ("live_bytes", s.live_bytes),
        ("dead_bytes", s.dead_bytes),
        ("free_bytes", s.free_bytes),
    ];
    if as_json {
        let mut m = serde_json::Map::new();
        m.insert("path".into(), json!(path.display().to_string()));
        for (name, v) in rows {
            m.insert(name.into(), json!(v));
        }
        print_json(&serde_json::Value::Object(m));
    } else {
        outln!("path: {}", path.display());
        for (name, v) in rows {
            outln!("{name}: {v}");
        }
    }
    close(db)
}

/// `senju rebuild`: copies the live records into a fresh file beside the database and puts it
/// in the database's place (the default), or rebuilds in place with `Db::rebuild`
/// (`in_place`).
///
/// Why a copy by default: an in-place rebuild writes its copies before the old space is
/// free, so it cannot shorten the file (a compact 10M-record file grew from 322 MB to 552 MB,
/// most of it holes). The copy is as short as its data, with each shard's index sized once
/// for its records; it needs free disk space for that copy while it runs, where
/// `--in-place` needs none.
pub(crate) fn rebuild(path: &Path, in_place: bool) -> Result<(), String> {
    let db = open_write(path, false)?;
    let before = db.stats().map_err(|e| e.to_string())?;
    // The copy has no dead records by construction.
    let dead_after = if in_place {
        // A bar over the shards copied (drawn only when standard error is a terminal).
        let bar = crate::progress::Progress::new("rebuild", before.shards);
        db.rebuild_with_progress(|done, _| bar.tick(done)).map_err(|e| e.to_string())?;
        bar.finish();
        db.stats().map_err(|e| e.to_string())?.dead_bytes
    } else {
        rebuild_by_copy(path, &db, &before)?;
        0
    };
    let records = db.len();
    close(db)?;
    let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    outln!(
        "rebuilt {}: {} records; dead bytes {} -> {}; file size {} -> {} bytes",
        path.display(),
        records,
        before.dead_bytes,
        dead_after,
        before.file_bytes,
        file_len
    );
    Ok(())
}

/// Writes every record of `db` (open for writing, so no other process changes it) to
/// `TARGET.rebuild-PID` beside the file `path` names (links followed, see `replace.rs`),
/// closes that copy (a hard sync), checks its count, and renames it over that file while
/// `db` still holds the lock. On any error the copy is removed and the database is left as
/// it was.
fn rebuild_by_copy(path: &Path, db: &Db, before: &senju::Stats) -> Result<(), String> {
    let replaced = replace::target(path).and_then(|target| {
        let tmp = Staged::beside(&target, "rebuild")
            .map_err(|e| format!("cannot create a copy beside {}: {e}", target.display()))?;
        if !tmp.may_replace(&target) {
            return Err(format!(
                "{} is another user's file in a sticky directory, which only they may replace \
                 (`senju rebuild --in-place` rewrites it where it is)",
                target.display()
            ));
        }
        let n = copy_records(db, before, &tmp.path)?;
        if n != before.records {
            return Err(format!(
                "the copy holds {n} records where the database has {}",
                before.records
            ));
        }
        tmp.put_in_place(&target)
    });
    replaced.map_err(|e| {
        format!(
            "cannot rebuild {}: {e}; the database is unchanged{}",
            path.display(),
            if e.contains("No space") {
                " (`senju rebuild --in-place` needs no room for a copy)"
            } else {
                ""
            }
        )
    })
}

/// Copies the records into a new database at `to` (an empty file this process created);
/// returns how many it copied.
fn copy_records(db: &Db, before: &senju::Stats, to: &Path) -> Result<u64, String> {
    // Room for every record plus a little, so that no shard whose share runs above the
    // average has to grow its table (which would leave it a third empty).
    let hint = before.records + before.records / 32 + 64 * before.shards;
    let copy = Db::builder()
        .shards(u32::try_from(before.shards).map_err(|_| "too many shards".to_owned())?)
        .capacity_hint(hint)
        .auto_rebuild(None)
        .open(to)
        .map_err(|e| open_error(to, e))?;
    // Records go over in batches of at most 1024 records or 16 MiB (values may be large).
    const BATCH_RECORDS: usize = 1024;
    const BATCH_BYTES: usize = 16 << 20;
    let bar = crate::progress::Progress::new("rebuild", before.records);
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(BATCH_RECORDS);
    let (mut bytes, mut copied) = (0, 0u64);
    let mut write = |batch: &mut Vec<(Vec<u8>, Vec<u8>)>| {
        if batch.is_empty() {
            return Ok(());
        }
        copy.set_many(batch).map_err(|e| format!("writing the copy {}: {e}", to.display()))?;
        copied += batch.len() as u64;
        batch.clear();
        bar.tick(copied);
        Ok::<_, String>(())
    };
    for item in db.iter() {
        let (k, v) = item.map_err(|e| e.to_string())?;
        bytes += k.len() + v.len();
        batch.push((k, v));
        if batch.len() == BATCH_RECORDS || bytes >= BATCH_BYTES {
            write(&mut batch)?;
            bytes = 0;
        }
    }
    write(&mut batch)?;
    bar.finish();
    let held = copy.len();
    copy.close().map_err(|e| format!("closing the copy {}: {e}", to.display()))?;
    if held != copied {
        return Err(format!("the copy holds {held} records after {copied} were written"));
    }
    Ok(copied)
}
