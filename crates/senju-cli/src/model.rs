//! The model `wicked --validate` checks the database against: for every key number, the
//! value of the last write the database committed, exact under concurrency.
//!
//! Exactness comes from ordering, not from timing: the model is split into stripes (key
//! number modulo [`STRIPES`]), and a writer holds its key's stripe lock around both the
//! database write and the model update. Writes to one key are therefore applied to the
//! database and to the model in the same order, so after the run the two must agree key for
//! key. `clear` holds every stripe. Readers take no stripe lock, so reads still race with
//! writes on the same key inside the engine, as they do without `--validate`. A thread holds
//! at most one stripe at a time, or all of them taken in order, so the locks cannot deadlock.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use senju::Db;

use crate::report::{key_into, key_number};

/// Number of stripes: enough that threads rarely meet on one.
const STRIPES: usize = 256;

/// How many mismatches a failed check describes (it counts all of them).
const SHOWN: usize = 8;

/// One stripe's map, on its own cache lines so stripes do not share them.
#[repr(align(128))]
struct Stripe(Mutex<HashMap<u64, Vec<u8>>>);

/// The locked part of the model that holds one key.
pub(crate) type Entry<'a> = MutexGuard<'a, HashMap<u64, Vec<u8>>>;

/// Key number → the last committed value (absent: the key is absent).
pub(crate) struct Model {
    stripes: Box<[Stripe]>,
}

impl Model {
    pub(crate) fn new() -> Model {
        Model { stripes: (0..STRIPES).map(|_| Stripe(Mutex::new(HashMap::new()))).collect() }
    }

    /// Locks the stripe of key number `n`. Hold it across the database write and the model
    /// update of that key.
    pub(crate) fn lock(&self, n: u64) -> Entry<'_> {
        // A poisoned stripe only means a worker panicked; that panic is reported anyway.
        self.stripes[n as usize % STRIPES].0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks every stripe, in order (for `clear`).
    pub(crate) fn lock_all(&self) -> Vec<Entry<'_>> {
        (0..STRIPES as u64).map(|n| self.lock(n)).collect()
    }

    /// Alters the model behind the database's back, so that a check must fail: the first
    /// value found gets a byte appended, or, in an empty model, a key appears.
    pub(crate) fn corrupt(&self) {
        for n in 0..STRIPES as u64 {
            let mut s = self.lock(n);
            if let Some(v) = s.values_mut().next() {
                v.push(b'!');
                return;
            }
        }
        self.lock(0).insert(0, b"!".to_vec());
    }

    /// Compares the database with the model, both at rest: every record the cursor yields
    /// must be in the model with the same value, every model entry must be yielded once and
    /// found by a lookup with the same value, and `len()` must equal the model's size.
    /// Returns the number of records checked, or a description of every mismatch.
    pub(crate) fn check(&self, db: &Db) -> Result<u64, String> {
        let mut problems = Problems::default();
        let mut seen = HashSet::new();
        let show = |v: &[u8]| format!("{:?}", String::from_utf8_lossy(v));
        for item in db.iter() {
            let (k, v) = item.map_err(|e| format!("validation: iteration failed: {e}"))?;
            let Some(n) = key_number(&k) else {
                problems.add(format!("the database holds a key no thread wrote: {}", show(&k)));
                continue;
            };
            if !seen.insert(n) {
                problems.add(format!("key {n:08}: the cursor yielded it twice"));
            }
            match self.lock(n).get(&n) {
                None => problems.add(format!(
                    "key {n:08}: the database has {}, the model has no record",
                    show(&v)
                )),
                Some(m) if *m != v => problems.add(format!(
                    "key {n:08}: the database has {}, the model has {}",
                    show(&v),
                    show(m)
                )),
                Some(_) => {}
            }
        }
        let mut model_len = 0u64;
        let mut key = Vec::new();
        for n in 0..STRIPES as u64 {
            let stripe = self.lock(n);
            model_len += stripe.len() as u64;
            for (&n, m) in stripe.iter() {
                key_into(&mut key, n);
                let got = db.get(&key).map_err(|e| format!("validation: get failed: {e}"))?;
                match got {
                    None => problems.add(format!(
                        "key {n:08}: the model has {}, the database has no record",
                        show(m)
                    )),
                    Some(g) if g != *m => problems.add(format!(
                        "key {n:08}: a lookup reads {}, the model has {}",
                        show(&g),
                        show(m)
                    )),
                    Some(_) if !seen.contains(&n) => {
                        problems.add(format!("key {n:08}: found by a lookup, missed by the cursor"))
                    }
                    Some(_) => {}
                }
            }
        }
        if db.len() != model_len {
            problems.add(format!("len() is {}, the model holds {model_len} records", db.len()));
        }
        problems.into_result(model_len)
    }
}

#[derive(Default)]
struct Problems {
    count: u64,
    shown: Vec<String>,
}

impl Problems {
    fn add(&mut self, p: String) {
        self.count += 1;
        if self.shown.len() < SHOWN {
            self.shown.push(p);
        }
    }

    fn into_result(self, checked: u64) -> Result<u64, String> {
        if self.count == 0 {
            return Ok(checked);
        }
        let mut msg = format!(
            "VALIDATION FAILED: {} mismatch(es) between the database and the model \
             ({checked} records in the model)",
            self.count
        );
        for p in &self.shown {
            msg.push_str("\n  ");
            msg.push_str(p);
        }
        if self.count > self.shown.len() as u64 {
            msg.push_str(&format!("\n  ... and {} more", self.count - self.shown.len() as u64));
        }
        Err(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> Vec<u8> {
        let mut k = Vec::new();
        key_into(&mut k, n);
        k
    }

    fn setup() -> (Db, Model) {
        let (db, model) = (Db::memory().unwrap(), Model::new());
        for n in 0..50 {
            db.set(&key(n), b"1111").unwrap();
            model.lock(n).insert(n, b"1111".to_vec());
        }
        (db, model)
    }

    #[test]
    fn an_agreeing_model_passes() {
        let (db, model) = setup();
        assert_eq!(model.check(&db), Ok(50));
    }

    #[test]
    fn a_different_value_fails() {
        let (db, model) = setup();
        db.set(&key(7), b"2").unwrap();
        let e = model.check(&db).unwrap_err();
        assert!(e.contains("key 00000007: the database has \"2\", the model has \"1111\""), "{e}");
    }

    #[test]
    fn a_record_missing_on_either_side_fails() {
        let (db, model) = setup();
        db.remove(&key(3)).unwrap();
        db.set(&key(99), b"5").unwrap();
        let e = model.check(&db).unwrap_err();
        assert!(e.contains("key 00000003: the model has \"1111\", the database has no record"));
        assert!(e.contains("key 00000099: the database has \"5\", the model has no record"));
        assert!(!e.contains("len()"), "both hold 50 records: {e}");
    }

    #[test]
    fn a_corrupted_model_fails_even_when_empty() {
        let (db, model) = setup();
        model.corrupt();
        // The value differs for the cursor and for the lookup: two mismatches.
        let e = model.check(&db).unwrap_err();
        assert!(e.starts_with("VALIDATION FAILED: 2 mismatch"), "{e}");
        let (db, model) = (Db::memory().unwrap(), Model::new());
        model.corrupt();
        assert!(model.check(&db).is_err());
    }

    #[test]
    fn a_foreign_key_fails() {
        let (db, model) = setup();
        db.set(b"not-a-number", b"x").unwrap();
        let e = model.check(&db).unwrap_err();
        assert!(e.contains("a key no thread wrote") && e.contains("len() is 51"), "{e}");
    }
}
