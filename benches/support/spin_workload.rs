//! The CPU-bound workload the CPU-sampler benches time: `benches/cpu_overhead.rs` (nl6 alone) and
//! `benches/pprof-rs-compare` (nl6 vs pprof-rs, its own cargo project) both include this file with
//! `#[path]`, so their ratios come from the very same work.
//!
//! Two threads spin on xorshift for a fixed number of rounds. They are spawned through nl6's
//! `spawn_recorded`, so nl6's sampler arms them at birth; a plain `std::thread::spawn` thread waits up to
//! 100 ms for the collector's rescan and would make the sampler look cheaper than it is.
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn spin(mut x: u64, rounds: u64) -> u64 {
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Fixed work on 2 threads; returns (wall, process CPU).
pub fn workload(rounds: u64) -> (Duration, Duration) {
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let hs: Vec<_> = (0..2u64)
        .map(|i| {
            nl6_profile::threads::spawn_recorded("bench-spin", move || {
                black_box(spin(i + 1, rounds))
            })
            .expect("spawn")
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    (t0.elapsed(), process_cpu() - cpu0)
}

/// Rounds per thread for a run of about half a second on this machine.
pub fn calibrated_rounds() -> u64 {
    let mut rounds = 10_000_000u64;
    while workload(rounds).0 < Duration::from_millis(500) {
        rounds *= 2;
    }
    rounds
}

/// User + system CPU time of the whole process.
fn process_cpu() -> Duration {
    // SAFETY: writes one rusage we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// The process's resident set, in kB (0 if /proc cannot say).
pub fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
