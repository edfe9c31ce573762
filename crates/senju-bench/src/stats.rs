//! Medians, percentiles and the spread across rounds.

use serde::{Deserialize, Serialize};

/// A value measured once per round: the median across rounds and the range it moved in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median across rounds (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value across rounds.
    pub min: f64,
    /// Largest value across rounds.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero for an empty slice).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return Self { median: 0.0, min: 0.0, max: 0.0 };
        }
        v.sort_by(f64::total_cmp);
        Self { median: median_sorted(&v), min: v[0], max: v[v.len() - 1] }
    }
}

/// The median of a sorted, non-empty slice.
fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The median of `values` (0 for none).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    Spread::of(values).median
}

/// Min/max of per-thread counts: 1.0 when every thread did the same work, 0.0 when one did
/// none (or there are no threads).
pub fn fairness(per_thread: &[u64]) -> f64 {
    let min = per_thread.iter().copied().min().unwrap_or(0);
    let max = per_thread.iter().copied().max().unwrap_or(0);
    if max == 0 { 0.0 } else { min as f64 / max as f64 }
}

/// The `p`-th percentile (0..=100, nearest rank) of sorted `values`, or `None` if empty.
pub fn percentile_sorted(values: &[u64], p: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_percentiles() {
        let s = Spread::of([3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
        assert_eq!(fairness(&[5, 10]), 0.5);
        assert_eq!(fairness(&[0, 0]), 0.0);
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 50.0), Some(50));
        assert_eq!(percentile_sorted(&v, 99.0), Some(99));
        assert_eq!(percentile_sorted(&v, 100.0), Some(100));
        assert_eq!(percentile_sorted(&[], 50.0), None);
    }
}
