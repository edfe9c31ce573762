//! `Senju::DB::Cursor`: one scan in progress, advanced a chunk at a time by `DB#each`
//! (`lib/senju.rb`), each chunk one native call (and one GVL release under `:auto` and
//! `:release`), so a scan never holds the store or the GVL between chunks.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use magnus::prelude::*;
use magnus::{DataTypeFunctions, Error, RArray, RClass, Ruby, TypedData, method};

use crate::db::{BIG_BATCH, DbObject, Handle, bin};
use crate::error::closed_error;
use crate::gvl::{self, CHUNK, CHUNK_BYTES, Step, Weight};

/// `Senju::DB::Cursor`: one scan in progress, advanced a chunk at a time by `DB#each`.
#[derive(TypedData)]
#[magnus(class = "Senju::DB::Cursor", size)]
pub(crate) struct CursorObject {
    h: Arc<Handle>,
    /// Locked only inside a step (never while waiting for the GVL); a second thread using
    /// the same cursor at the same time gets an error instead of waiting.
    cursor: Mutex<senju::Cursor>,
}

impl DataTypeFunctions for CursorObject {}

/// `db._cursor`: a new scan for `each`.
fn cursor(ruby: &Ruby, rb_self: &DbObject) -> Result<CursorObject, Error> {
    let h = rb_self.live(ruby)?;
    Ok(CursorObject { h: Arc::clone(&rb_self.h), cursor: Mutex::new(h.db.cursor()) })
}

/// `cursor.next_pairs(max)`: up to `max` pairs as a flat Array `[k1, v1, k2, v2, ...]`, fewer
/// once they hold [`CHUNK_BYTES`]; empty at the end.
fn next_pairs(ruby: &Ruby, rb_self: &CursorObject, max: usize) -> Result<RArray, Error> {
    let h = &rb_self.h;
    if h.closed.load(Ordering::Relaxed) {
        return Err(closed_error(ruby));
    }
    let max = max.clamp(1, 64 * CHUNK);
    let _call = gvl::BatchCall::enter();
    let weight = if max >= BIG_BATCH { Weight::Batch } else { Weight::Short };
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
    let mut st: (Option<Pairs>, bool) = (None, false);
    gvl::run(ruby, &h.policy, weight, &mut st, |(out, busy)| {
        let Ok(mut c) = rb_self.cursor.try_lock() else {
            *busy = true;
            return Ok(Step::Done);
        };
        *out = Some(c.next_pairs_within(&h.db, max, CHUNK_BYTES)?);
        Ok(Step::Done)
    })?;
    if st.1 {
        return Err(Error::new(
            ruby.exception_thread_error(),
            "this cursor is in use by another thread; scan with one `each` per thread",
        ));
    }
    let pairs = st.0.unwrap_or_default();
    Ok(ruby.ary_from_iter(pairs.iter().flat_map(|(k, v)| [bin(ruby, k), bin(ruby, v)])))
}

/// Defines `Senju::DB::Cursor` under the `DB` class, and `DB#_cursor`.
pub(crate) fn define(ruby: &Ruby, db_class: RClass) -> Result<(), Error> {
    db_class.define_method("_cursor", method!(cursor, 0))?;
    let class = db_class.define_class("Cursor", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("next_pairs", method!(next_pairs, 1))?;
    Ok(())
}
