//! Helpers shared by the real-thread lock tests.

use senju_sync::{Adaptive, Relax};

/// The default waiting without the barging phase: a thread registers at its first miss, so
/// every trial of a hand-off test exercises the bound (with [`Adaptive`] the waiter often
/// gets the lock while barging and never registers).
#[derive(Default)]
pub(crate) struct NoBarge(Adaptive);

impl Relax for NoBarge {
    fn relax(&mut self) -> bool {
        self.0.relax()
    }

    fn barge(&mut self) -> bool {
        false
    }

    fn relax_queued(&mut self) -> bool {
        self.0.relax_queued()
    }
}
