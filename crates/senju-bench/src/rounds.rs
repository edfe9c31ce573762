//! Helpers shared by the scenarios: cache-line padding and the peer order of each round.

/// Keeps a value on cache lines of its own (128 bytes: two lines, for the adjacent-line
/// prefetcher), so the stop flag and the lock under test do not share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

/// `items` rotated left by `by`: the order in which peers run in one round, so that no peer
/// always runs first (on a cold machine) or right after the same neighbour.
pub(crate) fn rotated<T: Copy>(items: &[T], by: usize) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let k = by % items.len();
    items[k..].iter().chain(&items[..k]).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_wraps() {
        assert_eq!(rotated(&[1, 2, 3], 4), vec![2, 3, 1]);
        assert!(rotated::<u8>(&[], 3).is_empty());
    }
}
