//! How late the lab scheduler runs its jobs: every turn it reaches (run or skipped) is recorded by how far
//! past its due time it was reached, in a log-scale histogram of atomics, with the periods skipped
//! (see [`super::catchup`]) beside it. The scheduler thread writes; the API reads at any time without a
//! lock (`GET /api/v1/fleet`), so a user or a bench sees lateness p50/p99 and the skips of a running
//! fleet, not only the one log line a stall gives.
//!
//! The buckets are exact below 4 µs, then four per power of two (each at most 25 % wide), so a
//! percentile is told within a quarter of itself; 8 bytes of state per bucket, none per job.
//! Never here: deciding what a late job does (`catchup`) or the timer wheel (`wheel.rs`, run by `schedule.rs`).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets: four per power of two of microseconds up to 2^42 µs (51 days); later lands in the last.
pub const BUCKETS: usize = 164;

/// The bucket of a lateness of `us` microseconds.
pub fn bucket(us: u64) -> usize {
    if us < 4 {
        return us as usize;
    }
    let e = 63 - us.leading_zeros() as usize;
    let sub = ((us >> (e - 2)) & 3) as usize;
    ((e - 1) * 4 + sub).min(BUCKETS - 1)
}

/// The smallest lateness (µs) bucket `i` holds.
pub fn lower(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let (e, sub) = (i / 4 + 1, (i % 4) as u64);
    (4 + sub) << (e - 2)
}

/// The scheduler's lateness and skips, shared between the scheduler thread and the API.
#[derive(Debug)]
pub struct Lateness {
    buckets: [AtomicU64; BUCKETS],
    max_us: AtomicU64,
    skipped_periods: AtomicU64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            max_us: AtomicU64::new(0),
            skipped_periods: AtomicU64::new(0),
        }
    }
}

impl Lateness {
    /// Records one turn reached `late` after its due time (zero when early or on time).
    pub fn record(&self, late: Duration) {
        let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Counts `missed` periods skipped rather than replayed.
    pub fn skipped(&self, missed: u64) {
        self.skipped_periods.fetch_add(missed, Ordering::Relaxed);
    }

    /// A copy of the counts now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            max_us: self.max_us.load(Ordering::Relaxed),
            skipped_periods: self.skipped_periods.load(Ordering::Relaxed),
        }
    }
}

/// The histogram at one moment; two of them subtract ([`Snapshot::since`]) to a window's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Turns per bucket.
    pub counts: Vec<u64>,
    /// The latest any turn was reached, µs (since the start: a window's maximum is not kept).
    pub max_us: u64,
    pub skipped_periods: u64,
}

impl Snapshot {
    /// Turns recorded.
    pub fn turns(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The lateness (µs) at or under which a fraction `q` (0..=1) of the turns were reached: the upper
    /// bound of the bucket that holds the q-th turn, so the figure never flatters. 0 with no turns.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let total = self.turns();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return if i + 1 < BUCKETS {
                    lower(i + 1).saturating_sub(1)
                } else {
                    self.max_us
                };
            }
        }
        self.max_us
    }

    /// What happened between `earlier` and this one.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            max_us: self.max_us,
            skipped_periods: self.skipped_periods.saturating_sub(earlier.skipped_periods),
        }
    }

    /// `{"turns","skipped_periods","p50_us","p99_us","p999_us","max_us","buckets":[[lower_us,count],…]}`:
    /// only the buckets that hold turns, so a reader can subtract two readings for a window.
    pub fn to_json(&self) -> serde_json::Value {
        let buckets: Vec<[u64; 2]> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| [lower(i), c])
            .collect();
        serde_json::json!({
            "turns": self.turns(),
            "skipped_periods": self.skipped_periods,
            "p50_us": self.quantile_us(0.50),
            "p99_us": self.quantile_us(0.99),
            "p999_us": self.quantile_us(0.999),
            "max_us": self.max_us,
            "buckets": buckets,
        })
    }

    /// Reads back [`Snapshot::to_json`]'s form (for a bench subtracting two readings); None when the
    /// value is not of that form.
    pub fn from_json(v: &serde_json::Value) -> Option<Snapshot> {
        let mut counts = vec![0; BUCKETS];
        for pair in v.get("buckets")?.as_array()? {
            let (low, c) = (pair.get(0)?.as_u64()?, pair.get(1)?.as_u64()?);
            *counts.get_mut(bucket(low))? += c;
        }
        Some(Snapshot {
            counts,
            max_us: v.get("max_us")?.as_u64()?,
            skipped_periods: v.get("skipped_periods")?.as_u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_at_most_a_quarter_wide() {
        for i in 0..BUCKETS - 1 {
            let (lo, hi) = (lower(i), lower(i + 1));
            assert_eq!(bucket(lo), i, "the lower bound of bucket {i} falls in it");
            assert_eq!(
                bucket(hi - 1),
                i,
                "the last value of bucket {i} falls in it"
            );
            assert!(lo < 4 || (hi - lo) * 4 <= lo, "bucket {i}: {lo}..{hi}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_bound_what_was_recorded_from_above_within_a_quarter() {
        let l = Lateness::default();
        // 990 turns at 100 µs, 10 at 2 s: p50 near 100 µs, p99 still there, p99.9 near 2 s.
        for _ in 0..990 {
            l.record(Duration::from_micros(100));
        }
        for _ in 0..10 {
            l.record(Duration::from_secs(2));
        }
        let s = l.snapshot();
        assert_eq!(s.turns(), 1000);
        for (q, want) in [(0.5, 100), (0.99, 100), (0.999, 2_000_000)] {
            let got = s.quantile_us(q);
            assert!(
                got >= want && got <= want + want / 4,
                "q{q}: {got} µs for {want}"
            );
        }
        assert_eq!(s.max_us, 2_000_000);
        assert_eq!(Snapshot::from_json(&s.to_json()), Some(s.clone()));
    }

    #[test]
    fn a_window_is_the_difference_of_two_readings() {
        let l = Lateness::default();
        for _ in 0..100 {
            l.record(Duration::from_secs(3));
        }
        l.skipped(40);
        let before = l.snapshot();
        for _ in 0..100 {
            l.record(Duration::from_micros(10));
        }
        l.skipped(2);
        let w = l.snapshot().since(&before);
        assert_eq!(w.turns(), 100);
        assert_eq!(w.skipped_periods, 2);
        assert!(w.quantile_us(0.99) < 13, "{}", w.quantile_us(0.99));
        assert_eq!(Snapshot::from_json(&serde_json::json!({})), None);
        assert_eq!(Lateness::default().snapshot().quantile_us(0.99), 0);
    }
}
