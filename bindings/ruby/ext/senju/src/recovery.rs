//! `DB.open(recovery_progress:)`: a Ruby callable called while the engine recovers a file,
//! from inside the open.
//!
//! An open given a callable runs with the GVL held (`db::open`), so the engine calls it on
//! the Ruby thread that opens and no Ruby code ever runs from inside a released region. Taking
//! the GVL back there for the call (`rb_thread_call_with_gvl`) is unsound: on its way back
//! into the region Ruby handles pending interrupts, and one that raises (a signal's trap,
//! `Thread#raise`) or kills would longjmp over the engine's frames mid-recovery, leaking the
//! store with its file and lock. Held, the call is made under `rb_protect` (magnus
//! `funcall`): the first exception or jump out of it (`throw`, `Thread#kill`) is kept, no
//! further call is made, the open runs to its end, and `db::open` closes the recovered
//! database before it raises the exception or resumes the jump. The cost: other Ruby threads
//! wait while a file is recovered with a callable (without one, the open is released).

use std::cell::RefCell;

use magnus::prelude::*;
use magnus::{Error, Ruby, Value};

/// The callable and the first error out of it. Lives on `db::open`'s frame for the whole
/// open: on the machine stack, which the GC scans, so the callable and a kept exception stay
/// alive.
pub(crate) struct Progress {
    callable: Value,
    /// The first exception raised by, or jump out of, the callable; once set, no more calls.
    first: RefCell<Option<Error>>,
}

impl Progress {
    pub(crate) fn new(callable: Value) -> Progress {
        Progress { callable, first: RefCell::new(None) }
    }

    /// The first exception or jump out of the callable, if there was one.
    pub(crate) fn into_first(self) -> Option<Error> {
        self.first.into_inner()
    }
}

/// A [`Progress`] as the engine's callback (which must be `Send + Sync + 'static`) carries it.
#[derive(Clone, Copy)]
pub(crate) struct Callback(*const Progress);

// SAFETY: the engine calls the callback only from inside the open, on the thread that opens
// (recovery replays there), and that open runs with the GVL held (see the module doc); the
// `Progress` outlives the open (see `db::open`). No other thread ever dereferences it.
unsafe impl Send for Callback {}
// SAFETY: as for `Send`.
unsafe impl Sync for Callback {}

impl Callback {
    pub(crate) fn new(progress: &Progress) -> Callback {
        Callback(progress)
    }

    /// Calls the callable with `(done, total)` unless an earlier call raised or jumped; the
    /// first exception or jump is kept for [`Progress::into_first`].
    pub(crate) fn call(&self, done: u64, total: u64) {
        // Only a thread that holds the GVL gets a handle: anything else is a bug here.
        if Ruby::get().is_err() {
            return;
        }
        // SAFETY: the `Progress` is alive for the whole open, and used only on this thread
        // (see the `Send` impl).
        let p = unsafe { &*self.0 };
        if p.first.borrow().is_some() {
            return;
        }
        // `funcall` runs the call under `rb_protect`: nothing longjmps over this frame.
        if let Err(e) = p.callable.funcall::<_, _, Value>("call", (done, total)) {
            *p.first.borrow_mut() = Some(e);
        }
    }
}
