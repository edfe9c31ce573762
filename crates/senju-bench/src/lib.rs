//! Benchmarks for senju. The allocator experiment of `lab/0002-allocators` is [`alloc`] (a
//! dispatching global allocator and the malloc/free workloads, run by `senju-allocbench`).
//! The rest are lock benchmarks: senju's locks side by side with std, parking_lot, spin, glibc's
//! pthread locks and a Tkrzw-style single-counter spin lock, in three scenarios:
//!
//! 1. [`throughput`]: threads × read/write mix × critical-section length, total rate and
//!    per-thread spread (min/max = fairness), for reader-writer locks and for mutexes;
//! 2. [`flood`]: back-to-back readers against one writer that asks every millisecond; does the
//!    writer get in, and how long does it wait (founding document `000`);
//! 3. [`handoff`]: release and reacquire at once; does every thread get its share
//!    (founding document `003`).
//!
//! The reader flood comes with [`relay`], the reader relay (who lets a waiting writer in when
//! readers pass the lock hand to hand). Beside the lock scenarios: [`shared`] (a hash table
//! with bucket locks, generic over a lock family: spin versus blocking shared locks, founding
//! document `001`), [`cores`] (threads of multiplications in each installed language) and
//! [`chart`] (SVG line charts); `senju lab` in `senju-cli` runs them all. [`transfer`]
//! measures how long a cache line takes between two CPUs; the lock scenarios probe it
//! before every run, because on a VM it can change several-fold while a run goes on.
//!
//! Each scenario is a function that takes its parameters and the peers and returns a
//! serializable result; [`report::run`] runs a [`Plan`] of them, [`markdown::render`] prints
//! the tables and [`checks::check_targets`] judges the lab's targets. The `senju-lockbench`
//! binary is a thin command line over these.
//!
//! Invariants: every figure comes from locks measured in the same process, one after another
//! with the peer order rotated every round; critical sections touch the protected cache line,
//! and every run counts exclusion violations (torn reads, lost writes), which must be 0.
//! Nothing here asserts on time.
//!
//! ```
//! use senju_bench::{Plan, peers, report, throughput::ThroughputParams};
//!
//! let plan = Plan {
//!     throughput: Some(ThroughputParams {
//!         threads: vec![2],
//!         read_percents: vec![90],
//!         cs_ns: vec![100],
//!         exclusive_cs_ns: vec![],
//!         gap_ns: 50,
//!         duration_ms: 10,
//!         rounds: 1,
//!     }),
//!     rw_peers: peers::select(&peers::rw_peers(), |p| p.name, &["senju".into()]),
//!     ..Plan::default()
//! };
//! let report = report::run(&plan, &mut |_| {});
//! let rows = &report.throughput.unwrap().rows;
//! assert!(rows.iter().all(|r| r.summary.violations == 0));
//! ```

pub mod alloc;
pub mod chart;
pub mod checks;
pub mod cores;
pub mod flood;
pub mod handoff;
pub mod markdown;
pub mod peers;
pub mod pthread;
pub mod relay;
pub mod report;
mod rounds;
pub mod shared;
pub mod stats;
pub mod throughput;
pub mod tkrzw_spin;
pub mod transfer;
pub mod work;

pub use peers::{BenchMutex, BenchRwLock, MutexPeer, RwPeer};
pub use report::{Plan, Report};
