//! `Senju::DB`, the handle class (its chunked scan for `each` is in `cursor.rs`).
//!
//! Every method follows one shape: check the handle is open, copy the Ruby inputs into Rust
//! values (or, on the held fast path, borrow them while no Ruby code can run), run the store
//! work through [`gvl::run`], then build the Ruby results. Methods the gem defines in Ruby on
//! top of these live in `lib/senju.rb`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use magnus::encoding::Coderange;
use magnus::prelude::*;
use magnus::r_hash::ForEach;
use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{
    DataTypeFunctions, Error, RArray, RClass, RHash, RModule, RString, Ruby, TypedData, Value,
    function, method,
};
use rb_sys::StableApiDefinition;
use senju::{Db, StorageError};

use crate::error::{closed_error, internal_error, open_error, out_of_memory, storage_error};
use crate::gvl::{self, CHUNK, CHUNK_BYTES, Mode, Policy, Step, Weight};
use crate::packed::{Copied, Packed, PackedValues, try_copy};
use crate::recovery::{Callback, Progress};

/// Values at least this long make a single call `Weight::Large` (released under `:auto`).
/// Measured with `bench/thresholds.rb` (lab/0004-ruby-threads): at 2 threads releasing lost
/// to holding at 16 KiB (0.54-0.72x) and won at 64 KiB (1.18-1.22x).
const BIG_VALUE: usize = 64 * 1024;
/// Batches of at least this many items are `Weight::Batch`; smaller ones are `Short`.
/// Measured likewise: release/hold at 2 threads was 0.86-0.95x at 64 items, 0.97-1.06x at
/// 256, 1.14-1.18x at 1000.
pub(crate) const BIG_BATCH: usize = 256;

/// What every Ruby object for one open database shares (the `DB` and its cursors).
pub(crate) struct Handle {
    pub(crate) db: Db,
    /// Set by `close` before it closes the store: later calls raise `ClosedError` at once.
    pub(crate) closed: AtomicBool,
    pub(crate) policy: Policy,
}

/// `Senju::DB`. Holds the store in an `Arc`, so a thread still inside a call (GVL released)
/// keeps it alive while another thread closes it or the object is collected. Shareable
/// across Ractors once frozen: every field is thread-safe.
#[derive(TypedData)]
#[magnus(class = "Senju::DB", size, frozen_shareable)]
pub(crate) struct DbObject {
    pub(crate) h: Arc<Handle>,
}

impl DataTypeFunctions for DbObject {}

/// The bytes of a Ruby string, copied (so they can cross a GVL release); `NoMemoryError` if
/// the copy cannot be allocated.
fn bytes(ruby: &Ruby, s: RString) -> Result<Vec<u8>, Error> {
    // SAFETY: the GVL is held and no Ruby code runs while the slice is borrowed.
    try_copy(unsafe { s.as_slice() }).map_err(|needed| out_of_memory(ruby, needed))
}

/// A binary (ASCII-8BIT) Ruby string.
pub(crate) fn bin(ruby: &Ruby, b: &[u8]) -> RString {
    ruby.str_from_slice(b)
}

fn storage(ruby: &Ruby) -> impl Fn(senju::StorageError) -> Error + '_ {
    move |e| storage_error(ruby, e)
}

/// The `rb_data_type_t` of `Senju::DB` objects, learnt from the first receiver that magnus
/// unwrapped (null until then).
static DB_DATA_TYPE: AtomicPtr<rb_sys::rb_data_type_t> = AtomicPtr::new(std::ptr::null_mut());

/// The receiver of a `Senju::DB` method that is called one key at a time (`[]`, `[]=`,
/// `delete`, `key?`, `compare_and_set`, `append`). magnus's own unwrap checks the type under
/// `rb_protect` (about 200 instructions, a sixth of a single `db[key]`'s work in the
/// extension); this compares the object's data type with the one magnus accepted before and
/// reads the data pointer, falling back to magnus (and its `TypeError`) for anything else.
#[inline]
fn this(rb_self: &Value) -> Result<&DbObject, Error> {
    let raw = rb_self.as_raw();
    let api = rb_sys::stable_api::get_default();
    let known = DB_DATA_TYPE.load(Ordering::Relaxed);
    // SAFETY: `raw` is the method's receiver, a live object.
    let is_data = unsafe { api.type_p(raw, rb_sys::ruby_value_type::RUBY_T_DATA) };
    // SAFETY: a T_DATA object has the header that `rtypeddata_p` reads.
    if !known.is_null() && is_data && unsafe { api.rtypeddata_p(raw) } {
        // SAFETY: a typed T_DATA object has a data type pointer.
        let ty = unsafe { api.rtypeddata_type(raw) };
        if std::ptr::eq(ty, known) {
            // SAFETY: as for the type.
            let data = unsafe { api.rtypeddata_get_data(raw) }.cast::<DbObject>();
            // SAFETY: an object of the data type magnus accepted as `DbObject` wraps a
            // `DbObject` (or null, which falls back below); it lives at least as long as
            // the receiver is on the stack, and magnus hands out only shared references.
            if let Some(db) = unsafe { data.as_ref() } {
                return Ok(db);
            }
        }
    }
    let db = <&DbObject>::try_convert(*rb_self)?;
    // SAFETY: magnus accepted `raw` as a `DbObject`, so it is a typed T_DATA object.
    let ty = unsafe { api.rtypeddata_type(raw) };
    DB_DATA_TYPE.store(ty.cast_mut(), Ordering::Relaxed);
    Ok(db)
}

impl DbObject {
    /// The handle, or `ClosedError` once `close` has started.
    #[inline]
    pub(crate) fn live(&self, ruby: &Ruby) -> Result<&Handle, Error> {
        // Relaxed: the store checks its own closed flag too; this one only answers early.
        if self.h.closed.load(Ordering::Relaxed) {
            return Err(closed_error(ruby));
        }
        Ok(&self.h)
    }
}

/// Options of `Senju::DB._open`, copied out of Ruby before the GVL is released.
struct OpenArgs {
    path: Option<PathBuf>,
    memory: bool,
    read_only: bool,
    truncate: bool,
    create: bool,
    shards: Option<u32>,
    max_size: Option<u64>,
    capacity_hint: Option<u64>,
    auto_rebuild: Option<u64>,
}

/// `Senju::DB._open(path, gvl, memory, readonly, truncate, create, shards, max_size,
/// capacity_hint, auto_rebuild, recovery_progress)`; `lib/senju.rb` validates the keywords
/// and calls this.
#[allow(clippy::too_many_arguments)]
fn open(
    ruby: &Ruby,
    path: Option<RString>,
    gvl_index: u8,
    memory: bool,
    read_only: bool,
    truncate: bool,
    create: bool,
    shards: Option<u32>,
    max_size: Option<u64>,
    capacity_hint: Option<u64>,
    auto_rebuild: Option<u64>,
    recovery_progress: Option<Value>,
) -> Result<DbObject, Error> {
    let mode = Mode::from_index(gvl_index)
        .ok_or_else(|| Error::new(ruby.exception_arg_error(), "gvl: must be 0, 1 or 2"))?;
    // A local, so the machine-stack scan of the GC keeps the callable and its first
    // exception alive during the open (see `recovery.rs`).
    let progress = recovery_progress.map(Progress::new);
    let callback = progress.as_ref().map(Callback::new);
    let args = OpenArgs {
        path: path
            .map(|p| bytes(ruby, p))
            .transpose()?
            .map(|p| PathBuf::from(OsString::from_vec(p))),
        memory,
        read_only,
        truncate,
        create,
        shards,
        max_size,
        capacity_hint,
        auto_rebuild,
    };
    let policy = Policy::new(mode);
    // An open that may call Ruby back runs with the GVL held (see `recovery.rs`).
    let held = Policy::new(Mode::Hold);
    let open_policy = if callback.is_some() { &held } else { &policy };
    let mut state = (args, None);
    gvl::run(ruby, open_policy, Weight::Io, &mut state, |(a, out)| {
        let mut b = Db::builder().read_only(a.read_only).truncate(a.truncate).create(a.create);
        if let Some(cb) = callback {
            b = b.recovery_progress(move |done, total| cb.call(done, total));
        }
        if let Some(n) = a.shards {
            b = b.shards(n);
        }
        if let Some(n) = a.max_size {
            b = b.max_size(n);
        }
        if let Some(n) = a.capacity_hint {
            b = b.capacity_hint(n);
        }
        if let Some(n) = a.auto_rebuild {
            b = b.auto_rebuild((n > 0).then_some(n));
        }
        *out = Some(match (&a.path, a.memory) {
            (_, true) => b.memory(),
            (Some(p), false) => b.open(p),
            (None, false) => b.memory(),
        });
        Ok(Step::Done)
    })?;
    // The callable's first exception, or its jump (`throw`, `Thread#kill`): it wins over
    // the open's own result.
    let first = progress.and_then(Progress::into_first);
    match state.1 {
        Some(Ok(db)) => {
            if let Some(e) = first {
                // The database is open and recovered; closing it marks the file clean. Closed
                // held, with no interrupt check, so that no Ruby code runs before a jump is
                // resumed (the VM keeps a `throw`'s target until then). A close that fails
                // leaves the file to be recovered by the next open.
                let _ = db.close();
                return Err(e);
            }
            Ok(DbObject { h: Arc::new(Handle { db, closed: AtomicBool::new(false), policy }) })
        }
        Some(Err(e)) => Err(first.unwrap_or_else(|| open_error(ruby, e))),
        None => Err(internal_error(ruby, "open produced no result")),
    }
}

/// What a lookup found: small values are copied out at once; for a big one only its length
/// is taken, and it is then copied straight into a Ruby string's buffer ([`read_big`]).
enum Found {
    Absent,
    Small(Copied),
    Big(usize),
}

fn lookup(db: &Db, key: &[u8]) -> senju::Result<Found> {
    let found = db.get_with(key, |v| {
        if v.len() >= BIG_VALUE {
            Ok(Found::Big(v.len()))
        } else {
            Copied::of(v).map(Found::Small).map_err(|needed| StorageError::OutOfMemory { needed })
        }
    })?;
    found.unwrap_or(Ok(Found::Absent))
}

/// `db[key]`: the value (a binary String) or nil.
fn get(ruby: &Ruby, rb_self: Value, key: RString) -> Result<Option<RString>, Error> {
    let h = this(&rb_self)?.live(ruby)?;
    let found = if h.policy.releases(Weight::Short) {
        let mut st = (bytes(ruby, key)?, Found::Absent);
        gvl::run(ruby, &h.policy, Weight::Short, &mut st, |(k, out)| {
            *out = lookup(&h.db, k)?;
            Ok(Step::Done)
        })?;
        st.1
    } else {
        // SAFETY: the GVL is held and no Ruby code runs while the key is borrowed.
        lookup(&h.db, unsafe { key.as_slice() }).map_err(storage(ruby))?
    };
    match found {
        Found::Absent => Ok(None),
        Found::Small(v) => Ok(Some(bin(ruby, v.as_slice()))),
        Found::Big(len) => read_big(ruby, h, bytes(ruby, key)?, len),
    }
}

/// The destination of [`read_big`]: the buffer of a fresh Ruby string.
struct OutBuf {
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: the buffer belongs to a string that only `read_big`'s frame references (it is
// not yet visible to Ruby code), so writing it from the same thread without the GVL races
// with nothing; the frame keeps the string alive (and, being on the machine stack, pinned
// against compaction) until the write is done.
unsafe impl Send for OutBuf {}

/// Reads a value of about `len` bytes into a new binary String with one copy, done without
/// the GVL when the policy releases for `Batch`. Retries if the value grew meanwhile.
fn read_big(
    ruby: &Ruby,
    h: &Handle,
    key: Vec<u8>,
    mut len: usize,
) -> Result<Option<RString>, Error> {
    loop {
        // Under `rb_protect`: a String that cannot be allocated raises `NoMemoryError`, which
        // must not jump over this frame.
        let raw = magnus::rb_sys::protect(|| {
            // SAFETY: the GVL is held; `rb_protect` catches the exception it may raise.
            unsafe { rb_sys::rb_str_buf_new(len as std::os::raw::c_long) }
        })
        .map_err(|e| {
            if e.is_kind_of(ruby.exception_no_mem_error()) { out_of_memory(ruby, len) } else { e }
        })?;
        // SAFETY: `rb_str_buf_new` returned a live object, kept by this frame.
        let s = RString::from_value(unsafe { Value::from_raw(raw) })
            .ok_or_else(|| internal_error(ruby, "rb_str_buf_new made no String"))?;
        // SAFETY: `s` is a live String; `rb_str_buf_new(len)` gave it room for `len` bytes.
        let ptr = unsafe { rb_sys::RSTRING_PTR(raw) }.cast::<u8>().cast_mut();
        let mut st = (OutBuf { ptr, cap: len }, None::<Result<usize, usize>>);
        gvl::run(ruby, &h.policy, Weight::Large, &mut st, |(buf, out)| {
            *out = h.db.get_with(&key, |v| {
                if v.len() > buf.cap {
                    return Err(v.len());
                }
                // SAFETY: `buf` has room for `cap >= v.len()` bytes (see `OutBuf`), and
                // does not overlap the store's memory.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), buf.ptr, v.len()) };
                Ok(v.len())
            })?;
            Ok(Step::Done)
        })?;
        match st.1 {
            None => return Ok(None),
            Some(Err(grown)) => len = grown,
            Some(Ok(n)) => {
                // SAFETY: the first `n <= capacity` bytes were just written.
                unsafe { rb_sys::rb_str_set_len(raw, n as std::os::raw::c_long) };
                return Ok(Some(s));
            }
        }
    }
}

/// `db[key] = value`.
fn set(ruby: &Ruby, rb_self: Value, key: RString, value: RString) -> Result<RString, Error> {
    let h = this(&rb_self)?.live(ruby)?;
    let mut weight = if value.len() >= BIG_VALUE { Weight::Large } else { Weight::Short };
    if !h.policy.releases(weight) {
        // SAFETY: the GVL is held and no Ruby code runs while the key is borrowed.
        let k = unsafe { key.as_slice() };
        // SAFETY: as for the key.
        let v = unsafe { value.as_slice() };
        match try_short(h, weight, || h.db.try_set(k, v)).map_err(storage(ruby))? {
            Tried::Done(()) => return Ok(value),
            // Waits below, as big values do.
            Tried::Busy => weight = Weight::Batch,
            Tried::Skipped => {
                h.db.set(k, v).map_err(storage(ruby))?;
                return Ok(value);
            }
        }
    }
    if weight != Weight::Short {
        // A big value is not copied: a frozen String shares (or is) its buffer, which no
        // one can change, and this frame keeps it alive while the store copies from it.
        let frozen = RString::new_frozen(value);
        // SAFETY: `frozen` is a live String.
        let ptr = unsafe { rb_sys::RSTRING_PTR(frozen.as_raw()) }.cast::<u8>();
        let mut st = (bytes(ruby, key)?, InBuf { ptr, len: frozen.len() });
        gvl::run(ruby, &h.policy, weight, &mut st, |(k, v)| {
            // SAFETY: see `InBuf`.
            let v = unsafe { std::slice::from_raw_parts(v.ptr, v.len) };
            h.db.set(k, v).map(|()| Step::Done)
        })?;
        std::hint::black_box(frozen);
        return Ok(value);
    }
    let mut st = (bytes(ruby, key)?, bytes(ruby, value)?);
    gvl::run(ruby, &h.policy, weight, &mut st, |(k, v)| h.db.set(k, v).map(|()| Step::Done))?;
    Ok(value)
}

/// The bytes of a frozen String, read without the GVL.
struct InBuf {
    ptr: *const u8,
    len: usize,
}

impl InBuf {
    /// The buffer of `frozen`, which the caller keeps alive (on its frame) while it is read.
    fn of(frozen: RString) -> InBuf {
        // SAFETY: `frozen` is a live String.
        let ptr = unsafe { rb_sys::RSTRING_PTR(frozen.as_raw()) }.cast::<u8>();
        InBuf { ptr, len: frozen.len() }
    }

    /// The bytes.
    ///
    /// # Safety
    ///
    /// The String this was made `of` is alive (see the `Send` impl).
    unsafe fn slice(&self) -> &[u8] {
        // SAFETY: the caller keeps the String, whose buffer this is, alive and frozen.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

// SAFETY: a frozen String's buffer never changes (a write to a string sharing it copies
// first) and is not freed while the String is alive; `set` keeps the String on its frame
// (so also pinned against compaction) until the store has copied the bytes.
unsafe impl Send for InBuf {}

/// What [`try_short`] did.
enum Tried<T> {
    /// The write ran; its result.
    Done(T),
    /// Another thread holds the key's shard (counted in `stats[:busy_waits]`): the caller
    /// waits for it as `Weight::Batch` work, released unless a convoy was just seen.
    Busy,
    /// Not tried (not `:auto`, or not a short write): the caller goes on as it would.
    Skipped,
}

/// Under `:auto`, whose short writes keep the GVL, runs `try_write` (the write if its
/// shard is free) first, so that a wait for a busy shard is not done with the GVL held.
fn try_short<T>(
    h: &Handle,
    weight: Weight,
    try_write: impl FnOnce() -> senju::Result<Option<T>>,
) -> senju::Result<Tried<T>> {
    if weight != Weight::Short || !h.policy.tries_short_writes() {
        return Ok(Tried::Skipped);
    }
    Ok(match try_write()? {
        Some(done) => Tried::Done(done),
        None => {
            h.policy.count_busy_wait();
            Tried::Busy
        }
    })
}

/// `db.delete(key)`: removes the key; returns its value, or nil if it was absent.
///
/// A small value is copied and the key removed in one step under the shard lock
/// ([`take_small`]); held, that step is tried only while the shard is free, else it waits
/// with the GVL released. A big value is left in place there, then read as `db[key]` reads
/// it (without the GVL) and removed only if it is still that value (`compare_and_set`),
/// again after a change by another thread. A copy that cannot be allocated raises
/// `NoMemoryError` with nothing removed.
fn delete(ruby: &Ruby, rb_self: Value, key: RString) -> Result<Option<RString>, Error> {
    let h = this(&rb_self)?.live(ruby)?;
    let mut weight = Weight::Short;
    let mut found = None;
    if !h.policy.releases(weight) {
        // SAFETY: the GVL is held and no Ruby code runs while the key is borrowed.
        let k = unsafe { key.as_slice() };
        match try_short(h, weight, || take_small(&h.db, k, false)).map_err(storage(ruby))? {
            Tried::Done(f) => found = Some(f),
            Tried::Busy => weight = Weight::Batch,
            Tried::Skipped => {}
        }
    }
    let found = match found {
        Some(f) => f,
        None => {
            let mut st = (bytes(ruby, key)?, Found::Absent);
            gvl::run(ruby, &h.policy, weight, &mut st, |(k, out)| {
                *out = take_small(&h.db, k, true)?.unwrap_or(Found::Absent);
                Ok(Step::Done)
            })?;
            st.1
        }
    };
    match found {
        Found::Absent => Ok(None),
        Found::Small(v) => Ok(Some(bin(ruby, v.as_slice()))),
        Found::Big(_) => loop {
            let Some(old) = get(ruby, rb_self, key)? else { return Ok(None) };
            if compare_and_set(ruby, rb_self, key, Some(old), None)? {
                return Ok(Some(old));
            }
        },
    }
}

/// Removes `key` if its value is small, returning a copy ([`Found::Small`]); a big value
/// stays ([`Found::Big`]), and so does one whose copy cannot be allocated (`OutOfMemory`).
/// `wait`: for the key's shard; else `None`, having done nothing, if another thread holds it.
fn take_small(db: &Db, key: &[u8], wait: bool) -> senju::Result<Option<Found>> {
    let (mut big, mut failed) = (None, None);
    let small = |v: &[u8]| {
        if v.len() >= BIG_VALUE {
            big = Some(v.len());
            return None;
        }
        Copied::of(v).map_err(|needed| failed = Some(needed)).ok()
    };
    let taken = if wait { Some(db.take_with(key, small)?) } else { db.try_take_with(key, small)? };
    if let Some(needed) = failed {
        return Err(StorageError::OutOfMemory { needed });
    }
    Ok(taken.map(|t| match (t, big) {
        (Some(v), _) => Found::Small(v),
        (None, Some(len)) => Found::Big(len),
        (None, None) => Found::Absent,
    }))
}

/// `db.key?(key)`.
fn contains(ruby: &Ruby, rb_self: Value, key: RString) -> Result<bool, Error> {
    let h = this(&rb_self)?.live(ruby)?;
    if !h.policy.releases(Weight::Short) {
        // SAFETY: the GVL is held and no Ruby code runs while the key is borrowed.
        return h.db.contains(unsafe { key.as_slice() }).map_err(storage(ruby));
    }
    let mut st = (bytes(ruby, key)?, false);
    gvl::run(ruby, &h.policy, Weight::Short, &mut st, |(k, out)| {
        *out = h.db.contains(k)?;
        Ok(Step::Done)
    })?;
    Ok(st.1)
}

/// `db.size`: the number of records.
fn size(ruby: &Ruby, rb_self: &DbObject) -> Result<u64, Error> {
    let h = rb_self.live(ruby)?;
    // `len` sums the shards' counters without the engine's fork check; in a child of `fork`
    // they are a stale copy, so this fails there as every other call does.
    h.db.check_fork().map_err(storage(ruby))?;
    Ok(h.db.len())
}

/// `v` as a String: itself, or what its `to_str` returns (the conversion the single-key
/// methods make); `None` if it is not a String and has no `to_str`. A `to_str` is Ruby code:
/// it may change any object, so no string may be borrowed across this call.
fn to_string(v: Value) -> Result<Option<RString>, Error> {
    if let Some(s) = RString::from_value(v) {
        return Ok(Some(s));
    }
    if !v.respond_to("to_str", false)? {
        return Ok(None);
    }
    RString::try_convert(v).map(Some)
}

/// The strings of an Array (or what their `to_str` returns), copied; `TypeError` names the
/// first element that is neither.
fn string_array(ruby: &Ruby, ary: RArray) -> Result<Packed, Error> {
    let oom = |needed| out_of_memory(ruby, needed);
    let mut out = Packed::with_capacity(ary.len()).map_err(oom)?;
    let mut other = None;
    {
        // SAFETY: the GVL is held and no Ruby code runs while the array's and the strings'
        // buffers are borrowed (`from_value` only checks a type).
        let items = unsafe { ary.as_slice() };
        for (i, &v) in items.iter().enumerate() {
            match RString::from_value(v) {
                // SAFETY: as above.
                Some(s) => out.push(unsafe { s.as_slice() }).map_err(oom)?,
                None => {
                    other = Some(i);
                    break;
                }
            }
        }
    }
    let Some(start) = other else {
        return Ok(out);
    };
    // From the first element that is not a String on, each is read afresh and copied at
    // once: a `to_str` may change the array or the strings read before.
    let mut i = start;
    while i < ary.len() {
        let v: Value = ary.entry(i as isize)?;
        let Some(s) = to_string(v)? else {
            return Err(Error::new(
                ruby.exception_type_error(),
                format!("keys must be Strings, got {} at index {i}", v.class().inspect()),
            ));
        };
        // SAFETY: the GVL is held and no Ruby code runs while the string is borrowed.
        out.push(unsafe { s.as_slice() }).map_err(oom)?;
        i += 1;
    }
    Ok(out)
}

/// The state of a `get_many` call.
struct Gets {
    keys: Packed,
    out: PackedValues,
    /// Whether the values found so far reach [`BIG_VALUE`] bytes: the rest of the call is
    /// weighed `Batch`, however few the keys.
    heavy: bool,
}

impl Gets {
    fn weight(&self) -> Weight {
        if self.keys.len() >= BIG_BATCH || self.heavy { Weight::Batch } else { Weight::Short }
    }
}

/// `db.get_many(keys)`: an Array of values (String or nil), in the order of `keys` (Strings,
/// or objects with `to_str` as for `[]`).
///
/// A step copies at most [`CHUNK`] values and stops once it holds [`CHUNK_BYTES`] (one value
/// may pass), so a few huge values are not copied in one go between two interrupt checks.
/// Under `:auto` the call is weighed by the bytes it copies too: a step that is held (fewer
/// than [`BIG_BATCH`] keys) stops before the value that would bring it to [`BIG_VALUE`]
/// bytes, and the rest runs as a `Batch`, released.
fn get_many(ruby: &Ruby, rb_self: &DbObject, keys: RArray) -> Result<RArray, Error> {
    let h = rb_self.live(ruby)?;
    let _call = gvl::BatchCall::enter();
    let keys = string_array(ruby, keys)?;
    let out = PackedValues::with_capacity(keys.len()).map_err(|n| out_of_memory(ruby, n))?;
    let mut st = Gets { keys, out, heavy: false };
    let weighs = h.policy.weighs();
    gvl::run_weighed(ruby, &h.policy, Gets::weight, &mut st, |g| {
        let light = weighs && g.weight() == Weight::Short;
        let Gets { keys, out, heavy } = g;
        let end = (out.len() + CHUNK).min(keys.len());
        // One engine batch per chunk, which overlaps the lookups' cache misses. The lookups
        // after a stop are repeated by the next step: a stop means values of kilobytes each,
        // beside whose copies a lookup is small.
        let chunk: Vec<&[u8]> = (out.len()..end).map(|i| keys.get(i)).collect();
        let (mut copied, mut stop, mut short) = (0usize, false, None);
        h.db.get_many_with(&chunk, |_, v| {
            if stop {
                return;
            }
            let len = v.map_or(0, <[u8]>::len);
            if light && copied.saturating_add(len) >= BIG_VALUE {
                (*heavy, stop) = (true, true);
                return;
            }
            match out.push(v) {
                Ok(()) => copied += len,
                Err(needed) => (short, stop) = (Some(needed), true),
            }
            stop |= copied >= CHUNK_BYTES;
        })?;
        if let Some(needed) = short {
            return Err(StorageError::OutOfMemory { needed });
        }
        Ok(if out.len() == keys.len() { Step::Done } else { Step::More })
    })?;
    // `ary_from_iter` keeps the new strings in a buffer on this stack (seen by the GC) and
    // appends them 128 at a time.
    Ok(ruby.ary_from_iter(st.out.iter().map(|v| v.map(|v| bin(ruby, v)))))
}

/// The pairs of a Hash, copied by [`collect_pair`] (or by [`convert_pairs`]).
struct PairsAcc {
    keys: Packed,
    values: Packed,
    /// Whether a pair that is not two Strings was met (the copy stops there).
    other: bool,
    /// The bytes a copy that could not be allocated needed (the copy stops there).
    short: Option<usize>,
}

impl PairsAcc {
    fn with_capacity(ruby: &Ruby, n: usize) -> Result<PairsAcc, Error> {
        let oom = |needed| out_of_memory(ruby, needed);
        let keys = Packed::with_capacity(n).map_err(oom)?;
        let values = Packed::with_capacity(n).map_err(oom)?;
        Ok(PairsAcc { keys, values, other: false, short: None })
    }

    /// Copies one pair; `Err(needed)` if it cannot be allocated.
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), usize> {
        self.keys.push(key)?;
        self.values.push(value)
    }
}

/// `rb_hash_foreach` callback: copies one String pair into the `PairsAcc` at `arg`, or stops
/// at the first pair of other types. Calls no Ruby API (type checks only), so it neither
/// raises nor lets Ruby code change the strings while they are read.
unsafe extern "C" fn collect_pair(k: rb_sys::VALUE, v: rb_sys::VALUE, arg: rb_sys::VALUE) -> i32 {
    // SAFETY: `arg` is the `PairsAcc` that `set_many` passed, alive and not otherwise used
    // during the iteration.
    let acc = unsafe { &mut *(arg as *mut PairsAcc) };
    // SAFETY: Ruby passes a live key of the Hash.
    let k = unsafe { Value::from_raw(k) };
    // SAFETY: and its live value.
    let v = unsafe { Value::from_raw(v) };
    let (Some(ks), Some(vs)) = (RString::from_value(k), RString::from_value(v)) else {
        acc.other = true;
        return rb_sys::st_retval::ST_STOP as i32;
    };
    // SAFETY: the GVL is held (Ruby runs this callback) and no Ruby code runs while the
    // strings are borrowed.
    let key = unsafe { ks.as_slice() };
    // SAFETY: as for the key.
    let value = unsafe { vs.as_slice() };
    if let Err(needed) = acc.push(key, value) {
        acc.short = Some(needed);
        return rb_sys::st_retval::ST_STOP as i32;
    }
    rb_sys::st_retval::ST_CONTINUE as i32
}

/// The pairs of a Hash that has a key or value other than a String, copied: each is converted
/// with `to_str` (the conversion the single-key methods make), from a snapshot of the pairs
/// taken first, since a `to_str` is Ruby code that may change the Hash. `TypeError` names the
/// first pair with a key or value that is neither a String nor has `to_str`.
fn convert_pairs(ruby: &Ruby, hash: RHash) -> Result<PairsAcc, Error> {
    // A local: the machine-stack scan of the GC keeps it (and so the pairs) alive.
    let snapshot = ruby.ary_new_capa(hash.len() * 2);
    hash.foreach(|k: Value, v: Value| {
        snapshot.push(k)?;
        snapshot.push(v)?;
        Ok(ForEach::Continue)
    })?;
    let n = snapshot.len() / 2;
    let mut acc = PairsAcc::with_capacity(ruby, n)?;
    for i in 0..n {
        let k: Value = snapshot.entry((2 * i) as isize)?;
        let v: Value = snapshot.entry((2 * i + 1) as isize)?;
        let (Some(ks), Some(vs)) = (to_string(k)?, to_string(v)?) else {
            return Err(Error::new(
                ruby.exception_type_error(),
                format!(
                    "set_many needs String keys and values, got {} => {}",
                    k.class().inspect(),
                    v.class().inspect()
                ),
            ));
        };
        // SAFETY: the GVL is held and no Ruby code runs while the strings are borrowed.
        let key = unsafe { ks.as_slice() };
        // SAFETY: as for the key.
        let value = unsafe { vs.as_slice() };
        acc.push(key, value).map_err(|needed| out_of_memory(ruby, needed))?;
    }
    Ok(acc)
}

/// `db.set_many(hash)`: sets every pair (each set atomic on its own). Keys and values are
/// Strings or have `to_str`, as for `[]=`. Every key and value is converted and checked
/// before anything is written; the engine then applies the pairs shard by shard, so
/// another thread may see them appear in any order, and on a storage error the pairs applied
/// before it stay set.
fn set_many(ruby: &Ruby, rb_self: &DbObject, hash: RHash) -> Result<(), Error> {
    let h = rb_self.live(ruby)?;
    let _call = gvl::BatchCall::enter();
    let mut acc = PairsAcc::with_capacity(ruby, hash.len())?;
    // SAFETY: `collect_pair` matches `rb_hash_foreach`'s callback type and `arg` is `acc`,
    // alive on this frame for the whole call. The callback calls no Ruby API and does not
    // panic (its copies are fallible), so nothing unwinds through Ruby.
    unsafe {
        rb_sys::rb_hash_foreach(
            hash.as_raw(),
            Some(collect_pair),
            std::ptr::from_mut(&mut acc) as rb_sys::VALUE,
        );
    }
    if let Some(needed) = acc.short {
        return Err(out_of_memory(ruby, needed));
    }
    if acc.other {
        acc = convert_pairs(ruby, hash)?;
    }
    let PairsAcc { keys, values, .. } = acc;
    // The engine checks the pairs of each call before it writes any; a batch of more than
    // one chunk is checked here, whole, first.
    (0..keys.len())
        .try_for_each(|i| senju::check_pair(keys.get(i), values.get(i)))
        .map_err(storage(ruby))?;
    // Weighed by the bytes it writes (keys and values) as well as by its pairs.
    let total = keys.bytes().saturating_add(values.bytes());
    let weight =
        if keys.len() >= BIG_BATCH || total >= BIG_VALUE { Weight::Batch } else { Weight::Short };
    let mut st = (keys, values, 0usize);
    gvl::run(ruby, &h.policy, weight, &mut st, |(keys, values, done)| {
        let end = (*done + CHUNK).min(keys.len());
        // One engine batch per chunk: it takes each shard's lock once for all of that
        // shard's pairs, and leaves a shard another thread holds for the end.
        let pairs: Vec<(&[u8], &[u8])> =
            (*done..end).map(|i| (keys.get(i), values.get(i))).collect();
        h.db.set_many(&pairs)?;
        *done = end;
        Ok(if end == keys.len() { Step::Done } else { Step::More })
    })?;
    Ok(())
}

/// `db.compare_and_set(key, expected, new)`: if the value is `expected` (nil: absent),
/// replaces it with `new` (nil: removes it) and returns true; else returns false.
fn compare_and_set(
    ruby: &Ruby,
    rb_self: Value,
    key: RString,
    expected: Option<RString>,
    new: Option<RString>,
) -> Result<bool, Error> {
    let h = this(&rb_self)?.live(ruby)?;
    let big = expected.map_or(0, |s| s.len()).max(new.map_or(0, |s| s.len())) >= BIG_VALUE;
    let mut weight = if big { Weight::Large } else { Weight::Short };
    // SAFETY: the GVL is held and no Ruby code runs while the strings are borrowed.
    let k = unsafe { key.as_slice() };
    // SAFETY: as for the key.
    let e = expected.as_ref().map(|s| unsafe { s.as_slice() });
    // SAFETY: as for the key.
    let n = new.as_ref().map(|s| unsafe { s.as_slice() });
    match try_short(h, weight, || h.db.try_compare_and_set(k, e, n)).map_err(storage(ruby))? {
        Tried::Done(done) => return Ok(done),
        Tried::Busy => weight = Weight::Batch,
        Tried::Skipped => {}
    }
    // The values are not copied (they may be 1 GiB each): frozen Strings share or are their
    // buffers, which no one can change, and this frame keeps them alive (see `InBuf`).
    let frozen = (expected.map(RString::new_frozen), new.map(RString::new_frozen));
    let bufs = (frozen.0.map(InBuf::of), frozen.1.map(InBuf::of));
    let mut st = (bytes(ruby, key)?, bufs, false);
    gvl::run(ruby, &h.policy, weight, &mut st, |(k, (e, n), out)| {
        // SAFETY: `frozen` holds the Strings until `run` returns.
        let e = e.as_ref().map(|b| unsafe { b.slice() });
        // SAFETY: as for `e`.
        let n = n.as_ref().map(|b| unsafe { b.slice() });
        *out = h.db.compare_and_set(k, e, n)?;
        Ok(Step::Done)
    })?;
    std::hint::black_box(frozen);
    Ok(st.2)
}

/// `db.append(key, suffix)`: appends to the value (an absent key counts as empty).
///
/// Weighed (under `:auto`) by the value it writes, the old value and the suffix: the engine
/// rewrites the whole value.
fn append(ruby: &Ruby, rb_self: Value, key: RString, suffix: RString) -> Result<(), Error> {
    let h = this(&rb_self)?.live(ruby)?;
    // SAFETY: the GVL is held and no Ruby code runs while the strings are borrowed.
    let (k, s) = (unsafe { key.as_slice() }, unsafe { suffix.as_slice() });
    let mut weight = if s.len() >= BIG_VALUE { Weight::Large } else { Weight::Short };
    // Held, the append is tried only while the shard is free and the new value stays short
    // (the engine rewrites the whole value): a long one is weighed as large.
    let tried = try_short(h, weight, || h.db.try_append_below(k, s, BIG_VALUE));
    match tried.map_err(storage(ruby))? {
        Tried::Done(Ok(())) => return Ok(()),
        Tried::Done(Err(_)) => weight = Weight::Large,
        Tried::Busy => weight = Weight::Batch,
        Tried::Skipped => {}
    }
    // The suffix is not copied: see `set`.
    let frozen = RString::new_frozen(suffix);
    let mut st = (bytes(ruby, key)?, InBuf::of(frozen));
    gvl::run(ruby, &h.policy, weight, &mut st, |(k, s)| {
        // SAFETY: `frozen` holds the String until `run` returns.
        h.db.append(k, unsafe { s.slice() }).map(|()| Step::Done)
    })?;
    std::hint::black_box(frozen);
    Ok(())
}

/// `db._sync(hard)`.
fn sync(ruby: &Ruby, rb_self: &DbObject, hard: bool) -> Result<(), Error> {
    let h = rb_self.live(ruby)?;
    let d = if hard { senju::Durability::Hard } else { senju::Durability::Soft };
    gvl::run(ruby, &h.policy, Weight::Io, &mut (), |()| h.db.sync(d).map(|()| Step::Done))
}

/// `db.rebuild`: compacts the file online.
fn rebuild(ruby: &Ruby, rb_self: &DbObject) -> Result<(), Error> {
    let h = rb_self.live(ruby)?;
    // A stop for an interrupt commits the shards copied so far; if the interrupt does not
    // raise, the next step goes on with the rest.
    let step = |(): &mut (), cancel: &AtomicBool| {
        let whole = h.db.rebuild_until(cancel, |_, _| {})?;
        Ok(if whole { Step::Done } else { Step::More })
    };
    gvl::run_cancellable(ruby, &h.policy, |()| Weight::Io, &mut (), step)
}

/// `db.clear`: removes every record.
fn clear(ruby: &Ruby, rb_self: &DbObject) -> Result<(), Error> {
    let h = rb_self.live(ruby)?;
    gvl::run(ruby, &h.policy, Weight::Io, &mut (), |()| h.db.clear().map(|()| Step::Done))
}

/// `db.stats`: a Hash of counters (Symbol keys): the store's, plus `chunks`, the chunks of
/// batch and scan work this handle has run (interrupts are checked between two chunks),
/// `busy_waits`, the short writes under `:auto` that found their shard held by another
/// thread and waited for it as a batch does, `auto_releases`, the stretches of work
/// under `:auto` that ran with the GVL released (this call's own included), and
/// `awake_waits`, the released stretches that ended waiting awake for another thread's
/// batch call to release the GVL, and took it then without sleeping in Ruby's queue.
///
/// Weighed `Io`: the engine visits every shard, taking each one's lock.
fn stats(ruby: &Ruby, rb_self: &DbObject) -> Result<RHash, Error> {
    let h = rb_self.live(ruby)?;
    let mut st = None;
    gvl::run(ruby, &h.policy, Weight::Io, &mut st, |out| {
        *out = Some(h.db.stats()?);
        Ok(Step::Done)
    })?;
    let s = st.ok_or_else(|| internal_error(ruby, "stats produced no result"))?;
    let hash = ruby.hash_new();
    for (name, v) in [
        ("records", s.records),
        ("shards", s.shards),
        ("file_bytes", s.file_bytes),
        ("table_slots", s.table_slots),
        ("live_bytes", s.live_bytes),
        ("dead_bytes", s.dead_bytes),
        ("free_bytes", s.free_bytes),
        ("auto_rebuilds", s.auto_rebuilds),
        ("chunks", h.policy.chunks()),
        ("busy_waits", h.policy.busy_waits()),
        ("auto_releases", h.policy.auto_releases()),
        ("awake_waits", h.policy.awake_waits()),
    ] {
        hash.aset(ruby.to_symbol(name), v)?;
    }
    if let Some(e) = s.auto_rebuild_error {
        hash.aset(ruby.to_symbol("auto_rebuild_error"), e)?;
    }
    Ok(hash)
}

/// `db.keys`: every key, scanned in one call that `Thread#kill`/`#raise` cancel between
/// chunks.
fn keys(ruby: &Ruby, rb_self: &DbObject) -> Result<RArray, Error> {
    let h = rb_self.live(ruby)?;
    let _call = gvl::BatchCall::enter();
    let mut st = (h.db.cursor(), Vec::new());
    gvl::run(ruby, &h.policy, Weight::Batch, &mut st, |(cursor, out)| {
        let chunk = cursor.next_keys(&h.db, CHUNK)?;
        if chunk.is_empty() {
            return Ok(Step::Done);
        }
        out.extend(chunk);
        Ok(Step::More)
    })?;
    Ok(ruby.ary_from_iter(st.1.iter().map(|k| bin(ruby, k))))
}

/// `db.close`: closes the store (waits for writers in flight, syncs a file). Calls made
/// later raise `ClosedError`; calls already inside the store finish or fail with it.
///
/// Returns only once the store is closed, also when another thread's close is in progress
/// (`Db::close` waits for it) and when an interrupt raises first: the engine's close is then
/// run with the GVL held before the interrupt's exception (or `Thread#kill`) goes on.
fn close(ruby: &Ruby, rb_self: &DbObject) -> Result<(), Error> {
    let h = &rb_self.h;
    // Relaxed: the flag only makes other calls raise `ClosedError` early; `Db::close` is
    // idempotent, serializes concurrent closes itself, and is always called.
    h.closed.store(true, Ordering::Relaxed);
    // Whether the step ran: a released region does not start while an interrupt is pending,
    // and `gvl::run` then returns the interrupt's error (see `gvl::without_gvl`).
    let mut ran = false;
    let result = gvl::run(ruby, &h.policy, Weight::Io, &mut ran, |ran| {
        *ran = true;
        h.db.close().map(|()| Step::Done)
    });
    if !ran {
        // No Ruby code runs here, so the interrupt's error (even a `Thread#kill`) is raised
        // as it was; a close that fails meanwhile is dropped in its favour.
        let _ = h.db.close();
    }
    result
}

/// `db.closed?`.
fn is_closed(rb_self: &DbObject) -> bool {
    rb_self.h.closed.load(Ordering::Relaxed)
}

/// `db.path`: the file's path, or nil for an in-memory database. Its bytes are the ones the
/// database was opened with, in the filesystem encoding (`Encoding.find("filesystem")`), or
/// binary (ASCII-8BIT) where they are not valid in it, so the String opens the same file.
fn path(ruby: &Ruby, rb_self: &DbObject) -> Option<RString> {
    let raw = rb_self.h.db.path()?.as_os_str().as_bytes();
    let s = ruby.enc_str_new(raw, ruby.filesystem_encoding());
    if s.enc_coderange_scan() == Coderange::Broken {
        return Some(bin(ruby, raw));
    }
    Some(s)
}

/// `db._gvl`: the mode's index (`lib/senju.rb` maps it back to a Symbol).
fn gvl_index(rb_self: &DbObject) -> u8 {
    rb_self.h.policy.mode() as u8
}

/// `Senju.__gvl_counts`: the calling Ractor's counts of batch calls holding the GVL, in
/// released regions and taking the GVL back (all 0 with no call in flight), for the tests.
fn gvl_counts() -> Vec<i64> {
    gvl::counts().to_vec()
}

/// Defines `Senju::DB` and its native methods (and, through `cursor`, `Senju::DB::Cursor`).
pub(crate) fn define(ruby: &Ruby, senju: RModule) -> Result<(), Error> {
    senju.define_singleton_method("__gvl_counts", function!(gvl_counts, 0))?;
    let class: RClass = senju.define_class("DB", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_singleton_method("_open", function!(open, 11))?;
    class.define_method("[]", method!(get, 1))?;
    class.define_method("[]=", method!(set, 2))?;
    class.define_method("delete", method!(delete, 1))?;
    class.define_method("key?", method!(contains, 1))?;
    class.define_method("size", method!(size, 0))?;
    class.define_method("get_many", method!(get_many, 1))?;
    class.define_method("set_many", method!(set_many, 1))?;
    class.define_method("compare_and_set", method!(compare_and_set, 3))?;
    class.define_method("append", method!(append, 2))?;
    class.define_method("_sync", method!(sync, 1))?;
    class.define_method("rebuild", method!(rebuild, 0))?;
    class.define_method("clear", method!(clear, 0))?;
    class.define_method("stats", method!(stats, 0))?;
    class.define_method("keys", method!(keys, 0))?;
    class.define_method("close", method!(close, 0))?;
    class.define_method("closed?", method!(is_closed, 0))?;
    class.define_method("path", method!(path, 0))?;
    class.define_method("_gvl", method!(gvl_index, 0))?;
    crate::cursor::define(ruby, class)
}
