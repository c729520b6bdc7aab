//! The sampling distance: Go's `fastexprand`, the bytes a thread allocates before its next sample, drawn
//! from an exponential distribution on a per-thread xorshift64* state. Runs on the allocation path, so it
//! allocates nothing and touches only a `const` thread-local.
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// xorshift64* state; 0 = not seeded yet.
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// The next gap in bytes: exponentially distributed with mean `rate` (Go's `fastexprand`: a uniform
/// q in 1..=2^26, log2(q) − 26 clamped to ≤ 0, times −ln 2 × mean, plus 1). Rate 1 samples every byte.
pub(super) fn next_gap(rate: usize) -> usize {
    if rate <= 1 {
        return 0;
    }
    gap_from_uniform(next_random(), rate)
}

/// The gap for a 64-bit uniform random value (split out for tests).
fn gap_from_uniform(random: u64, rate: usize) -> usize {
    const RANDOM_BITS: u32 = 26;
    let q = (random >> (64 - RANDOM_BITS)) + 1;
    let qlog = ((q as f64).log2() - f64::from(RANDOM_BITS)).min(0.0);
    (qlog * (-std::f64::consts::LN_2 * rate as f64)) as usize + 1
}

/// xorshift64* on per-thread state, seeded from the time-stamp counter and the thread-local's address.
fn next_random() -> u64 {
    let mut x = RNG.with(Cell::get);
    if x == 0 {
        x = seed();
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    RNG.with(|c| c.set(x));
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let local = RNG.with(|c| c as *const Cell<u64> as u64);
    let z = crate::mix64(
        local ^ COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ timestamp(),
    );
    if z == 0 {
        1
    } else {
        z
    }
}

#[cfg(target_arch = "x86_64")]
fn timestamp() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn timestamp() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's scale for one record, by hand: 1 / (1 - exp(-avg/rate)).
    #[test]
    fn gap_mean_is_rate() {
        let rate = 4096usize;
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let n = 200_000u64;
        let mut sum = 0u128;
        for _ in 0..n {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            sum += gap_from_uniform(x.wrapping_mul(0x2545_f491_4f6c_dd1d), rate) as u128;
        }
        let mean = sum as f64 / n as f64;
        // Standard error of an exponential's mean is rate/sqrt(n) ≈ 9 bytes here; allow 2 %.
        assert!(
            (mean - rate as f64).abs() < rate as f64 * 0.02,
            "mean gap {mean} vs rate {rate}"
        );
    }

    #[test]
    fn gap_extremes() {
        assert_eq!(
            gap_from_uniform(u64::MAX, 1000),
            1,
            "q = 2^26 gives log 0 -> gap 1"
        );
        let big = gap_from_uniform(0, 1000);
        // q = 1: log2(1) - 26 = -26 -> 26 * ln2 * 1000 + 1 ≈ 18022.
        assert_eq!(big, 18022);
        assert_eq!(next_gap(1), 0);
    }
}
