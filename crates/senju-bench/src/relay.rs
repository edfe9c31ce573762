//! The reader relay: who lets a waiting writer in when readers pass the read lock hand to
//! hand, so that the reader count never drops to zero on its own?
//!
//! R relay readers take numbered turns. Reader `k` enters, lets reader `k + 1` begin, and
//! keeps holding until `k + 1` is inside. A reader-preferring lock (glibc's default,
//! Tkrzw's single counter) admits every successor, so the relay never ends and a writer that
//! arrives meanwhile waits forever: founding document `000`'s starvation in its purest form.
//! A lock that holds new readers back behind a waiting writer lets the count drain: the
//! holder sees its successor stuck while the writer waits (for longer than a grace period) and
//! lets go, and the writer gets in. Then *the lock* let the writer in.
//!
//! Nothing here can hang: the run has a deadline. At the deadline the relay readers stop,
//! which frees the lock; a writer still waiting then gets in late, and *the deadline* let it
//! in. The generic benchmark traits cannot ask a lock whether a writer waits, so "the
//! successor is stuck" is inferred from time (the grace period); on a heavily loaded machine a
//! reader-preferring lock may occasionally look like it held a reader back, which shows up as
//! a low `writer_entries` rather than the full count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::peers::{BenchRwLock, RwPeer};
use crate::rounds::Padded;
use crate::work::Shared;

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayParams {
    /// Relay reader threads (2 or more).
    pub readers: usize,
    /// Write locks the writer asks for, one after another.
    pub writes: u64,
    /// The run ends at this deadline, in milliseconds, whatever happened.
    pub deadline_ms: u64,
    /// How long a holder watches its successor stuck behind a waiting writer before it lets
    /// go, in microseconds.
    pub grace_us: u64,
}

impl Default for RelayParams {
    /// 3 relay readers, 20 writes, a 500 ms deadline, 2 ms grace.
    fn default() -> Self {
        Self { readers: 3, writes: 20, deadline_ms: 500, grace_us: 2000 }
    }
}

/// Who let the writer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LetIn {
    /// The lock: it held new readers back, so the relay drained and every write got in
    /// before the deadline.
    Lock,
    /// The deadline: the writer was still waiting when the relay stopped.
    Deadline,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayRun {
    /// Write locks the writer got while the relay ran.
    pub writer_entries: u64,
    /// Write locks it asked for.
    pub writes_wanted: u64,
    /// Relay hand-offs (read locks taken by relay readers).
    pub handoffs: u64,
    /// Hand-offs in which the holder let go because its successor was held back.
    pub held_back: u64,
    /// Whether a write attempt was still waiting at the deadline.
    pub deadline_hit: bool,
    /// Time from the start until every write got in, or until the deadline, in nanoseconds.
    pub elapsed_ns: u64,
    /// Lost writes at the end: 0 for a correct lock.
    pub violations: u64,
}

impl RelayRun {
    /// Who let the writer in.
    pub fn let_in(&self) -> LetIn {
        if self.deadline_hit || self.writer_entries < self.writes_wanted {
            LetIn::Deadline
        } else {
            LetIn::Lock
        }
    }
}

/// One lock's relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayRow {
    /// The lock's name.
    pub peer: String,
    /// Whether the lock is one of senju's.
    pub senju: bool,
    /// The run.
    pub run: RelayRun,
    /// Who let the writer in.
    pub let_in: LetIn,
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayReport {
    /// What was run.
    pub params: RelayParams,
    /// One row per lock.
    pub rows: Vec<RelayRow>,
}

/// Runs the reader relay once for every peer.
pub fn reader_relay(
    params: &RelayParams,
    peers: &[RwPeer],
    progress: &mut dyn FnMut(&str),
) -> RelayReport {
    let spec = RelaySpec {
        readers: params.readers.max(2),
        writes: params.writes.max(1),
        deadline: Duration::from_millis(params.deadline_ms),
        grace: Duration::from_micros(params.grace_us),
    };
    let rows = peers
        .iter()
        .map(|peer| {
            progress(&format!("relay {}", peer.name));
            let run = (peer.relay)(&spec);
            RelayRow { peer: peer.name.to_string(), senju: peer.senju, let_in: run.let_in(), run }
        })
        .collect();
    RelayReport { params: params.clone(), rows }
}

/// One run as the worker function sees it.
#[derive(Debug, Clone)]
pub struct RelaySpec {
    /// Relay readers.
    pub readers: usize,
    /// Write locks wanted.
    pub writes: u64,
    /// When the run ends at the latest.
    pub deadline: Duration,
    /// See [`RelayParams::grace_us`].
    pub grace: Duration,
}

/// The relay's shared state; every access is SeqCst, the protocol is about the order of
/// these events across threads, not about speed.
#[derive(Default)]
struct State {
    /// The relay entry that may begin now (entries are numbered from 0).
    may_begin: AtomicU64,
    /// One more than the last entry that called `read()`.
    began: AtomicU64,
    /// One more than the last entry that got inside.
    entered: AtomicU64,
    /// The writer is inside `write()`, waiting.
    writer_waiting: AtomicBool,
    /// Set at the deadline or when every write got in.
    stop: AtomicBool,
    held_back: AtomicU64,
}

/// Runs the relay once for lock type `L`.
pub(crate) fn run_once<L: BenchRwLock<Shared>>(spec: &RelaySpec) -> RelayRun {
    let lock = Padded(L::new(Shared::default()));
    let st = State::default();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for first in 0..spec.readers as u64 {
            let (lock, st) = (&lock.0, &st);
            s.spawn(move || relay_reader(lock, st, first, spec.readers as u64, spec.grace));
        }
        let writer = {
            let (lock, st) = (&lock.0, &st);
            s.spawn(move || {
                // Let the relay get going first, so the writer really meets readers passing
                // the lock.
                while st.entered.load(Ordering::SeqCst) < 50 && !st.stop.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                let (mut entries, mut attempts) = (0u64, 0u64);
                let mut deadline_hit = false;
                while entries < spec.writes {
                    st.writer_waiting.store(true, Ordering::SeqCst);
                    attempts += 1;
                    let late = lock.write(|d| {
                        d.write(0);
                        st.stop.load(Ordering::SeqCst)
                    });
                    st.writer_waiting.store(false, Ordering::SeqCst);
                    if late {
                        deadline_hit = true;
                        break;
                    }
                    entries += 1;
                    // Let a few relay hand-offs happen before the next write.
                    let target = st.entered.load(Ordering::SeqCst) + 3;
                    while st.entered.load(Ordering::SeqCst) < target
                        && !st.stop.load(Ordering::SeqCst)
                    {
                        std::thread::yield_now();
                    }
                }
                (entries, attempts, deadline_hit, t0.elapsed())
            })
        };
        while !writer.is_finished() && t0.elapsed() < spec.deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        st.stop.store(true, Ordering::SeqCst);
        let (writer_entries, attempts, deadline_hit, elapsed) =
            writer.join().expect("relay writer panicked");
        let version = lock.0.read(Shared::version);
        RelayRun {
            writer_entries,
            writes_wanted: spec.writes,
            handoffs: st.entered.load(Ordering::SeqCst),
            held_back: st.held_back.load(Ordering::SeqCst),
            deadline_hit,
            elapsed_ns: elapsed.as_nanos() as u64,
            violations: attempts.abs_diff(version),
        }
    })
}

/// One relay reader: entries `first`, `first + step`, ...
fn relay_reader<L: BenchRwLock<Shared>>(
    lock: &L,
    st: &State,
    first: u64,
    step: u64,
    grace: Duration,
) {
    let mut k = first;
    loop {
        while st.may_begin.load(Ordering::SeqCst) < k {
            if st.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::yield_now();
        }
        if st.stop.load(Ordering::SeqCst) {
            return;
        }
        st.began.store(k + 1, Ordering::SeqCst);
        lock.read(|_| {
            st.entered.store(k + 1, Ordering::SeqCst);
            st.may_begin.store(k + 1, Ordering::SeqCst);
            // Hold until the successor is inside; let go early only when it is stuck while
            // the writer waits (the lock holds it back), or at the end.
            let mut stuck_since: Option<Instant> = None;
            loop {
                if st.entered.load(Ordering::SeqCst) >= k + 2 || st.stop.load(Ordering::SeqCst) {
                    break;
                }
                if st.began.load(Ordering::SeqCst) >= k + 2
                    && st.writer_waiting.load(Ordering::SeqCst)
                {
                    let since = *stuck_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= grace {
                        st.held_back.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                } else {
                    stuck_since = None;
                }
                std::thread::yield_now();
            }
        });
        k += step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::{SENJU_FAIR_RWLOCK, rw_peers};

    #[test]
    fn a_writer_preferring_lock_lets_the_writer_in() {
        let peers: Vec<RwPeer> =
            rw_peers().into_iter().filter(|p| p.name == SENJU_FAIR_RWLOCK).collect();
        let params = RelayParams { readers: 2, writes: 5, deadline_ms: 20_000, grace_us: 2000 };
        let report = reader_relay(&params, &peers, &mut |_| {});
        let run = &report.rows[0].run;
        assert_eq!(run.violations, 0);
        assert_eq!(report.rows[0].let_in, LetIn::Lock, "{run:?}");
        assert_eq!(run.writer_entries, 5);
    }
}
