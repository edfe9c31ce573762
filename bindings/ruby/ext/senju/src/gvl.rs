//! Running store work with or without Ruby's GVL, per the handle's `gvl:` mode.
//!
//! Work is a *step* function over an owned state, called until it reports [`Step::Done`].
//! Single operations are one step; batches and scans do one chunk (at most [`CHUNK`] items,
//! and for copies of values at most [`CHUNK_BYTES`] plus one item) per step. The weight
//! that decides whether `:auto` releases is asked for again before each held step and each
//! released region ([`run_weighed`]), for work whose size shows only as it runs. Released, the steps run inside one `rb_nogvl` call that checks a cancel flag
//! between steps; the unblocking function (UBF) sets that flag when Ruby wants the thread
//! back (`Thread#kill`, `Thread#raise`, a signal), so such a call stops within one chunk.
//! Held, the steps run on the Ruby thread and pending interrupts are checked between steps.
//!
//! Rules kept here (see `shared/notes/gil-gvl-bindings.md`):
//! - nothing inside a step touches a Ruby object: inputs are copied into the state before,
//!   results are built from it after;
//! - `rb_nogvl` runs with `RB_NOGVL_INTR_FAIL`, so Ruby never longjmps out of the blocking
//!   region across Rust frames; interrupts are handled afterwards by
//!   `rb_thread_check_ints` under `rb_protect` (magnus `thread_check_ints`), which returns an
//!   `Err` instead of jumping;
//! - a panic inside a step is caught on the far side and turned into an exception;
//! - nothing is tied to the OS thread across calls (Ruby 3.3's M:N threads may move a Ruby
//!   thread between calls); the convoy detector is per handle.

use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use magnus::{Error, Ruby};

use crate::error::{internal_error, storage_error};

/// Items per step of a batch or scan: the most work between two interrupt checks.
pub(crate) const CHUNK: usize = 1000;

/// Bytes of values (and keys) one step of a scan or `get_many` copies at most (plus one
/// item): a chunk of values of up to 1 GiB each must not be copied at once.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// The longest a released region runs before it takes the GVL back to check interrupts
/// (it ends at the first chunk boundary after this). The UBF stops a region sooner when
/// Ruby calls it, but Ruby 3.1 does not call it for a signal to the main thread while other
/// threads exist; the trap flag the signal handler sets is seen here instead, so Ctrl-C
/// takes at most this long (plus one chunk) in that case.
const REGION: Duration = Duration::from_millis(10);

/// The `gvl:` option of `Senju::DB.open`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Release the GVL around every store call.
    Release = 0,
    /// Never release it (long calls still check interrupts between chunks).
    Hold = 1,
    /// Hold it for short calls, release it for long ones unless that convoys (see [`Policy`]).
    Auto = 2,
}

impl Mode {
    /// The mode numbered as `lib/senju.rb` numbers it.
    pub(crate) fn from_index(i: u8) -> Option<Mode> {
        [Mode::Release, Mode::Hold, Mode::Auto].get(usize::from(i)).copied()
    }
}

/// How long a call is expected to take, for [`Mode::Auto`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weight {
    /// One in-memory operation on small data (well under a microsecond to a few): held.
    Short,
    /// CPU work of many items: released, unless releasing was seen to convoy behind
    /// interpreter threads recently.
    Batch,
    /// One large value (a few microseconds of copying): as `Batch`, and only while fewer
    /// threads than CPUs are inside such calls (see [`Place`]).
    Large,
    /// Work that may wait on the disk (open, close, sync, rebuild): always released.
    Io,
}

/// What a step reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The work is finished.
    Done,
    /// Call the step again.
    More,
}

/// A released call that had to wait at least this long for the GVL afterwards...
///
/// Behind a CPU-bound Ruby thread the wait is about a whole timeslice (100 ms): that thread
/// takes the GVL as the call releases it and keeps it until the timer makes it yield. Behind
/// another store thread the wait is short, unless the kernel preempts that thread while it
/// holds the GVL (a few ms on a busy core). At 5 ms such preemptions were taken for convoys,
/// and two threads running batches held the GVL for whole windows: `:auto` made 6.8-8.0M
/// batch ops/s at 2 threads where `:release` made 10.2-11.0M; at 20 ms, 9.0-12.5M (lab 0004).
/// Ruby 3.4 lets `RUBY_THREAD_TIMESLICE` (ms) shorten the timeslice; then half of it is used
/// if that is less (see [`convoy_min_wait`]).
const CONVOY_MIN_WAIT: Duration = Duration::from_millis(20);
/// ...and this many times longer than its own work convoyed behind interpreter code.
const CONVOY_RATIO: u32 = 4;
/// After the first convoy, `Batch` calls are held for this long; each further convoy seen on
/// the probe that ends a window doubles it, up to `CONVOY_MAX_SHIFT` doublings (64 s). A
/// probe costs one timeslice (100 ms) while the convoy lasts, so this bounds the loss to
/// 5% in the first window and less after; a false alarm (a long GC while released) costs
/// parallelism for one window, never correctness.
const CONVOY_FIRST_WINDOW: Duration = Duration::from_secs(2);
const CONVOY_MAX_SHIFT: u32 = 5;

/// [`CONVOY_MIN_WAIT`], or half the timeslice that `RUBY_THREAD_TIMESLICE` sets if that is
/// shorter (at least 1 ms), read once.
fn convoy_min_wait() -> Duration {
    static WAIT: OnceLock<Duration> = OnceLock::new();
    *WAIT.get_or_init(|| {
        let slice = std::env::var("RUBY_THREAD_TIMESLICE").ok().and_then(|v| v.trim().parse().ok());
        min_wait_for(slice)
    })
}

/// The convoy threshold for a timeslice of `slice_ms` milliseconds (`None`: Ruby's 100 ms).
fn min_wait_for(slice_ms: Option<u64>) -> Duration {
    match slice_ms {
        Some(ms) if ms > 0 => {
            (Duration::from_millis(ms) / 2).clamp(Duration::from_millis(1), CONVOY_MIN_WAIT)
        }
        _ => CONVOY_MIN_WAIT,
    }
}

/// The CPUs this process may run on (1 if unknown), read once.
fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Monotonic nanoseconds since the first call (a process-wide origin, not thread-local).
fn now_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A handle's GVL mode plus, for [`Mode::Auto`], its convoy detector.
///
/// Releasing the GVL costs about 0.1 µs while every thread is in the store, but a whole
/// timeslice (100 ms in Ruby) when another thread runs Ruby code: it takes the GVL and keeps
/// it until the timer forces a switch. `Auto` releases for `Batch` calls and measures how long
/// each waited to get the GVL back; a wait of `CONVOY_MIN_WAIT` and `CONVOY_RATIO` times the
/// call's own work means interpreter threads are busy, so `Batch` calls are held (interrupts
/// checked between chunks, as in `:hold`) for a window that doubles while convoys persist
/// and resets after a release that did not convoy.
#[derive(Debug)]
pub(crate) struct Policy {
    mode: Mode,
    /// Steps that asked for more (chunks of batches and scans run), for `stats[:chunks]`:
    /// tests count them to bound how far a call runs after an interrupt. Single operations
    /// never touch it, so it adds no shared write to the hot path.
    chunks: AtomicU64,
    /// Short writes under `Auto` that found their key's shard held by another thread and
    /// waited for it as `Batch` work (released unless convoying), for `stats[:busy_waits]`.
    busy_waits: AtomicU64,
    /// Regions run with the GVL released under `Auto`, for `stats[:auto_releases]`: tests
    /// count them to check what is weighed heavy enough to release. Short calls, which
    /// `Auto` holds, never touch it.
    auto_releases: AtomicU64,
    /// Released regions of this handle that ended waiting awake for another thread's batch
    /// call to release the GVL, and saw it do so (see [`wait_awake`]), for
    /// `stats[:awake_waits]`.
    awake_waits: AtomicU64,
    /// `now_ns()` until which `Batch` calls are held (0: release).
    hold_until: AtomicU64,
    /// Convoys seen back to back (the window's doubling count).
    strikes: AtomicU32,
}

impl Policy {
    pub(crate) fn new(mode: Mode) -> Policy {
        Policy {
            mode,
            chunks: AtomicU64::new(0),
            busy_waits: AtomicU64::new(0),
            auto_releases: AtomicU64::new(0),
            awake_waits: AtomicU64::new(0),
            hold_until: AtomicU64::new(0),
            strikes: AtomicU32::new(0),
        }
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Chunks of batch and scan work run so far.
    pub(crate) fn chunks(&self) -> u64 {
        self.chunks.load(Ordering::Relaxed)
    }

    /// Short writes that waited for a busy shard (see `busy_waits`).
    pub(crate) fn busy_waits(&self) -> u64 {
        self.busy_waits.load(Ordering::Relaxed)
    }

    /// Regions released under `Auto` so far (see `auto_releases`).
    pub(crate) fn auto_releases(&self) -> u64 {
        self.auto_releases.load(Ordering::Relaxed)
    }

    /// Released regions that ended waiting awake for the GVL (see `awake_waits`).
    pub(crate) fn awake_waits(&self) -> u64 {
        self.awake_waits.load(Ordering::Relaxed)
    }

    /// Whether calls are weighed at all: only `Auto` releases by weight, so only there is it
    /// worth measuring what a call will move (an extra lookup, say) to choose its weight.
    pub(crate) fn weighs(&self) -> bool {
        self.mode == Mode::Auto
    }

    /// Whether a short write should try its shard without waiting first: under `Auto`,
    /// whose short calls keep the GVL, a wait for a shard another thread holds (for
    /// milliseconds while its index grows or a rebuild copies it) is done released
    /// instead, as a batch is.
    pub(crate) fn tries_short_writes(&self) -> bool {
        self.mode == Mode::Auto
    }

    /// Records one short write that found its shard busy.
    pub(crate) fn count_busy_wait(&self) {
        self.busy_waits.fetch_add(1, Ordering::Relaxed);
    }

    fn count_chunk(&self) {
        self.chunks.fetch_add(1, Ordering::Relaxed);
    }

    fn count_release(&self) {
        if self.mode == Mode::Auto {
            self.auto_releases.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a call of this weight runs with the GVL released.
    #[inline]
    pub(crate) fn releases(&self, weight: Weight) -> bool {
        match (self.mode, weight) {
            (Mode::Release, _) => true,
            (Mode::Hold, _) => false,
            (Mode::Auto, Weight::Short) => false,
            (Mode::Auto, Weight::Io) => true,
            (Mode::Auto, Weight::Batch | Weight::Large) => {
                // Relaxed: a heuristic; a stale value only delays the switch by one call.
                let until = self.hold_until.load(Ordering::Relaxed);
                until == 0 || now_ns() >= until
            }
        }
    }

    /// Feeds the detector with one released call: `work` spent in the store, `total` from
    /// releasing to holding the GVL again.
    fn record(&self, work: Duration, total: Duration) {
        if self.mode != Mode::Auto {
            return;
        }
        let wait = total.saturating_sub(work);
        if wait >= convoy_min_wait() && wait >= work * CONVOY_RATIO {
            let strikes = self.strikes.fetch_add(1, Ordering::Relaxed).min(CONVOY_MAX_SHIFT);
            let window = CONVOY_FIRST_WINDOW * (1 << strikes);
            let until = now_ns().saturating_add(u64::try_from(window.as_nanos()).unwrap_or(0));
            self.hold_until.store(until, Ordering::Relaxed);
        } else if self.strikes.load(Ordering::Relaxed) != 0 {
            self.strikes.store(0, Ordering::Relaxed);
            self.hold_until.store(0, Ordering::Relaxed);
        }
    }
}

/// Threads of this process inside a released `Large` call under `:auto`.
static RELEASED: AtomicUsize = AtomicUsize::new(0);

/// A place among the released `Large` calls under `:auto`: at most as many as the CPUs.
/// Beyond that a released call adds no parallelism, only a GVL hand-off to pay (a futex
/// wake, a sleep and two context switches: about as long as the copy of a 64 KiB value), so
/// it holds the GVL instead. Lab 0004, 64 KiB values rewritten (set, then get) by 8 threads
/// on 2 CPUs: `:auto` made 0.81x and 0.85x of `:hold` releasing every call, 0.99x and 1.04x
/// with this limit (where `:release` made 0.83x); a limit of one fewer than the CPUs held 2
/// threads to 0.96x of 1 thread. Batches are not limited: their regions last 100 µs and
/// more, and the hand-off is a small part of them.
struct Place {
    counted: bool,
}

impl Place {
    fn take(mode: Mode, weight: Weight) -> Option<Place> {
        if mode != Mode::Auto || weight != Weight::Large {
            return Some(Place { counted: false });
        }
        let limit = cpus();
        // Relaxed: a count, guarding no data.
        if RELEASED.fetch_add(1, Ordering::Relaxed) >= limit {
            RELEASED.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Place { counted: true })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.counted {
            RELEASED.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What [`wait_awake`] reads: counts of one Ractor's threads (each Ractor has a GVL of its
/// own), kept in Ractor-local storage and changed only by batch calls (`get_many`,
/// `set_many`, `keys`, a cursor's chunk) and their released regions. Relaxed throughout,
/// except where noted: a heuristic guarding no data, where a stale value costs one sleep in
/// Ruby's queue or one wait of [`AWAKE_WAIT`], never correctness.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Counts {
    /// Batch calls holding the GVL: from the call's start (copying its inputs) to its end
    /// (building its results), except while it runs a released region.
    holding: AtomicIsize,
    /// Batch calls inside a released region: running it, waiting awake at its end, or
    /// taking the GVL back.
    away: AtomicUsize,
    /// Batch calls whose released region is over and that are taking the GVL back (counted
    /// in `away` too): about to hold it, or asleep in Ruby's queue for it.
    taking: AtomicUsize,
    /// Released regions of batch calls started so far.
    releases: AtomicUsize,
}

impl Counts {
    /// Whether a batch call holds the GVL or is taking it. `taking` is read first, with
    /// Acquire, pairing with the Release that drops it after `holding` was raised: a call
    /// that moves from one to the other is seen in at least one of them.
    fn busy(&self) -> bool {
        let taking = self.taking.load(Ordering::Acquire).min(isize::MAX as usize) as isize;
        self.holding.load(Ordering::Relaxed).saturating_add(taking) > 0
    }
}

/// The Ractor-local storage key of [`Counts`], made by [`init`].
static COUNTS_KEY: OnceLock<usize> = OnceLock::new();

/// Makes the Ractor-local storage key of [`Counts`]. Called once, while the extension is
/// loaded (in the main Ractor, with the GVL held).
pub(crate) fn init() {
    unsafe extern "C" fn free_counts(p: *mut c_void) {
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `counts_here`, and Ruby frees a
            // Ractor's storage once, when no thread of that Ractor runs any more.
            drop(unsafe { Box::from_raw(p.cast::<Counts>()) });
        }
    }
    static TYPE: rb_sys::rb_ractor_local_storage_type =
        rb_sys::rb_ractor_local_storage_type { mark: None, free: Some(free_counts) };
    COUNTS_KEY.get_or_init(|| {
        // SAFETY: called with the GVL held, during `Init_senju`; `TYPE` is static.
        unsafe { rb_sys::rb_ractor_local_storage_ptr_newkey(&raw const TYPE) as usize }
    });
}

/// This Ractor's [`Counts`], made on first use. The GVL must be held.
fn counts_here() -> Option<&'static Counts> {
    let key = *COUNTS_KEY.get()? as rb_sys::rb_ractor_local_key_t;
    // SAFETY: the GVL is held (callers' rule) and `key` was issued by `init`.
    let mut p = unsafe { rb_sys::rb_ractor_local_storage_ptr(key) }.cast::<Counts>();
    if p.is_null() {
        p = Box::into_raw(Box::<Counts>::default());
        // SAFETY: as above; the storage owns `p` from now on (freed by `free_counts`).
        unsafe { rb_sys::rb_ractor_local_storage_ptr_set(key, p.cast::<c_void>()) };
    }
    // SAFETY: the storage keeps it until the Ractor is gone, after its threads' calls.
    Some(unsafe { &*p })
}

/// The counts of the calling Ractor as `[holding, away, taking]`: all 0 with no batch call
/// in flight. `Senju.__gvl_counts` returns them for the tests (a count left behind would
/// make every later released region of a batch wait its whole [`AWAKE_WAIT`]).
pub(crate) fn counts() -> [i64; 3] {
    let Some(c) = counts_here() else { return [0; 3] };
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    [
        c.holding.load(Ordering::Relaxed) as i64,
        as_i64(c.away.load(Ordering::Relaxed)),
        as_i64(c.taking.load(Ordering::Relaxed)),
    ]
}

thread_local! {
    /// The [`Counts`] of the batch call running on this thread (null outside one). Set and
    /// cleared within one call, which stays on its OS thread, so nothing is tied to the OS
    /// thread across calls (Ruby 3.3's M:N threads).
    static CURRENT: Cell<*const Counts> = const { Cell::new(std::ptr::null()) };
}

/// The longest a released region waits awake at its end for a batch call that holds the
/// GVL to release it (see [`wait_awake`]): a 1000-key `get_many` holds it for about 100 µs
/// to build its results.
const AWAKE_WAIT: Duration = Duration::from_micros(300);

/// A batch call (`get_many`, `set_many`, `keys`, a cursor's chunk): while it lives, its
/// thread counts in its Ractor's [`Counts`] as holding the GVL, except while it runs a
/// released region, and its regions wait awake for other batch calls ([`wait_awake`]).
pub(crate) struct BatchCall {
    counts: Option<&'static Counts>,
    outer: *const Counts,
}

impl BatchCall {
    /// Enters a batch call. The GVL must be held.
    pub(crate) fn enter() -> BatchCall {
        let counts = counts_here();
        if let Some(c) = counts {
            c.holding.fetch_add(1, Ordering::Relaxed);
        }
        let outer = CURRENT.replace(counts.map_or(std::ptr::null(), std::ptr::from_ref));
        BatchCall { counts, outer }
    }
}

impl Drop for BatchCall {
    fn drop(&mut self) {
        if let Some(c) = self.counts {
            c.holding.fetch_sub(1, Ordering::Relaxed);
        }
        CURRENT.set(self.outer);
    }
}

/// At the end of a batch call's released region, while a batch call of another thread of
/// this Ractor holds the GVL (or is taking it) and fewer batch regions than CPUs run: waits
/// awake, for at most [`AWAKE_WAIT`], until that call releases the GVL, instead of asking
/// Ruby for it now.
///
/// Ruby's GVL waiter sleeps in the kernel, and the holder's release wakes it. On a VM whose
/// idle CPUs halt at once (the project's guests: `haltpoll.guest_halt_poll_ns=0`) a
/// condition variable's round trip between two threads takes 113-126 µs, 8 µs with the
/// guest polling 200 µs before it halts (lab 0025), so each such hand-off left the GVL's
/// next holder asleep for about half a `get_many`'s held part. Waiting awake, this thread
/// sees the other call release and takes the free GVL without a sleep. The wait spends a
/// CPU only while one is left over: with as many regions running as CPUs, they have work.
///
/// Returns whether it waited and saw the hand-off.
fn wait_awake(c: &Counts) -> bool {
    let cpus = cpus();
    if !c.busy() {
        return false;
    }
    // Acquire, pairing with the Release of a region's start: seeing the release, this
    // thread sees that call's drop of `holding` too.
    let released = c.releases.load(Ordering::Acquire);
    let started = Instant::now();
    loop {
        // The holder released (its call may have returned to Ruby code first: then the GVL
        // is still held, and the wait goes on until a region starts).
        if c.releases.load(Ordering::Acquire) != released && !c.busy() {
            return true;
        }
        // Threads running regions or waiting awake, this one included.
        let running =
            c.away.load(Ordering::Relaxed).saturating_sub(c.taking.load(Ordering::Relaxed));
        if running >= cpus || started.elapsed() >= AWAKE_WAIT {
            return false;
        }
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

/// The [`Counts`] of the batch call on this thread, if it is in one.
fn batch_counts() -> Option<&'static Counts> {
    let p = CURRENT.get();
    // SAFETY: a non-null `CURRENT` was set by a live `BatchCall` of this thread from a
    // reference to Ractor-local storage that outlives the call.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Runs `step` on `state` until it reports [`Step::Done`] or fails, releasing the GVL or not
/// as `policy` says for `weight`. Pending interrupts are handled between steps (held) or
/// after each released region of at most [`REGION`] (plus one step); an interrupt that
/// raises wins over the result.
pub(crate) fn run<S, F>(
    ruby: &Ruby,
    policy: &Policy,
    weight: Weight,
    state: &mut S,
    step: F,
) -> Result<(), Error>
where
    S: Send,
    F: FnMut(&mut S) -> senju::Result<Step> + Send,
{
    run_weighed(ruby, policy, |_| weight, state, step)
}

/// [`run`] for work whose weight shows only as it goes (the bytes of the values a batch
/// finds): `weigh` is asked again before each held step and each released region.
pub(crate) fn run_weighed<S, W, F>(
    ruby: &Ruby,
    policy: &Policy,
    weigh: W,
    state: &mut S,
    mut step: F,
) -> Result<(), Error>
where
    S: Send,
    W: Fn(&S) -> Weight,
    F: FnMut(&mut S) -> senju::Result<Step> + Send,
{
    run_cancellable(ruby, policy, weigh, state, |s, _| step(s))
}

/// [`run_weighed`] for one long step that can stop early (a rebuild): `step` also gets the
/// flag that Ruby's unblocking function sets (`Thread#kill`, `Thread#raise`, a signal) and
/// returns [`Step::More`] if it stopped for it; the interrupt is then handled, and if it
/// does not raise, the step runs again.
pub(crate) fn run_cancellable<S, W, F>(
    ruby: &Ruby,
    policy: &Policy,
    weigh: W,
    state: &mut S,
    mut step: F,
) -> Result<(), Error>
where
    S: Send,
    W: Fn(&S) -> Weight,
    F: FnMut(&mut S, &AtomicBool) -> senju::Result<Step> + Send,
{
    let cancel = AtomicBool::new(false);
    loop {
        // Decided per region: a convoy seen by the previous region holds the rest.
        let weight = weigh(state);
        let mut place =
            if policy.releases(weight) { Place::take(policy.mode, weight) } else { None };
        if place.is_none() {
            match step(state, &cancel).map_err(|e| storage_error(ruby, e))? {
                Step::Done => return Ok(()),
                Step::More => {
                    policy.count_chunk();
                    ruby.thread_check_ints()?;
                    continue;
                }
            }
        }
        policy.count_release();
        let started = Instant::now();
        // A batch call's region is counted for `wait_awake`. Release: a thread that sees
        // the new `releases` sees `holding` dropped too.
        let counts = batch_counts();
        if let Some(c) = counts {
            c.holding.fetch_sub(1, Ordering::Relaxed);
            c.away.fetch_add(1, Ordering::Relaxed);
            c.releases.fetch_add(1, Ordering::Release);
        }
        let ran = without_gvl(&cancel, || {
            let result = loop {
                match step(state, &cancel) {
                    Ok(Step::More) => {
                        policy.count_chunk();
                        // Relaxed: the flag carries no data; the UBF only asks us to stop.
                        if cancel.load(Ordering::Relaxed) || started.elapsed() >= REGION {
                            break Ok(Step::More);
                        }
                    }
                    other => break other,
                }
            };
            // The work is done: the place among large calls is free for another.
            drop(place.take());
            let work = started.elapsed();
            if let Some(c) = counts {
                if wait_awake(c) {
                    policy.awake_waits.fetch_add(1, Ordering::Relaxed);
                }
                c.taking.fetch_add(1, Ordering::Relaxed);
            }
            (result, work)
        });
        if let Some(c) = counts {
            // The GVL is held again. Release: `holding` is raised before `taking` drops,
            // so `busy` never misses this call in between.
            c.holding.fetch_add(1, Ordering::Relaxed);
            if ran.is_some() {
                c.taking.fetch_sub(1, Ordering::Release);
            }
            c.away.fetch_sub(1, Ordering::Relaxed);
        }
        let outcome = match ran {
            // Ruby did not run the function: an interrupt was pending before release.
            None => None,
            Some(Ok((result, work))) => {
                policy.record(work, started.elapsed());
                Some(result)
            }
            Some(Err(panic)) => return Err(internal_error(ruby, &panic_message(&panic))),
        };
        // Interrupts first: `Thread#kill`, `Thread#raise` and signals take effect here.
        ruby.thread_check_ints()?;
        match outcome {
            None | Some(Ok(Step::More)) => cancel.store(false, Ordering::Relaxed),
            Some(Ok(Step::Done)) => return Ok(()),
            Some(Err(e)) => return Err(storage_error(ruby, e)),
        }
    }
}

/// Runs `f` with the GVL released, on this thread, with a UBF that sets `cancel`. Returns
/// `None` if Ruby did not run `f` because an interrupt was already pending (handle it with
/// `thread_check_ints` and call again), else `f`'s result or its panic.
fn without_gvl<F, R>(cancel: &AtomicBool, f: F) -> Option<std::thread::Result<R>>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    struct Slot<F, R> {
        f: Option<F>,
        out: Option<std::thread::Result<R>>,
    }

    unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(p: *mut c_void) -> *mut c_void {
        // SAFETY: `p` is the `Slot` below, alive and not otherwise used until
        // `rb_nogvl` returns; Ruby calls this at most once.
        let slot = unsafe { &mut *p.cast::<Slot<F, R>>() };
        if let Some(f) = slot.f.take() {
            // A panic must not unwind through Ruby's C frames: catch it, rethrow it as an
            // exception once the GVL is held again.
            slot.out = Some(catch_unwind(AssertUnwindSafe(f)));
        }
        null_mut()
    }

    unsafe extern "C" fn ubf(p: *mut c_void) {
        // SAFETY: `p` is the `cancel` flag, which outlives the `rb_nogvl` call during which
        // Ruby may call this (from another thread or a signal handler: one atomic store is
        // async-signal-safe).
        let cancel = unsafe { &*p.cast::<AtomicBool>() };
        cancel.store(true, Ordering::Relaxed);
    }

    let mut slot = Slot::<F, R> { f: Some(f), out: None };
    // SAFETY: `trampoline::<F, R>` matches the slot's type; the slot and `cancel` live on this
    // frame until `rb_nogvl` returns. The function touches no Ruby object (the closure's
    // `Send` bound and the callers' copying rule). `RB_NOGVL_INTR_FAIL`: Ruby returns instead
    // of handling interrupts (no longjmp across our frames); `RB_NOGVL_UBF_ASYNC_SAFE`: the
    // UBF is a single atomic store, so Ruby may call it from a signal handler and need not
    // start a helper thread for it.
    unsafe {
        rb_sys::rb_nogvl(
            Some(trampoline::<F, R>),
            (&raw mut slot).cast::<c_void>(),
            Some(ubf),
            std::ptr::from_ref(cancel).cast_mut().cast::<c_void>(),
            (rb_sys::RB_NOGVL_INTR_FAIL | rb_sys::RB_NOGVL_UBF_ASYNC_SAFE) as i32,
        );
    }
    slot.out
}

/// The message of a caught panic.
fn panic_message(panic: &Box<dyn Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}
