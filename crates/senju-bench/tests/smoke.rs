//! Runs every scenario with every peer for a few tens of milliseconds and checks the shape of
//! the results: every row present, counts positive, no exclusion violated, the JSON round
//! trip exact. Nothing here looks at how fast anything was.

use senju_bench::checks::check_targets;
use senju_bench::flood::FloodParams;
use senju_bench::handoff::HandoffParams;
use senju_bench::throughput::{Table, ThroughputParams};
use senju_bench::{Plan, Report, markdown, peers, report};

fn tiny_plan() -> Plan {
    Plan {
        throughput: Some(ThroughputParams {
            threads: vec![1, 2],
            read_percents: vec![100, 50],
            cs_ns: vec![0, 100],
            exclusive_cs_ns: vec![100],
            gap_ns: 50,
            duration_ms: 15,
            rounds: 2,
        }),
        flood: Some(FloodParams {
            readers: vec![2],
            duration_ms: 30,
            rounds: 2,
            ..FloodParams::default()
        }),
        handoff: Some(HandoffParams {
            threads: vec![2],
            cs_ns: 1500,
            duration_ms: 15,
            warmup_ms: 5,
            rounds: 2,
        }),
        rw_peers: peers::rw_peers(),
        mutex_peers: peers::mutex_peers(),
        note: Some("smoke".into()),
    }
}

#[test]
fn every_scenario_fills_every_row() {
    let plan = tiny_plan();
    let mut lines = 0;
    let report = report::run(&plan, &mut |_| lines += 1);
    let n_rw = plan.rw_peers.len();
    let n_mutex = plan.mutex_peers.len();
    assert!(n_rw >= 7 && n_mutex >= 5, "peers missing: {n_rw} rwlocks, {n_mutex} mutexes");

    let t = report.throughput.as_ref().expect("throughput ran");
    let rw_rows = t.rows.iter().filter(|r| r.table == Table::RwLock).count();
    let ex_rows = t.rows.iter().filter(|r| r.table == Table::Exclusive).count();
    assert_eq!(rw_rows, n_rw * 2 * 2 * 2, "peers × threads × mixes × critical sections");
    assert_eq!(ex_rows, n_mutex * 2, "mutexes × threads");
    for r in &t.rows {
        assert_eq!(r.runs.len(), 2, "{} T={}: one run per round", r.peer, r.threads);
        for run in &r.runs {
            assert_eq!(run.per_thread_ops.len(), r.threads);
            assert!(run.per_thread_ops.iter().sum::<u64>() > 0, "{} did nothing", r.peer);
            assert_eq!(run.reads + run.writes, run.per_thread_ops.iter().sum::<u64>());
            assert_eq!(run.violations, 0, "{}: exclusion violated", r.peer);
            if r.read_percent == 100 {
                assert_eq!(run.writes, 0);
            }
        }
        assert!(r.summary.ops_per_sec.median > 0.0);
        assert!((0.0..=1.0).contains(&r.summary.fairness.median));
    }

    let f = report.flood.as_ref().expect("flood ran");
    assert_eq!(f.rows.len(), n_rw);
    for r in &f.rows {
        assert_eq!(r.runs.len(), 2);
        for run in &r.runs {
            assert!(run.reader_ops > 0, "{}: readers did nothing", r.peer);
            assert_eq!(run.violations, 0, "{}: exclusion violated", r.peer);
            // Either the writer got in, or its last attempt was still waiting at the end.
            assert!(run.acquisitions > 0 || run.pending_wait_ns.is_some(), "{}", r.peer);
        }
    }

    let h = report.handoff.as_ref().expect("handoff ran");
    assert_eq!(h.rows.len(), n_mutex);
    for r in &h.rows {
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.median_round_shares.len(), 2);
        assert!(r.ops_per_sec.median > 0.0, "{} did nothing", r.peer);
        assert_eq!(r.violations, 0, "{}: exclusion violated", r.peer);
    }
    assert!(lines > n_rw * 8, "progress heard every run");

    // The JSON report reads back as the same report, and renders with every lock named.
    let json = serde_json::to_string(&report).expect("report encodes");
    let back: Report = serde_json::from_str(&json).expect("report decodes");
    assert!(back == report, "the JSON round trip changed the report");
    let text = markdown::render(&report, markdown::Options { detail: true, checks: true });
    for name in plan.rw_peers.iter().map(|p| p.name).chain(plan.mutex_peers.iter().map(|p| p.name))
    {
        assert!(text.contains(name), "{name} missing from the tables");
    }
    assert_eq!(check_targets(&report).len(), 5);
}
