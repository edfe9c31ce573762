//! The native half of the `senju` gem: `Senju::DB`, a Hash-like handle on a senju database
//! that releases Ruby's GVL around store work (per its `gvl:` mode).
//!
//! Ruby loads this as `senju/senju.so` from `lib/senju.rb`, which defines the exception
//! classes first and the Ruby-level conveniences (`DB.open` with keywords and a block,
//! `each`/`Enumerable`, `fetch`, ...) after. How the GVL is handled is in `gvl.rs`; the
//! methods are in `db.rs`.
//!
//! Invariants:
//! - no Ruby object is touched while the GVL is released; inputs are copied before, results
//!   built after (the one call back into Ruby during a released call, `recovery_progress`,
//!   takes the GVL first: `recovery.rs`);
//! - Ruby never longjmps across Rust frames: interrupts are handled under `rb_protect` and
//!   panics are caught on the released side;
//! - every method is Ractor-safe (`rb_ext_ractor_safe(true)`), a frozen `DB` is shareable,
//!   and no state is tied to the OS thread between calls (Ruby 3.3's M:N threads).

mod cursor;
mod db;
mod error;
mod gvl;
mod packed;
mod recovery;

/// The entry point Ruby calls when it loads the library.
#[allow(unreachable_pub)] // `#[magnus::init]` exports `Init_senju` as `pub extern "C"`.
mod entry {
    use magnus::{Error, Ruby};

    /// `Init_senju`: called by `require "senju/senju"`.
    #[magnus::init(name = "senju")]
    fn init(ruby: &Ruby) -> Result<(), Error> {
        // SAFETY: called during the extension's `Init_` function, as Ruby requires; it only
        // marks the methods defined after it as safe to call from non-main Ractors, which
        // they are (they share nothing but the `Arc`ed, thread-safe handle).
        unsafe { rb_sys::rb_ext_ractor_safe(true) };
        super::gvl::init();
        let senju = ruby.define_module("Senju")?;
        super::db::define(ruby, senju)?;
        // Every lazily found class is found now, not on first use. magnus's `Lazy` runs its
        // lookup inside a `OnceLock` while holding the GVL, and the lookup calls Ruby
        // (`Object.const_get`), which may switch threads. A second thread reaching the same
        // `Lazy` then waits on the `OnceLock` with the GVL held, and the first never gets
        // the GVL back to finish: two threads making their first cursors at once hung
        // `test_threads.rb` this way. Here, while `require` runs, there is no first use to
        // race with.
        super::error::force_classes(ruby);
        <super::db::DbObject as magnus::TypedData>::class(ruby);
        <super::cursor::CursorObject as magnus::TypedData>::class(ruby);
        Ok(())
    }
}
