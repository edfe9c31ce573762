//! A progress bar on standard error, drawn only when standard error is a terminal, so
//! standard output keeps exactly Tkrzw's lines and logs and pipes get no control characters.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

const WIDTH: u64 = 40;
/// The bar is redrawn when the done share moves by one step of this many.
const STEPS: u64 = 200;

/// The progress of one phase. Workers share it by reference; thread 0 reports.
pub(crate) struct Progress {
    label: &'static str,
    total: u64,
    enabled: bool,
    /// The last step drawn (so a redraw happens at most `STEPS` times).
    drawn: AtomicU64,
}

impl Progress {
    /// A bar for `total` units, silent unless standard error is a terminal.
    pub(crate) fn new(label: &'static str, total: u64) -> Progress {
        Progress {
            label,
            total: total.max(1),
            enabled: std::io::stderr().is_terminal(),
            drawn: AtomicU64::new(u64::MAX),
        }
    }

    /// Reports that `done` of the `total` units are done. Cheap when nothing changes.
    #[inline]
    pub(crate) fn tick(&self, done: u64) {
        if !self.enabled {
            return;
        }
        let step = done.min(self.total) * STEPS / self.total;
        // Relaxed: the counter only limits redraws; nothing else is published through it.
        if self.drawn.swap(step, Ordering::Relaxed) != step {
            self.draw(done.min(self.total));
        }
    }

    #[cold]
    fn draw(&self, done: u64) {
        let filled = (done * WIDTH / self.total) as usize;
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH as usize - filled));
        let pct = done * 100 / self.total;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{} [{bar}] {pct:3}% ({done}/{})", self.label, self.total);
        let _ = err.flush();
    }

    /// Clears the bar's line.
    pub(crate) fn finish(&self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:width$}\r", "", width = 70 + self.label.len());
            let _ = err.flush();
        }
    }
}

/// A `Builder::recovery_progress` callback: a "recovering" bar while an open replays a file
/// that was not closed cleanly (drawn only when standard error is a terminal, as every bar).
pub(crate) fn recovery_bar() -> impl Fn(u64, u64) + Send + Sync + 'static {
    let bar: std::sync::Mutex<Option<Progress>> = std::sync::Mutex::new(None);
    move |done, total| {
        // A new database, or one with nothing to replay: no bar.
        if total == 0 {
            return;
        }
        let mut bar = bar.lock().unwrap_or_else(|e| e.into_inner());
        let p = bar.get_or_insert_with(|| Progress::new("recovering", total));
        p.tick(done);
        if done >= total {
            p.finish();
        }
    }
}
