//! `DB.open(recovery_progress:)`: a Ruby callable called while the engine recovers a file,
//! from inside the open, which may run with the GVL released.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;

use magnus::prelude::*;
use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{Error, Exception, RArray, Ruby, Value};

/// The callable and the array its first exception goes into, as raw `VALUE`s, so that the
/// engine's callback (which must be `Send + Sync`) can carry them.
#[derive(Clone, Copy)]
pub(crate) struct Callback {
    callable: rb_sys::VALUE,
    raised: rb_sys::VALUE,
}

// SAFETY: the values are touched only with the GVL held (`call` takes it when the open runs
// without it), and both stay alive for the whole open (see `db::open`), the only time the
// engine calls back.
unsafe impl Send for Callback {}
// SAFETY: as for `Send`.
unsafe impl Sync for Callback {}

impl Callback {
    pub(crate) fn new(callable: Value, raised: RArray) -> Callback {
        Callback { callable: callable.as_raw(), raised: raised.as_raw() }
    }

    /// Calls the callable with `(done, total)` unless an earlier call raised; an exception is
    /// kept for `first_exception`. `released`: whether this thread runs without the GVL
    /// (then it is taken for the call).
    pub(crate) fn call(&self, done: u64, total: u64, released: bool) {
        if !released {
            self.call_with_gvl(done, total);
            return;
        }
        struct Args(Callback, u64, u64);
        unsafe extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
            // SAFETY: `p` is the `Args` below, alive until `rb_thread_call_with_gvl` returns.
            let a = unsafe { &*p.cast::<Args>() };
            // A panic must not unwind through Ruby's C frames; the call raises none itself.
            let _ = catch_unwind(AssertUnwindSafe(|| a.0.call_with_gvl(a.1, a.2)));
            null_mut()
        }
        let mut args = Args(*self, done, total);
        // SAFETY: this thread released the GVL in `rb_nogvl` (`gvl::run`), as
        // `rb_thread_call_with_gvl` requires; `args` outlives the call.
        unsafe {
            rb_sys::rb_thread_call_with_gvl(Some(trampoline), (&raw mut args).cast());
        }
    }

    /// [`call`](Self::call)'s work, with the GVL held.
    fn call_with_gvl(&self, done: u64, total: u64) {
        // Only a thread that holds the GVL gets a handle: anything else is a bug here.
        if Ruby::get().is_err() {
            return;
        }
        // SAFETY: both values are alive for the whole open (see the type's comment).
        let callable = unsafe { Value::from_raw(self.callable) };
        // SAFETY: as above.
        let Some(raised) = RArray::from_value(unsafe { Value::from_raw(self.raised) }) else {
            return;
        };
        if !raised.is_empty() {
            return;
        }
        if let Err(e) = callable.funcall::<_, _, Value>("call", (done, total))
            && let Some(exc) = e.value()
        {
            let _ = raised.push(exc);
        }
    }
}

/// The exception the callback raised first, if it did.
pub(crate) fn first_exception(raised: RArray) -> Option<Error> {
    let v: Value = raised.entry(0).ok()?;
    Exception::from_value(v).map(Error::from)
}
