//! `senju import` and `senju export`: records in and out as escaped TSV or JSON Lines (the
//! formats and their escaping are in `codec.rs`).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::Path;

use senju::{Db, OpenError};

use crate::cli::Format;
use crate::codec;
use crate::ops::{self, open_error, open_read};
use crate::progress::Progress;
use crate::replace::{self, Staged};

/// The format named by `--format`, else the one the file name suggests.
fn format_for(file: &Path, given: Option<Format>) -> Format {
    given.unwrap_or_else(|| match file.extension().and_then(|e| e.to_str()) {
        Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
        _ => Format::Tsv,
    })
}

fn is_stdio(file: &Path) -> bool {
    file.as_os_str() == "-"
}

/// Whether an export to `file` is written as it is rather than replaced: a device or a pipe
/// has nothing to keep and nothing to rename over, and a path that names a descriptor this
/// process already has open (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`, as
/// `>(gzip >x.gz)` passes) stands for a file that must not be swapped for another. Other
/// regular files, under `/dev` too (`/dev/shm`), are replaced whole, so a failed export
/// leaves them as they were.
fn is_stream(file: &Path) -> Result<bool, String> {
    match std::fs::metadata(file) {
        Ok(m) if m.is_dir() => Err(format!("cannot write {}: it is a directory", file.display())),
        Ok(m) => Ok(!m.is_file() || names_a_descriptor(file)),
        Err(_) => Ok(false),
    }
}

/// Whether `file` is a path through which a process reaches one of its open descriptors.
fn names_a_descriptor(file: &Path) -> bool {
    let std_name =
        ["/dev/stdin", "/dev/stdout", "/dev/stderr"].iter().any(|d| file == Path::new(d));
    let in_proc_fd = file.starts_with("/proc") && file.components().any(|c| c.as_os_str() == "fd");
    std_name || file.starts_with("/dev/fd") || in_proc_fd
}

/// Refuses a record file that is the database itself (the same device and inode, through
/// any links): exporting onto the database would truncate the file it reads, and importing
/// from it would read the file it writes.
fn not_the_database(path: &Path, file: &Path) -> Result<(), String> {
    if !is_stdio(file) && replace::same_file(path, file) {
        return Err(format!(
            "{} is the database itself ({}); name another file",
            file.display(),
            path.display()
        ));
    }
    Ok(())
}

/// `senju import`. Without `truncate` the records go straight into the database; a bad line
/// stops the import with the records before it kept. With `truncate` they go into a fresh
/// file beside the database, which replaces it only once the whole input is in (streamed, so
/// the input may be larger than memory; the disk needs room for that second file while it
/// runs); on any error the database is left as it was. Where the database may be written but
/// not replaced (its directory is not writable by this process, or is sticky and the
/// database someone else's), `truncate` empties it in place instead, and a bad line leaves
/// the records before it. A file that is not a senju database is never overwritten.
pub(crate) fn import(
    path: &Path,
    file: &Path,
    format: Option<Format>,
    truncate: bool,
) -> Result<(), String> {
    let format = format_for(file, format);
    not_the_database(path, file)?;
    let (input, total): (Box<dyn Read>, u64) = if is_stdio(file) {
        (Box::new(std::io::stdin().lock()), 0)
    } else {
        let f = File::open(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        (Box::new(f), len)
    };
    let name = if is_stdio(file) { "standard input".into() } else { file.display().to_string() };
    // The database is opened (and so locked) either way: while a truncating import fills
    // its copy no other writer can change the database, and the copy is renamed over it
    // before the lock is let go.
    let db = ops::try_open_write(path, true).map_err(|e| match e {
        OpenError::NotADatabase { .. } => format!(
            "{} is not a senju database; to import into a fresh database at this path, \
             remove or rename it first",
            path.display()
        ),
        e => open_error(path, e),
    })?;
    let staged = if truncate {
        let target = replace::target(path)?;
        match Staged::beside(&target, "import") {
            Ok(tmp) if tmp.may_replace(&target) => Some((target, tmp)),
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => None,
            Err(e) => {
                return Err(format!(
                    "cannot create a fresh database beside {}: {e}; it is unchanged",
                    target.display()
                ));
            }
        }
    } else {
        None
    };
    let records = if let Some((target, tmp)) = staged {
        let copy = Db::builder()
            .auto_rebuild(None)
            .open(&tmp.path)
            .map_err(|e| open_error(&tmp.path, e))?;
        let records = read_records(&copy, input, total, format, &name).map_err(|e| {
            let _ = copy.close();
            e.message(&name, &format!("; {} is unchanged", path.display()))
        })?;
        copy.close().map_err(|e| format!("closing the copy {}: {e}", tmp.path.display()))?;
        tmp.put_in_place(&target)?;
        records
    } else {
        let emptied = if truncate {
            db.clear().map_err(|e| format!("cannot empty {}: {e}", path.display()))?;
            ", after the old ones were removed"
        } else {
            ""
        };
        read_records(&db, input, total, format, &name).map_err(|e| match e {
            ImportError::Line { records, .. } => {
                e.message(&name, &format!(" ({records} records before it were imported{emptied})"))
            }
            ImportError::Other(_) => {
                e.message(&name, if truncate { " (the old records were removed)" } else { "" })
            }
        })?
    };
    db.close().map_err(|e| e.to_string())?;
    outln!("imported {records} records from {name} into {}", path.display());
    Ok(())
}

/// Why an import stopped.
enum ImportError {
    /// A line that is not a record.
    Line { line: u64, why: String, records: u64 },
    /// The input could not be read, or the database refused a record.
    Other(String),
}

impl ImportError {
    /// The error line for the input called `name`, ending with `tail`.
    fn message(&self, name: &str, tail: &str) -> String {
        match self {
            ImportError::Line { line, why, .. } => format!("{name} line {line}: {why}{tail}"),
            ImportError::Other(e) => format!("{e}{tail}"),
        }
    }
}

/// Reads every record of `input` into `db`; returns how many it read.
fn read_records(
    db: &Db,
    input: Box<dyn Read>,
    total: u64,
    format: Format,
    name: &str,
) -> Result<u64, ImportError> {
    let progress = Progress::new("import", total);
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let (mut line, mut line_no, mut read, mut records) = (Vec::new(), 0u64, 0u64, 0u64);
    let result = loop {
        line.clear();
        let n = match reader.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) => break Err(ImportError::Other(format!("cannot read {name}: {e}"))),
        };
        if n == 0 {
            break Ok(records);
        }
        line_no += 1;
        read += n as u64;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.is_empty() {
            continue;
        }
        let parsed = match format {
            Format::Tsv => codec::parse_tsv_line(&line),
            Format::Jsonl => codec::parse_json_line(&line),
        };
        let (k, v) = match parsed {
            Ok(kv) => kv,
            Err(why) => break Err(ImportError::Line { line: line_no, why, records }),
        };
        if let Err(e) = db.set(&k, &v) {
            break Err(ImportError::Other(format!("{name} line {line_no}: {e}")));
        }
        records += 1;
        progress.tick(read);
    };
    progress.finish();
    result
}

/// `senju export`. A file is written as a new file beside it (`FILE.export-PID`, in the
/// directory of the file a link points to), synced, given the old file's owner and mode,
/// and renamed over it only once every record is in: a failed export leaves an existing
/// file as it was, and other hard links to it keep the old records. An existing file this
/// process may not write is refused (as writing it in place was), and one it may write but
/// not replace (its directory is not writable by this process, or is sticky and the file
/// someone else's) is written in place. `-` (standard output), a device and a pipe are
/// written as a stream.
pub(crate) fn export(
    path: &Path,
    file: &Path,
    format: Option<Format>,
    sort: bool,
    keys_only: bool,
) -> Result<(), String> {
    let format = format_for(file, format);
    let db = open_read(path)?;
    not_the_database(path, file)?;
    // Every record, then a flush.
    let write = |out: &mut dyn Write| {
        let records = write_records(&db, out, format, sort, keys_only)?;
        out.flush().map_err(ExportError::Write)?;
        Ok(records)
    };
    let failed = |e: ExportError| match e {
        ExportError::Db(e) => e,
        ExportError::Write(e) => format!("cannot write {}: {e}", file.display()),
    };
    let cannot = |e: std::io::Error| failed(ExportError::Write(e));
    let records = if is_stdio(file) {
        write(&mut BufWriter::with_capacity(1 << 16, std::io::stdout().lock())).map_err(
            |e| match e {
                ExportError::Write(e) => ops::stdout_failed(&e),
                e => failed(e),
            },
        )?
    } else if is_stream(file)? {
        let f = File::create(file).map_err(cannot)?;
        write(&mut BufWriter::with_capacity(1 << 16, f)).map_err(failed)?
    } else {
        let target = replace::target(file)?;
        // Opened for writing (not truncated) only to learn whether this process may write
        // it: the permission a rename needs is the directory's, not the file's.
        let old = match OpenOptions::new().write(true).open(&target) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(cannot(e)),
        };
        let staged = match Staged::beside(&target, "export") {
            Ok(tmp) if old.is_none() || tmp.may_replace(&target) => Some(tmp),
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::PermissionDenied && old.is_some() => None,
            Err(e) => return Err(cannot(e)),
        };
        match (staged, old) {
            (Some(tmp), _) => {
                let records =
                    write(&mut BufWriter::with_capacity(1 << 16, &tmp.file)).map_err(failed)?;
                tmp.put_in_place(&target)?;
                records
            }
            (None, Some(f)) => {
                f.set_len(0).map_err(cannot)?;
                let records = write(&mut BufWriter::with_capacity(1 << 16, &f)).map_err(failed)?;
                f.sync_all().map_err(cannot)?;
                records
            }
            (None, None) => unreachable!("a file is written in place only where it exists"),
        }
    };
    db.close().map_err(|e| e.to_string())?;
    if !is_stdio(file) {
        outln!("exported {records} records from {} to {}", path.display(), file.display());
    }
    Ok(())
}

/// Why an export stopped.
enum ExportError {
    /// A record could not be read.
    Db(String),
    /// The output could not be written.
    Write(std::io::Error),
}

/// Writes every record of `db` to `out`; returns how many.
fn write_records(
    db: &Db,
    out: &mut dyn Write,
    format: Format,
    sort: bool,
    keys_only: bool,
) -> Result<u64, ExportError> {
    let progress = Progress::new("export", db.len());
    let mut line = Vec::new();
    let mut records = 0u64;
    let mut emit = |k: &[u8], v: &[u8]| {
        line.clear();
        let value = (!keys_only).then_some(v);
        match format {
            Format::Tsv => codec::tsv_line(k, value, &mut line),
            Format::Jsonl => codec::json_line(k, value, &mut line),
        }
        records += 1;
        progress.tick(records);
        out.write_all(&line).map_err(ExportError::Write)
    };
    let result = if sort {
        match db.iter().collect::<Result<Vec<_>, _>>() {
            Ok(mut all) => {
                all.sort_unstable();
                all.iter().try_for_each(|(k, v)| emit(k, v))
            }
            Err(e) => Err(ExportError::Db(e.to_string())),
        }
    } else {
        db.iter().try_for_each(|item| {
            let (k, v) = item.map_err(|e| ExportError::Db(e.to_string()))?;
            emit(&k, &v)
        })
    };
    progress.finish();
    result.map(|()| records)
}
