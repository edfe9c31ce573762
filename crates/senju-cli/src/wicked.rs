//! `senju perf wicked`: the randomized consistency workload of `tkrzw_dbm_perf wicked`.
//!
//! One database (a file emptied first, or in memory), one timed phase. Thread `id` draws key
//! numbers uniformly in `[0, iter * threads)` from a generator seeded `seed + id`, so threads
//! meet on the same keys; value lengths and operations come from a second generator seeded
//! `2 * seed + id + 1`. The value is a run of the digit `id % 10`, of a length uniform in
//! `[0, size]`. Per iteration, with fresh draws as Tkrzw makes them (`N` = iterations):
//!
//! | draw                                   | operation                                  | share  |
//! |----------------------------------------|--------------------------------------------|--------|
//! | `--rebuild` and `r % (N/2) == 0`       | `rebuild` (online compaction)              | rare   |
//! | `--clear` and `r % (N/2) == 0`         | `clear`                                    | rare   |
//! | `--sync` and `r % (N/2) == 0`          | `sync(Soft)`                               | rare   |
//! | `--iterator` and `r % 100 == 0`        | a cursor walk over 3 records (below)       | 1 %    |
//! | `r % 8 == 0`                           | append with `","` (Tkrzw's `Append`)       | 12.5 % |
//! | else `r % 5 == 0`                      | remove                                     | 17.5 % |
//! | else `r % 3 == 0`                      | set (2/3 overwrite, 1/3 `add`)             | 23.3 % |
//! | else                                   | get, copying the value                     | 46.7 % |
//!
//! Tkrzw's `Append(key, value, ",")` puts the delimiter only between an existing value and the
//! new one, so it runs as an atomic [`Db::update`]. The cursor walk starts at the first record
//! (senju's cursor has no `Jump`) and, for each of up to 3 records, removes it (1/5), sets it
//! (1/3 of the rest) or reads it. Thread 0 also calls `sync(Soft)` half-way, as Tkrzw does.
//! `rebuild` changes no record, so it runs without the model's locks, beside the writers.
//!
//! `--validate` keeps a [`Model`] of every committed write (see there why it is exact under
//! concurrency), checks on the way every answer that the model determines (whether `remove`
//! found the key, whether `add` added it, the value `append` produced) and that every value
//! read is one this workload can write, and at the end compares every record with the model.
//! For a file database it then closes, reopens and compares again. Any mismatch fails the
//! run with a message naming the keys. The clock stops after the first comparison, as
//! Tkrzw's stops after its validation.

use std::time::Instant;

use senju::{Db, Durability};

use crate::args::{Engine, PerfArgs};
use crate::model::{Entry, Model};
use crate::progress::Progress;
use crate::report::{
    key_into, key_number, print_done, print_header, rss, run_workers, sync_and_report,
};
use crate::rng::Rng;

/// Runs the workload and prints Tkrzw's lines.
pub(crate) fn run(a: &PerfArgs) -> Result<(), String> {
    let base_rss = rss();
    let (path, _temporary) = a.file_path();
    let db = a.open(&path, true)?;
    let model = a.validate.then(Model::new);
    print_header("Doing", a);
    let progress = Progress::new("Doing", a.iter);
    let t0 = Instant::now();
    let result = run_workers(a.threads, |id| {
        worker(a, &db, model.as_ref(), id, (id == 0).then_some(&progress))
    });
    progress.finish();
    result?;
    sync_and_report(&db)?;
    if let Some(model) = &model {
        if a.corrupt_model {
            model.corrupt();
        }
        let tv = Instant::now();
        model.check(&db)?;
        outln!("Validating records: ... done (elapsed={:.6})", tv.elapsed().as_secs_f64());
    }
    let elapsed = t0.elapsed().as_secs_f64();
    print_done("Done", &db, elapsed, a.iter * a.threads, base_rss)?;
    db.close().map_err(|e| e.to_string())?;
    if let (Some(model), Engine::File) = (&model, a.engine) {
        let tv = Instant::now();
        let db = a.open(&path, false)?;
        let checked = model.check(&db).map_err(|e| format!("after reopening: {e}"))?;
        db.close().map_err(|e| e.to_string())?;
        outln!(
            "Validating records after reopening: ... done (elapsed={:.6} num_records={checked})",
            tv.elapsed().as_secs_f64()
        );
        outln!();
    }
    Ok(())
}

/// Whether `v` is a value this workload can write: runs of one digit, each at most `size`
/// long, joined by `","` (appends). A torn or misplaced read fails this.
fn is_wicked_value(v: &[u8], size: usize) -> bool {
    v.split(|&b| b == b',').all(|run| {
        run.len() <= size
            && run.first().is_none_or(|&d| d.is_ascii_digit() && run.iter().all(|&b| b == d))
    })
}

/// One worker's state: its generators, buffers and the flags.
struct Worker<'a> {
    a: &'a PerfArgs,
    db: &'a Db,
    model: Option<&'a Model>,
    misc: Rng,
    value: Vec<u8>,
}

fn worker(
    a: &PerfArgs,
    db: &Db,
    model: Option<&Model>,
    id: u64,
    progress: Option<&Progress>,
) -> Result<(), String> {
    let total = a.iter * a.threads;
    let mut key_rng = Rng::new(a.seed + id);
    let mut w = Worker {
        a,
        db,
        model,
        misc: Rng::new(a.seed.wrapping_mul(2) + id + 1),
        value: vec![b'0' + (id % 10) as u8; a.size],
    };
    let rare = (a.iter / 2).max(1);
    let tick = (a.iter / 1000).max(1);
    let mut key = Vec::with_capacity(16);
    for i in 0..a.iter {
        let n = key_rng.below(total);
        key_into(&mut key, n);
        let len = w.misc.below(a.size as u64 + 1) as usize;
        if a.rebuild && w.misc.one_in(rare) {
            db.rebuild().map_err(|e| format!("Rebuild failed: {e}"))?;
        } else if a.clear && w.misc.one_in(rare) {
            w.clear()?;
        } else if a.sync && w.misc.one_in(rare) {
            db.sync(Durability::Soft).map_err(|e| format!("Synchronize failed: {e}"))?;
        } else if a.iterator && w.misc.one_in(100) {
            w.walk(len)?;
        } else if w.misc.one_in(8) {
            w.append(&key, n, len)?;
        } else if w.misc.one_in(5) {
            w.remove(&key, n)?;
        } else if w.misc.one_in(3) {
            let overwrite = !w.misc.one_in(3);
            w.set(&key, n, len, overwrite)?;
        } else {
            w.get(&key)?;
        }
        if id == 0 && i == a.iter / 2 {
            db.sync(Durability::Soft).map_err(|e| format!("Synchronize failed: {e}"))?;
        }
        if let Some(p) = progress.filter(|_| (i + 1) % tick == 0) {
            p.tick(i + 1);
        }
    }
    Ok(())
}

impl Worker<'_> {
    /// The model stripe of key number `n`, locked, when validating.
    fn entry(&self, n: u64) -> Option<Entry<'_>> {
        self.model.map(|m| m.lock(n))
    }

    fn clear(&self) -> Result<(), String> {
        let mut all = self.model.map(Model::lock_all);
        self.db.clear().map_err(|e| format!("Clear failed: {e}"))?;
        for stripe in all.iter_mut().flatten() {
            stripe.clear();
        }
        Ok(())
    }

    fn append(&self, key: &[u8], n: u64, len: usize) -> Result<(), String> {
        let value = &self.value[..len];
        let mut entry = self.entry(n);
        let new = self
            .db
            .update(key, |old| {
                Some(match old {
                    Some(old) => [old, b",", value].concat(),
                    None => value.to_vec(),
                })
            })
            .map_err(|e| format!("Append failed: {e}"))?
            .expect("append always leaves a value");
        if let Some(entry) = &mut entry {
            let want = match entry.get(&n) {
                Some(old) => [&old[..], b",", value].concat(),
                None => value.to_vec(),
            };
            if new != want {
                return Err(mismatch(n, "append produced", &new, &want));
            }
            entry.insert(n, new);
        }
        Ok(())
    }

    fn remove(&self, key: &[u8], n: u64) -> Result<(), String> {
        let mut entry = self.entry(n);
        let found = self.db.remove(key).map_err(|e| format!("Remove failed: {e}"))?;
        if let Some(entry) = &mut entry {
            let was = entry.remove(&n);
            if found != was.is_some() {
                return Err(format!(
                    "VALIDATION FAILED: key {n:08}: remove reported found={found}, the model \
                     had {}",
                    was.map_or("no record".into(), |v| format!(
                        "{:?}",
                        String::from_utf8_lossy(&v)
                    ))
                ));
            }
        }
        Ok(())
    }

    fn set(&self, key: &[u8], n: u64, len: usize, overwrite: bool) -> Result<(), String> {
        let value = &self.value[..len];
        let mut entry = self.entry(n);
        let stored = if overwrite {
            self.db.set(key, value).map(|()| true)
        } else {
            self.db.add(key, value)
        }
        .map_err(|e| format!("Set failed: {e}"))?;
        if let Some(entry) = &mut entry {
            if !overwrite && stored == entry.contains_key(&n) {
                return Err(format!(
                    "VALIDATION FAILED: key {n:08}: add reported added={stored}, the model {}",
                    if stored { "has a record" } else { "has no record" }
                ));
            }
            if stored {
                entry.insert(n, value.to_vec());
            }
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<(), String> {
        let got = self.db.get(key).map_err(|e| format!("Get failed: {e}"))?;
        if let Some(v) = got.filter(|v| self.model.is_some() && !is_wicked_value(v, self.a.size)) {
            return Err(format!(
                "VALIDATION FAILED: key {}: read a value this workload never writes: {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&v)
            ));
        }
        Ok(())
    }

    /// Tkrzw's iterator walk: from the first record, up to 3 records, each removed, set or read.
    fn walk(&mut self, len: usize) -> Result<(), String> {
        let mut cursor = self.db.iter();
        for _ in 0..3 {
            let Some(item) = cursor.next() else { break };
            let (k, v) = item.map_err(|e| format!("Iterator::Next failed: {e}"))?;
            let n = key_number(&k).filter(|_| self.model.is_some());
            if self.model.is_some() && n.is_none() {
                return Err(format!(
                    "VALIDATION FAILED: the cursor yielded a key no thread wrote: {:?}",
                    String::from_utf8_lossy(&k)
                ));
            }
            // `n` is a key number exactly when validating; the model then takes part.
            if self.misc.one_in(5) {
                match n {
                    Some(n) => self.remove(&k, n)?,
                    None => {
                        self.db.remove(&k).map_err(|e| format!("Iterator::Remove failed: {e}"))?;
                    }
                }
            } else if self.misc.one_in(3) {
                match n {
                    Some(n) => self.set(&k, n, len, true)?,
                    None => {
                        let value = &self.value[..len];
                        self.db.set(&k, value).map_err(|e| format!("Iterator::Set failed: {e}"))?;
                    }
                }
            } else if self.model.is_some() && !is_wicked_value(&v, self.a.size) {
                return Err(format!(
                    "VALIDATION FAILED: the cursor read a value this workload never writes: \
                     {:?}",
                    String::from_utf8_lossy(&v)
                ));
            }
        }
        Ok(())
    }
}

fn mismatch(n: u64, what: &str, got: &[u8], want: &[u8]) -> String {
    format!(
        "VALIDATION FAILED: key {n:08}: {what} {:?}, the model expects {:?}",
        String::from_utf8_lossy(got),
        String::from_utf8_lossy(want)
    )
}

#[cfg(test)]
mod tests {
    use super::is_wicked_value;

    #[test]
    fn wicked_values_are_digit_runs_joined_by_commas() {
        assert!(is_wicked_value(b"", 8));
        assert!(is_wicked_value(b"111,,22222222,3", 8));
        assert!(!is_wicked_value(b"111,12", 8));
        assert!(!is_wicked_value(b"222222222", 8));
        assert!(!is_wicked_value(b"ab", 8));
    }
}
