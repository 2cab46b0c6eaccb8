//! The duration histogram of the hourly call statistics, backend-neutral: every backend stores
//! one [`Histogram`] per (source, tool, hour) as its counts, and merges and reads them here.
//!
//! The buckets are fixed, so histograms of different hours and tools add up bucket by bucket:
//! [`BUCKET_BOUNDS_MS`] are upper bounds in milliseconds, 8 per decade (10^(k/8) rounded to
//! whole milliseconds, so each is at most 1.34 times the last from 100 ms on; below, rounding
//! makes steps of up to 1.4) from 1 ms to 1,000 s, plus a last bucket for anything longer. A
//! percentile is the upper bound of the bucket that holds it (nearest rank), capped at the
//! longest call seen, so from 100 ms on it overstates the true value by less than 34%, and it
//! is exact when all calls of the hour took the same time.

/// Upper bounds of the buckets, milliseconds (inclusive). Bucket `i` counts durations `d` with
/// `BUCKET_BOUNDS_MS[i-1] < d <= BUCKET_BOUNDS_MS[i]`; one more bucket counts everything above
/// the last bound.
pub const BUCKET_BOUNDS_MS: [u64; 47] = [
    1, 2, 3, 4, 5, 7, 10, 13, 18, 24, 32, 42, 56, 75, 100, 133, 178, 237, 316, 422, 562, 750,
    1_000, 1_334, 1_778, 2_371, 3_162, 4_217, 5_623, 7_499, 10_000, 13_335, 17_783, 23_714, 31_623,
    42_170, 56_234, 74_989, 100_000, 133_352, 177_828, 237_137, 316_228, 421_697, 562_341, 749_894,
    1_000_000,
];

/// How many buckets a histogram has: one per bound, plus the overflow bucket.
pub const BUCKETS: usize = BUCKET_BOUNDS_MS.len() + 1;

/// Call durations counted by bucket, with the longest seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    max_ms: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: [0; BUCKETS],
            max_ms: 0,
        }
    }
}

impl Histogram {
    /// A histogram from stored counts (exactly [`BUCKETS`] of them) and the longest duration.
    /// `None` if the number of counts is wrong.
    pub fn from_counts(counts: &[u64], max_ms: u64) -> Option<Histogram> {
        Some(Histogram {
            counts: counts.try_into().ok()?,
            max_ms,
        })
    }

    /// The counts, one per bucket, to store.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The longest duration recorded, milliseconds.
    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }

    /// How many durations it holds.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Counts one duration.
    pub fn record(&mut self, duration_ms: u64) {
        let bucket = BUCKET_BOUNDS_MS.partition_point(|&bound| bound < duration_ms);
        self.counts[bucket] = self.counts[bucket].saturating_add(1);
        self.max_ms = self.max_ms.max(duration_ms);
    }

    /// Adds another histogram's counts (another tool or hour).
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine = mine.saturating_add(*theirs);
        }
        self.max_ms = self.max_ms.max(other.max_ms);
    }

    /// The `q`-quantile (0 < q ≤ 1, e.g. 0.5, 0.99) by nearest rank: the upper bound of the
    /// bucket holding it, at most the longest duration seen. 0 for an empty histogram.
    pub fn quantile_ms(&self, q: f64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        // Nearest rank: the smallest rank r with r >= q * total, at least 1.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (i, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let bound = BUCKET_BOUNDS_MS.get(i).copied().unwrap_or(self.max_ms);
                return bound.min(self.max_ms);
            }
        }
        self.max_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_by_at_most_34_percent_from_100_ms() {
        for pair in BUCKET_BOUNDS_MS.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
            assert!(pair[1] * 10 <= pair[0] * 14 + 10, "{pair:?}");
            if pair[0] >= 100 {
                assert!(pair[1] * 100 <= pair[0] * 134, "{pair:?}");
            }
        }
    }

    #[test]
    fn buckets_and_quantiles() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile_ms(0.5), 0);
        for d in [0, 1, 2, 9, 10, 11] {
            h.record(d);
        }
        // 0 and 1 share the first bucket; 9 and 10 the "<= 10" bucket; 11 is in "<= 13".
        assert_eq!(&h.counts()[..8], &[2, 1, 0, 0, 0, 0, 2, 1]);
        assert_eq!(h.quantile_ms(0.5), 2);
        assert_eq!(h.quantile_ms(0.99), 11, "capped at the longest call");
        let mut same = Histogram::default();
        for _ in 0..100 {
            same.record(250);
        }
        assert_eq!((same.quantile_ms(0.5), same.quantile_ms(0.99)), (250, 250));
        let mut long = Histogram::default();
        long.record(5_000_000);
        assert_eq!(long.counts()[BUCKETS - 1], 1);
        assert_eq!(long.quantile_ms(0.5), 5_000_000);

        let mut merged = h.clone();
        merged.merge(&same);
        assert_eq!(merged.total(), 106);
        assert_eq!(merged.max_ms(), 250);
        // The median falls in the (237, 316] bucket, capped at the longest call.
        assert_eq!(merged.quantile_ms(0.5), 250);
        assert_eq!(
            Histogram::from_counts(merged.counts(), merged.max_ms()),
            Some(merged)
        );
        assert_eq!(Histogram::from_counts(&[1, 2], 3), None);
    }

    #[test]
    fn p99_of_a_hundred_calls_is_the_99th() {
        let mut h = Histogram::default();
        for d in 1..=100 {
            h.record(d * 10);
        }
        // The 99th call took 990 ms: its bucket ends at 1000.
        assert_eq!(h.quantile_ms(0.99), 1000);
        // The 50th took 500 ms: bucket (422, 562].
        assert_eq!(h.quantile_ms(0.5), 562);
    }
}
