//! The everyday commands end to end through the built binary: get, set, remove, count, list,
//! stats, rebuild, import, export, check (and --repair), completions, help and errors.

mod common;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{run, senju};

/// A fresh directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("senju-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails unless the command failed with one `senju: ...` line on stderr containing `needle`.
fn fails_with(args: &[&str], needle: &str) -> Output {
    let out = senju(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(err.starts_with("senju: ") && err.ends_with('\n'), "{args:?}: {err:?}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err:?}");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err:?}");
    out
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// The TSV escaping of the `export --help` text, written independently of the binary.
fn escape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.extend_from_slice(b"\\\\"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\0' => out.extend_from_slice(b"\\0"),
                c if (c as u32) < 0x20 || c == '\x7f' => {
                    out.extend_from_slice(format!("\\x{:02x}", c as u32).as_bytes())
                }
                c => out.extend_from_slice(c.to_string().as_bytes()),
            }
        }
        for b in chunk.invalid() {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
    out
}

/// 300 records with awkward bytes: every byte value, tabs, newlines, backslashes, NUL,
/// invalid UTF-8, multi-byte characters, empty keys and values. Sorted by key.
fn awkward_records() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut recs: Vec<(Vec<u8>, Vec<u8>)> = (0..300u32)
        .map(|i| {
            let b = (i % 256) as u8;
            let key = [&b"k"[..], &i.to_be_bytes(), &[b, b'\t', b'\\', 0xff]].concat();
            let value = match i % 5 {
                0 => Vec::new(),
                1 => (0..=255u8).collect(),
                2 => "千手\n\r\0\\n".as_bytes().to_vec(),
                3 => vec![0xe6, 0x97, b'\n'],
                _ => format!("plain value {i}").into_bytes(),
            };
            (key, value)
        })
        .collect();
    recs.push((Vec::new(), b"the empty key".to_vec()));
    recs.sort();
    recs
}

fn tsv_of(recs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in recs {
        out.extend(escape(k));
        out.push(b'\t');
        out.extend(escape(v));
        out.push(b'\n');
    }
    out
}

#[test]
fn set_get_remove_count_list_stats() {
    let d = Dir::new("records");
    let db = d.file("casket.sj");
    run(&["set", &db, "apple", "red"]);
    run(&["set", &db, "apricot", "orange"]);
    run(&["set", &db, "banana", "yellow"]);
    assert_eq!(run(&["get", &db, "apple"]), "red\n");
    run(&["set", &db, "apple", " and round", "--append"]);
    assert_eq!(run(&["get", &db, "apple"]), "red and round\n");
    fails_with(&["set", &db, "apple", "green", "--no-overwrite"], "already has a value");
    let g = json(&run(&["get", &db, "apple", "--json"]));
    assert_eq!(g, serde_json::json!({"key": "apple", "value": "red and round"}));
    assert_eq!(run(&["count", &db]), "3\n");
    assert_eq!(json(&run(&["count", &db, "--json"]))["count"], 3);

    let mut listed: Vec<String> = run(&["list", &db]).lines().map(String::from).collect();
    listed.sort();
    assert_eq!(listed, ["apple\tred and round", "apricot\torange", "banana\tyellow"]);
    let mut ap: Vec<String> =
        run(&["list", &db, "--prefix", "ap", "--keys"]).lines().map(String::from).collect();
    ap.sort();
    assert_eq!(ap, ["apple", "apricot"]);
    assert_eq!(run(&["list", &db, "--limit", "2"]).lines().count(), 2);
    for line in run(&["list", &db, "--json"]).lines() {
        let v = json(line);
        assert!(v["key"].is_string() && v["value"].is_string(), "{line}");
    }

    let s = json(&run(&["stats", &db, "--json"]));
    assert_eq!(s["records"], 3);
    assert_eq!(s["shards"], 128);
    assert!(s["file_size"].as_u64().unwrap() > 0);
    assert!(run(&["stats", &db]).contains("records: 3\n"));

    run(&["remove", &db, "banana"]);
    fails_with(&["remove", &db, "banana"], "no record for key \"banana\"");
    fails_with(&["get", &db, "banana"], "no record for key");
    let r = run(&["rebuild", &db]);
    assert!(r.starts_with("rebuilt ") && r.contains("2 records"), "{r}");
    assert_eq!(run(&["count", &db]), "2\n");
}

#[test]
fn keys_and_values_may_be_any_bytes_but_nul() {
    let d = Dir::new("bytes");
    let db = d.file("b.sj");
    let key = std::ffi::OsStr::from_bytes(b"k\xff\ttab");
    let value = std::ffi::OsStr::from_bytes(b"v\xfe\nline");
    let st = Command::new(env!("CARGO_BIN_EXE_senju"))
        .arg("set")
        .arg(&db)
        .arg(key)
        .arg(value)
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new(env!("CARGO_BIN_EXE_senju")).arg("get").arg(&db).arg(key).output();
    assert_eq!(out.unwrap().stdout, b"v\xfe\nline\n");
    let out = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["get", &db])
        .arg(key)
        .arg("--json")
        .output()
        .unwrap();
    let v = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(v["key"]["base64"], "a/8JdGFi");
    assert_eq!(run(&["list", &db]), "k\\xff\\ttab\tv\\xfe\\nline\n");
}

#[test]
fn import_export_round_trips_byte_for_byte() {
    let d = Dir::new("roundtrip");
    let recs = awkward_records();
    let tsv = tsv_of(&recs);
    std::fs::write(d.file("in.tsv"), &tsv).unwrap();
    let db = d.file("a.sj");
    let out = run(&["import", &db, &d.file("in.tsv")]);
    assert!(out.starts_with(&format!("imported {} records", recs.len())), "{out}");
    assert_eq!(run(&["count", &db]), format!("{}\n", recs.len()));

    // TSV: export --sort gives back the input file exactly.
    run(&["export", &db, &d.file("out.tsv"), "--sort"]);
    assert!(std::fs::read(d.file("out.tsv")).unwrap() == tsv, "TSV export differs from input");

    // JSON Lines: export, import into a second database, export as TSV: the same file.
    run(&["export", &db, &d.file("out.jsonl"), "--sort"]);
    let jsonl = std::fs::read_to_string(d.file("out.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), recs.len());
    for line in jsonl.lines() {
        let v = json(line);
        assert!(v.get("key").or(v.get("key_base64")).is_some(), "{line}");
    }
    let db2 = d.file("b.sj");
    run(&["import", &db2, &d.file("out.jsonl")]);
    run(&["export", &db2, &d.file("again.tsv"), "--sort"]);
    assert!(std::fs::read(d.file("again.tsv")).unwrap() == tsv, "TSV after JSONL differs");
    run(&["export", &db2, &d.file("again.jsonl"), "--sort"]);
    assert_eq!(std::fs::read_to_string(d.file("again.jsonl")).unwrap(), jsonl);

    // Unsorted export to stdout holds the same lines; stdin import reads them back.
    let streamed = senju(&["export", &db, "-", "--format", "tsv"]);
    assert!(streamed.status.success());
    let sorted_lines = |b: &[u8]| {
        let mut v: Vec<Vec<u8>> = b.split_inclusive(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
        v.sort();
        v
    };
    assert!(sorted_lines(&streamed.stdout) == sorted_lines(&tsv), "streamed lines differ");
    let mut child = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["import", &d.file("c.sj"), "-", "--format", "tsv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&streamed.stdout).unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    run(&["export", &d.file("c.sj"), &d.file("c.tsv"), "--sort"]);
    assert!(std::fs::read(d.file("c.tsv")).unwrap() == tsv);
}

#[test]
fn import_names_the_bad_line() {
    let d = Dir::new("badimport");
    std::fs::write(d.file("bad.tsv"), "a\t1\nb\t2\nc\\q\t3\n").unwrap();
    let db = d.file("x.sj");
    fails_with(&["import", &db, &d.file("bad.tsv")], "line 3: key, byte 2: unknown escape");
    std::fs::write(d.file("bad.jsonl"), "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":1}\n").unwrap();
    fails_with(&["import", &db, &d.file("bad.jsonl")], "line 2: \"key\" is not a string");
    fails_with(&["import", &db, &d.file("missing.tsv")], "cannot read");
}

/// Flips one byte inside the stored value `needle` of the database at `db`.
fn flip(db: &str, needle: &[u8]) {
    let mut bytes = std::fs::read(db).unwrap();
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("value in file");
    bytes[at + 2] ^= 0x40;
    std::fs::write(db, &bytes).unwrap();
}

#[test]
fn check_detects_damage_and_repair_keeps_the_intact_records() {
    let d = Dir::new("check");
    let db = d.file("c.sj");
    let recs: Vec<(Vec<u8>, Vec<u8>)> = (0..500u32)
        .map(|i| (format!("key{i:04}").into_bytes(), format!("value number {i:04}").into_bytes()))
        .collect();
    std::fs::write(d.file("in.tsv"), tsv_of(&recs)).unwrap();
    run(&["import", &db, &d.file("in.tsv")]);
    let ok = run(&["check", &db]);
    assert!(ok.contains(": OK: 500 records"), "{ok}");
    assert_eq!(json(&run(&["check", &db, "--json"]))["ok"], true);

    flip(&db, b"value number 0123");
    let out = fails_with(&["check", &db], "is damaged at byte");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("checksum"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--repair"), "the message says what to do");
    let report = senju(&["check", &db, "--json"]);
    assert!(!report.status.success());
    let report = json(&String::from_utf8(report.stdout).unwrap());
    assert_eq!(report["ok"], false);
    assert!(report["damage"][0]["offset"].as_u64().unwrap() > 0);

    let repaired = run(&["check", &db, "--repair"]);
    assert!(repaired.contains("kept 499 record(s) of 500; 1 record(s) lost"), "{repaired}");
    assert!(Path::new(&format!("{db}.broken")).exists(), "the damaged file is kept");
    assert!(run(&["check", &db]).contains("OK: 499 records"));
    run(&["export", &db, &d.file("out.tsv"), "--sort"]);
    let want: Vec<_> = recs.into_iter().filter(|(k, _)| k != b"key0123").collect();
    assert!(std::fs::read(d.file("out.tsv")).unwrap() == tsv_of(&want));
}

#[test]
fn a_damaged_header_is_named_and_repaired() {
    let d = Dir::new("header");
    let db = d.file("h.sj");
    run(&["set", &db, "k", "v"]);
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[50] ^= 1;
    std::fs::write(&db, &bytes).unwrap();
    fails_with(&["check", &db], "damaged at byte 0: file header checksum");
    fails_with(&["get", &db, "k"], "corrupted");
    assert!(run(&["check", &db, "--repair"]).contains("the file header was damaged"));
    assert_eq!(run(&["get", &db, "k"]), "v\n");
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let d = Dir::new("errors");
    let missing = d.file("missing.sj");
    fails_with(&["get", &missing, "k"], "no such database file");
    fails_with(&["count", &missing], "no such database file");
    fails_with(&["check", &missing], "no such database file");
    fails_with(&["remove", &missing, "k"], "no such database file");
    std::fs::write(d.file("text.txt"), "just some text, long enough to hold a header......\n")
        .unwrap();
    fails_with(&["count", &d.file("text.txt")], "not a senju database");
    let bad = fails_with(&["bogus"], "unrecognized subcommand");
    assert_eq!(bad.status.code(), Some(2));
    fails_with(&["get", &missing], "required arguments were not provided");
    fails_with(&["list", &missing, "--limit", "x"], "invalid value 'x'");
    fails_with(&["export", &missing, "-", "--format", "xml"], "invalid value 'xml'");

    // A writer holds the file: reading commands are refused with the holder named.
    let db = d.file("held.sj");
    let held = senju::Db::open(&db).unwrap();
    fails_with(&["count", &db], "locked by process");
    fails_with(&["check", &db], "locked by process");
    drop(held);
    assert_eq!(run(&["count", &db]), "0\n");
}

#[test]
fn help_has_examples_and_completions_exist() {
    let top = run(&["--help"]);
    for needle in ["get", "import", "export", "check", "perf", "lab", "Examples:"] {
        assert!(top.contains(needle), "{needle} missing from --help:\n{top}");
    }
    for cmd in [
        "get",
        "set",
        "remove",
        "count",
        "list",
        "check",
        "rebuild",
        "import",
        "export",
        "stats",
        "completions",
    ] {
        let h = run(&[cmd, "--help"]);
        assert!(h.contains("Example"), "`senju {cmd} --help` has no example:\n{h}");
    }
    assert!(run(&["export", "--help"]).contains("\\xHH"), "the escaping is documented");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        assert!(script.contains("senju") && script.contains("import"), "{shell}");
    }
}

/// `rebuild` copies the live records into a fresh file that replaces the database: the file
/// gets shorter, every record is still there, nothing is left beside it; `--in-place`
/// rebuilds inside the file instead.
#[test]
fn rebuild_compacts_by_copy_or_in_place() {
    let d = Dir::new("rebuild");
    let db = d.file("r.sj");
    {
        let h = senju::Db::open(&db).unwrap();
        for round in 0..4u8 {
            for i in 0..5000u32 {
                // Removed before they are set again: removed records are never recycled
                // (their marks must stay), so the dead records wait for the rebuild.
                h.remove(format!("key{i}").as_bytes()).unwrap();
                h.set(format!("key{i}").as_bytes(), &[round; 200]).unwrap();
            }
        }
        for i in (0..5000u32).step_by(3) {
            h.remove(format!("key{i}").as_bytes()).unwrap();
        }
        // A few large values go over too.
        for i in 0..3u8 {
            h.set(format!("big{i}").as_bytes(), &vec![b'a' + i; 1 << 20]).unwrap();
        }
        h.close().unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mode = |p: &str| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let before = run(&["export", &db, "-", "--sort"]);
    let size = |p: &str| std::fs::metadata(p).unwrap().len();
    let (len_before, stats_before) = (size(&db), json(&run(&["stats", &db, "--json"])));
    assert!(stats_before["dead_bytes"].as_u64().unwrap() > 3 * 5000 * 200);

    let r = run(&["rebuild", &db]);
    assert!(r.starts_with("rebuilt ") && r.contains("3336 records") && r.contains("-> 0;"), "{r}");
    assert_eq!(run(&["export", &db, "-", "--sort"]), before);
    let dead_before = stats_before["dead_bytes"].as_u64().unwrap();
    assert!(
        size(&db) + dead_before / 2 < len_before,
        "{} bytes, {len_before} before with {dead_before} dead",
        size(&db)
    );
    let s = json(&run(&["stats", &db, "--json"]));
    assert_eq!((s["records"].as_u64(), s["dead_bytes"].as_u64()), (Some(3336), Some(0)));
    assert!(run(&["check", &db]).contains("OK"));
    assert_eq!(mode(&db), 0o640, "the copy keeps the database's permissions");
    let names: Vec<_> = std::fs::read_dir(&d.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["r.sj"], "only the database is left");

    // In place: overwrite once more, rebuild inside the file.
    {
        let h = senju::Db::open(&db).unwrap();
        for i in (1..5000u32).filter(|i| i % 3 != 0) {
            h.set(format!("key{i}").as_bytes(), &[3; 200]).unwrap();
        }
        h.close().unwrap();
    }
    let r = run(&["rebuild", &db, "--in-place"]);
    assert!(r.contains("3336 records") && r.contains("-> 0;"), "{r}");
    assert_eq!(run(&["export", &db, "-", "--sort"]), before);
}
