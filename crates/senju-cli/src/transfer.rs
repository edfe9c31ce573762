//! `senju import` and `senju export`: records in and out as escaped TSV or JSON Lines (the
//! formats and their escaping are in `codec.rs`).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use senju::Db;

use crate::cli::Format;
use crate::codec;
use crate::ops::{self, open_error, open_read};
use crate::progress::Progress;

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

/// `senju import`.
pub(crate) fn import(
    path: &Path,
    file: &Path,
    format: Option<Format>,
    truncate: bool,
) -> Result<(), String> {
    let format = format_for(file, format);
    let (input, total): (Box<dyn Read>, u64) = if is_stdio(file) {
        (Box::new(std::io::stdin().lock()), 0)
    } else {
        let f = File::open(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        (Box::new(f), len)
    };
    let db = Db::builder()
        .truncate(truncate)
        .recovery_progress(crate::progress::recovery_bar())
        .open(path)
        .map_err(|e| open_error(path, e))?;
    let name = if is_stdio(file) { "standard input".into() } else { file.display().to_string() };
    let progress = Progress::new("import", total);
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let (mut line, mut line_no, mut read, mut records) = (Vec::new(), 0u64, 0u64, 0u64);
    loop {
        line.clear();
        let n =
            reader.read_until(b'\n', &mut line).map_err(|e| format!("cannot read {name}: {e}"))?;
        if n == 0 {
            break;
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
        let (k, v) = parsed.map_err(|e| {
            progress.finish();
            format!("{name} line {line_no}: {e} ({records} records before it were imported)")
        })?;
        db.set(&k, &v).map_err(|e| {
            progress.finish();
            format!("{name} line {line_no}: {e}")
        })?;
        records += 1;
        progress.tick(read);
    }
    progress.finish();
    db.close().map_err(|e| e.to_string())?;
    outln!("imported {records} records from {name} into {}", path.display());
    Ok(())
}

/// `senju export`.
pub(crate) fn export(
    path: &Path,
    file: &Path,
    format: Option<Format>,
    sort: bool,
    keys_only: bool,
) -> Result<(), String> {
    let format = format_for(file, format);
    let db = open_read(path)?;
    let to_stdout = is_stdio(file);
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(File::create(file).map_err(|e| format!("cannot create {}: {e}", file.display()))?)
    };
    let mut out = BufWriter::with_capacity(1 << 16, sink);
    let write_failed = |e: std::io::Error| -> String {
        if to_stdout {
            ops::stdout_failed(&e);
        }
        format!("cannot write {}: {e}", file.display())
    };
    let progress = Progress::new("export", db.len());
    let mut line = Vec::new();
    let mut records = 0u64;
    let mut emit = |k: &[u8], v: &[u8], out: &mut BufWriter<Box<dyn Write>>| {
        line.clear();
        let value = (!keys_only).then_some(v);
        match format {
            Format::Tsv => codec::tsv_line(k, value, &mut line),
            Format::Jsonl => codec::json_line(k, value, &mut line),
        }
        records += 1;
        progress.tick(records);
        out.write_all(&line)
    };
    let result = if sort {
        let mut all = db.iter().collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        all.sort_unstable();
        all.iter().try_for_each(|(k, v)| emit(k, v, &mut out)).map_err(write_failed)
    } else {
        let mut r = Ok(());
        for item in db.iter() {
            let (k, v) = item.map_err(|e| e.to_string())?;
            r = emit(&k, &v, &mut out).map_err(write_failed);
            if r.is_err() {
                break;
            }
        }
        r
    };
    progress.finish();
    result?;
    out.flush().map_err(write_failed)?;
    drop(out);
    db.close().map_err(|e| e.to_string())?;
    if !to_stdout {
        outln!("exported {records} records from {} to {}", path.display(), file.display());
    }
    Ok(())
}
