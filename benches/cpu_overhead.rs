//! CPU sampler costs, side by side in one run: `cargo bench --bench cpu_overhead`.
//!
//! - overhead: a CPU-bound 2-thread workload (fixed work) timed without the sampler and with it at 100 Hz,
//!   in interleaved pairs; prints the median ratio of wall time and of process CPU time (target ≤ 0.5 %).
//!   The workload (`support/spin_workload.rs`, shared with `pprof-rs-compare`) spawns its threads through
//!   `threads::spawn_recorded`, so the sampler arms them at birth and samples them at the full rate (see
//!   `cpu`'s module doc). `NL6_BENCH_AA=1` runs both sides without
//!   the sampler, to show how far the machine's noise alone moves the ratios;
//! - RSS added by a running sampler (VmRSS before start vs after 2 s of sampling; target ≤ 4 MB);
//! - label scope cost: ns per `labels::with` enter+exit and heap allocations per scope, counted by this
//!   binary's global allocator (target ≤ 10 ns, 0 allocations).
use nl6::labels::{self, Subsystem};
use nl6_profile::cpu;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[path = "support/spin_workload.rs"]
mod spin_workload;
use spin_workload::{calibrated_rounds, median, vm_rss_kb, workload};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to System with the caller's arguments; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let rounds = calibrated_rounds();
    let pairs = std::env::var("NL6_BENCH_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let aa = std::env::var_os("NL6_BENCH_AA").is_some();
    let (mut wall, mut cpu_r, mut samples) = (Vec::new(), Vec::new(), 0u64);
    for i in 0..pairs {
        // Alternate which runs first so drift does not favour one side.
        let run_with = || {
            if aa {
                return (workload(rounds), 0);
            }
            let s = cpu::start(100).expect("start sampler");
            let r = workload(rounds);
            let p = s.stop();
            (r, p.samples.iter().map(|s| s.count).sum::<u64>())
        };
        let (base, (with, n)) = if i % 2 == 0 {
            let b = workload(rounds);
            (b, run_with())
        } else {
            let w = run_with();
            (workload(rounds), w)
        };
        samples += n;
        wall.push(with.0.as_secs_f64() / base.0.as_secs_f64());
        cpu_r.push(with.1.as_secs_f64() / base.1.as_secs_f64());
    }
    let what = if aa {
        "A/A: no sampler on either side"
    } else {
        "sampler at 100 Hz"
    };
    println!(
        "cpu_overhead: 2 CPU-bound threads, {pairs} interleaved pairs, {what} ({samples} samples)"
    );
    println!(
        "  wall ratio with/without: median {:.4}  (overhead {:+.2} %)",
        median(wall.clone()),
        (median(wall) - 1.0) * 100.0
    );
    println!(
        "  cpu  ratio with/without: median {:.4}  (overhead {:+.2} %)",
        median(cpu_r.clone()),
        (median(cpu_r) - 1.0) * 100.0
    );

    // RSS added by a running sampler (ring slots are touched as samples land).
    let before = vm_rss_kb();
    let s = cpu::start(cpu::MAX_HZ).expect("start sampler");
    let _ = workload(rounds * 2);
    let during = vm_rss_kb();
    drop(s);
    println!("  RSS: {before} kB before start, {during} kB after 2 busy threads sampled at {} Hz: +{} kB", cpu::MAX_HZ, during.saturating_sub(before));

    // Label scope cost and allocations.
    let n = 20_000_000u64;
    let t0 = Instant::now();
    let mut acc = 0u64;
    for i in 0..n {
        acc = acc.wrapping_add(black_box(i));
    }
    let bare = t0.elapsed();
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    for i in 0..n {
        let label = if i & 1 == 0 {
            Subsystem::SNMP
        } else {
            Subsystem::TRAP
        };
        acc = acc.wrapping_add(labels::with(black_box(label), || black_box(i)));
    }
    let scoped = t0.elapsed();
    let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    black_box(acc);
    let ns = (scoped.as_nanos() as f64 - bare.as_nanos() as f64) / n as f64;
    println!("  labels::with enter+exit: {ns:.2} ns per scope (loop alone {:.2} ns), {allocs} allocations in {n} scopes", bare.as_nanos() as f64 / n as f64);
    if allocs != 0 {
        eprintln!("cpu_overhead: FAIL label scopes allocated");
        std::process::exit(1);
    }
}
