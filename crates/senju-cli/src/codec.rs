//! The record formats of `senju import`, `export` and `list`: escaped TSV and JSON Lines,
//! both binary-safe (any byte string, including tabs, newlines, backslashes, NUL and
//! invalid UTF-8, round-trips byte for byte).
//!
//! **TSV**: one record per line, `KEY<TAB>VALUE<LF>`, each field escaped:
//!
//! | byte(s) | written as |
//! |---|---|
//! | `\` | `\\` |
//! | TAB, LF, CR, NUL | `\t`, `\n`, `\r`, `\0` |
//! | other bytes below 0x20, and 0x7F | `\xHH` (two lowercase hex digits) |
//! | bytes that are not part of valid UTF-8 | `\xHH` |
//! | everything else (printable ASCII, valid UTF-8) | as is |
//!
//! Reading accepts exactly these escapes (hex digits in either case); any other `\` sequence
//! is an error. A plain text file without backslashes, tabs in data or control characters
//! is therefore already valid input. Empty lines are skipped; a final line may lack its LF.
//!
//! **JSON Lines**: one object per line, `{"key":K,"value":V}`. A field whose bytes are valid
//! UTF-8 is a JSON string; any other field is written as `"key_base64"` / `"value_base64"`
//! with standard padded base64 (RFC 4648) instead. Reading accepts either spelling of each
//! field, in any order, and ignores other members.

use serde_json::Value;

/// Appends `bytes`, TSV-escaped, to `out`.
pub(crate) fn tsv_escape(bytes: &[u8], out: &mut Vec<u8>) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.extend_from_slice(b"\\\\"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\0' => out.extend_from_slice(b"\\0"),
                c if (c as u32) < 0x20 || c == '\x7f' => hex_escape(c as u8, out),
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        for &b in chunk.invalid() {
            hex_escape(b, out);
        }
    }
}

fn hex_escape(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(&[b'\\', b'x', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
}

/// Undoes [`tsv_escape`]. The error says what is wrong and at which byte of `field`.
pub(crate) fn tsv_unescape(field: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let b = field[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let (byte, used) = match field.get(i + 1) {
            Some(b'\\') => (b'\\', 2),
            Some(b't') => (b'\t', 2),
            Some(b'n') => (b'\n', 2),
            Some(b'r') => (b'\r', 2),
            Some(b'0') => (0, 2),
            Some(b'x') => {
                let hex = |j: usize| field.get(j).and_then(|&c| (c as char).to_digit(16));
                match (hex(i + 2), hex(i + 3)) {
                    (Some(h), Some(l)) => ((h * 16 + l) as u8, 4),
                    _ => return Err(format!("byte {}: `\\x` needs two hex digits", i + 1)),
                }
            }
            Some(&c) => {
                return Err(format!(
                    "byte {}: unknown escape `\\{}` (write a backslash as `\\\\`)",
                    i + 1,
                    (c as char).escape_default()
                ));
            }
            None => return Err(format!("byte {}: a lone backslash ends the field", i + 1)),
        };
        out.push(byte);
        i += used;
    }
    Ok(out)
}

/// One TSV line (without its LF) for a record; `value: None` writes the key alone.
pub(crate) fn tsv_line(key: &[u8], value: Option<&[u8]>, out: &mut Vec<u8>) {
    tsv_escape(key, out);
    if let Some(v) = value {
        out.push(b'\t');
        tsv_escape(v, out);
    }
    out.push(b'\n');
}

/// Parses one TSV line (without its LF) into a record.
pub(crate) fn parse_tsv_line(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut fields = line.split(|&b| b == b'\t');
    let key = fields.next().unwrap_or_default();
    let Some(value) = fields.next() else {
        return Err("no tab between key and value".into());
    };
    if fields.next().is_some() {
        return Err("more than one tab (tabs inside a field are written `\\t`)".into());
    }
    let key = tsv_unescape(key).map_err(|e| format!("key, {e}"))?;
    let value = tsv_unescape(value).map_err(|e| format!("value, {e}"))?;
    Ok((key, value))
}

/// Appends the JSON member for `bytes` named `name` (or `name_base64`) to `out`.
fn json_member(name: &str, bytes: &[u8], out: &mut String) {
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            out.push_str(&serde_json::to_string(s).expect("a str serializes"));
        }
        Err(_) => {
            out.push('"');
            out.push_str(name);
            out.push_str("_base64\":\"");
            base64_encode(bytes, out);
            out.push('"');
        }
    }
}

/// One JSON Lines line (with its LF) for a record; `value: None` writes the key alone.
pub(crate) fn json_line(key: &[u8], value: Option<&[u8]>, out: &mut Vec<u8>) {
    let mut s = String::with_capacity(key.len() + value.map_or(0, <[u8]>::len) + 24);
    s.push('{');
    json_member("key", key, &mut s);
    if let Some(v) = value {
        s.push(',');
        json_member("value", v, &mut s);
    }
    s.push_str("}\n");
    out.extend_from_slice(s.as_bytes());
}

/// The bytes of field `name` of a JSON object: `name` (a string) or `name_base64`.
fn json_field(obj: &serde_json::Map<String, Value>, name: &str) -> Result<Vec<u8>, String> {
    let b64 = format!("{name}_base64");
    match (obj.get(name), obj.get(&b64)) {
        (Some(Value::String(s)), None) => Ok(s.clone().into_bytes()),
        (None, Some(Value::String(s))) => base64_decode(s).map_err(|e| format!("{b64}: {e}")),
        (Some(_), Some(_)) => Err(format!("both \"{name}\" and \"{b64}\"")),
        (None, None) => Err(format!("no \"{name}\" (or \"{b64}\")")),
        _ => Err(format!("\"{name}\" is not a string")),
    }
}

/// Parses one JSON Lines line into a record.
pub(crate) fn parse_json_line(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = v else { return Err("not a JSON object".into()) };
    Ok((json_field(&obj, "key")?, json_field(&obj, "value")?))
}

/// `bytes` as a JSON value: a string if valid UTF-8, else `{"base64": "..."}`.
pub(crate) fn json_bytes(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::String(s.into()),
        Err(_) => {
            let mut s = String::new();
            base64_encode(bytes, &mut s);
            serde_json::json!({ "base64": s })
        }
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64 (RFC 4648, section 4).
pub(crate) fn base64_encode(bytes: &[u8], out: &mut String) {
    for group in bytes.chunks(3) {
        let n = group.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// Decodes standard padded base64; whitespace is not allowed.
pub(crate) fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return Err("base64 length is not a multiple of 4".into());
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (gi, group) in s.chunks(4).enumerate() {
        let last = gi + 1 == s.len() / 4;
        let pad = group.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err("misplaced base64 padding".into());
        }
        let mut n = 0u32;
        for (i, &c) in group[..4 - pad].iter().enumerate() {
            let d = B64.iter().position(|&x| x == c).ok_or_else(|| {
                format!("invalid base64 character {:?}", (c as char).escape_default().to_string())
            })?;
            n |= (d as u32) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value, invalid UTF-8, multi-byte characters, the structural bytes.
    fn awkward() -> Vec<Vec<u8>> {
        let mut all: Vec<u8> = (0..=255).collect();
        all.extend_from_slice("日本\\t\t\n\r\0".as_bytes());
        vec![
            Vec::new(),
            all,
            b"a\\tb".to_vec(),
            b"\\".to_vec(),
            b"\xff\xfe".to_vec(),
            "senju 千手".as_bytes().to_vec(),
            vec![0xe6, 0x97], // a cut UTF-8 sequence
        ]
    }

    #[test]
    fn tsv_round_trips_any_bytes() {
        for k in awkward() {
            for v in awkward() {
                let mut line = Vec::new();
                tsv_line(&k, Some(&v), &mut line);
                assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                assert_eq!(line.iter().filter(|&&b| b == b'\t').count(), 1);
                let parsed = parse_tsv_line(&line[..line.len() - 1]).unwrap();
                assert_eq!(parsed, (k.clone(), v));
            }
        }
    }

    #[test]
    fn tsv_escapes_are_the_documented_ones() {
        let mut out = Vec::new();
        tsv_escape(b"a\\b\tc\nd\re\0f\x01\x7f\xff\xc3\xa9", &mut out);
        assert_eq!(out, b"a\\\\b\\tc\\nd\\re\\0f\\x01\\x7f\\xff\xc3\xa9");
        assert_eq!(tsv_unescape(b"\\x4A\\x4a").unwrap(), b"JJ");
        assert!(tsv_unescape(b"\\q").unwrap_err().contains("unknown escape"));
        assert!(tsv_unescape(b"ab\\").unwrap_err().contains("lone backslash"));
        assert!(tsv_unescape(b"\\x4").unwrap_err().contains("two hex digits"));
        assert!(parse_tsv_line(b"no tab").is_err());
        assert!(parse_tsv_line(b"a\tb\tc").is_err());
    }

    #[test]
    fn json_lines_round_trip_any_bytes() {
        for k in awkward() {
            for v in awkward() {
                let mut line = Vec::new();
                json_line(&k, Some(&v), &mut line);
                assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                assert_eq!(parse_json_line(&line).unwrap(), (k.clone(), v));
            }
        }
        let mut line = Vec::new();
        json_line(b"k", Some(b"\xff"), &mut line);
        assert_eq!(line, b"{\"key\":\"k\",\"value_base64\":\"/w==\"}\n");
        assert!(parse_json_line(b"{\"key\":\"k\"}").unwrap_err().contains("no \"value\""));
        assert!(parse_json_line(b"[1]").is_err());
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (raw, enc) in cases {
            let mut s = String::new();
            base64_encode(raw, &mut s);
            assert_eq!(s, enc);
            assert_eq!(base64_decode(enc).unwrap(), raw);
        }
        assert!(base64_decode("Zm9").is_err());
        assert!(base64_decode("Zg==Zg==").is_err());
        assert!(base64_decode("Z!==").is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any key and value survive a TSV line and a JSON line, and each line is one line.
        #[test]
        fn lines_round_trip_random_bytes(
            k in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            v in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let mut line = Vec::new();
            tsv_line(&k, Some(&v), &mut line);
            proptest::prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            proptest::prop_assert_eq!(parse_tsv_line(&line[..line.len() - 1]).unwrap(), (k.clone(), v.clone()));
            line.clear();
            json_line(&k, Some(&v), &mut line);
            proptest::prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            proptest::prop_assert_eq!(parse_json_line(&line).unwrap(), (k, v));
        }

        /// Whatever a file holds, parsing a line returns a pair or an error, never panics.
        #[test]
        fn parsing_arbitrary_lines_never_panics(
            line in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            text in "\\PC{0,40}",
        ) {
            let _ = parse_tsv_line(&line);
            let _ = parse_json_line(&line);
            let _ = tsv_unescape(&line);
            let _ = base64_decode(&text);
            let json = format!("{{\"key_base64\":\"{text}\",\"value\":\"{text}\"}}");
            let _ = parse_json_line(json.as_bytes());
        }

        /// base64 round-trips any bytes.
        #[test]
        fn base64_round_trips(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut s = String::new();
            base64_encode(&raw, &mut s);
            proptest::prop_assert_eq!(base64_decode(&s).unwrap(), raw);
        }
    }
}
