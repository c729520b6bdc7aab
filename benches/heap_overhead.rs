//! Heap sampler overhead: an alloc-heavy loop (alloc + free of mixed sizes) under the plain System
//! allocator vs `SamplingAllocator` at Go's default rate, side by side in one run. Two rows: the original
//! large-block-heavy mix and an assumed typical one (see [`Mix`]); the sampled path's share of the cost
//! grows with the mean size, since samples come per byte and the loop touches one byte per block.
//!
//! A global allocator is fixed per binary, so this binary's allocator dispatches on a mode flag (plain System
//! or the sampler over System); both modes pay the same predictable branch, so the difference is the
//! sampler's cost. Rounds alternate between modes so both see the same machine load (the machine is shared);
//! each round frees everything it allocated before the mode goes back to System (see [`timed`]), so no block
//! crosses modes: a block the sampler placed in its own region must go back to the sampler. Thread CPU time
//! is measured; the minimum and the median of each mode and their ratios are printed (target ≤ 1.03).
//! `NL6_HEAP_BENCH_RATE` overrides the rate (e.g. 0 to isolate the cost of the unsampled path);
//! `NL6_HEAP_BENCH_AA=1` runs System in both columns (the bench's own bias); `NL6_HEAP_BENCH_ROUNDS=N` and
//! `NL6_HEAP_BENCH_ONLY=system|sampling` (one column) make short runs for `valgrind
//! --tool=callgrind|cachegrind`, whose counts repeat where times do not; `NL6_HEAP_BENCH_VERBOSE=1` prints
//! every round's time (to see a bimodal allocator).
//!
//! Run: `cargo bench --bench heap_overhead` (glibc) and
//! `cargo bench --target x86_64-unknown-linux-musl --bench heap_overhead` (musl).

use nl6_profile::heap::SamplingAllocator;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

static SAMPLING: SamplingAllocator = SamplingAllocator::system();
static USE_SAMPLER: AtomicBool = AtomicBool::new(false);

struct Switch;

// SAFETY: forwards every call, unchanged, to one of two allocators. The sampler mode is on only inside
// `timed`, around a workload that frees every block it allocates and touches no other, so each block is
// allocated and freed in one mode (the sampler's own table allocations go to System in either mode).
unsafe impl GlobalAlloc for Switch {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            if USE_SAMPLER.load(Ordering::Relaxed) {
                SAMPLING.alloc(l)
            } else {
                System.alloc(l)
            }
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded; both modes end in the same System allocator.
        unsafe {
            if USE_SAMPLER.load(Ordering::Relaxed) {
                SAMPLING.dealloc(p, l)
            } else {
                System.dealloc(p, l)
            }
        }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe {
            if USE_SAMPLER.load(Ordering::Relaxed) {
                SAMPLING.realloc(p, l, n)
            } else {
                System.realloc(p, l, n)
            }
        }
    }
}

#[global_allocator]
static ALLOC: Switch = Switch;

const OPS: usize = 250_000;
const SLOTS: usize = 4096;
/// Rounds per mode unless `NL6_HEAP_BENCH_ROUNDS` says otherwise.
const ROUNDS: usize = 41;

/// Which size mix a workload draws from.
#[derive(Clone, Copy, PartialEq)]
enum Mix {
    /// The original row: 60 % 16..128 B, 30 % 128..1024 B, 9 % 1..8 KiB, 1 % 32 KiB. Mean ≈ 960 B per
    /// allocation, so at rate 524288 one allocation in ≈ 545 is sampled; 35 % of the bytes (and so of the
    /// samples) are the 32 KiB blocks.
    Heavy,
    /// An assumed mix closer to typical Rust code (mostly small strings/vecs/boxes, rare large buffers):
    /// 70 % 8..64 B, 25 % 64..512 B, 4.5 % 512 B..4 KiB, 0.5 % 4..32 KiB. Mean ≈ 290 B per allocation:
    /// one in ≈ 1800 is sampled.
    Typical,
}

impl Mix {
    fn size(self, x: u64) -> usize {
        let r = (x >> 8) as usize;
        match self {
            Mix::Heavy => match x % 100 {
                0..=59 => 16 + r % 112,     // small: 16..128
                60..=89 => 128 + r % 896,   // medium: 128..1024
                90..=98 => 1024 + r % 7168, // 1..8 KiB
                _ => 32 * 1024,             // occasional 32 KiB
            },
            Mix::Typical => match x % 1000 {
                0..=699 => 8 + r % 56,
                700..=949 => 64 + r % 448,
                950..=994 => 512 + r % 3584,
                _ => 4096 + r % 28672,
            },
        }
    }
}

/// Replaces a random slot with a fresh block of a mixed size; touches it so the work is real.
#[inline(never)]
fn workload(mix: Mix) -> u64 {
    let mut slots: Vec<Option<Vec<u8>>> = (0..SLOTS).map(|_| None).collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut sum = 0u64;
    for _ in 0..OPS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let size = mix.size(x);
        let i = (x >> 32) as usize % SLOTS;
        let mut v = Vec::with_capacity(size);
        v.push(x as u8);
        sum = sum.wrapping_add(u64::from(v[0]));
        slots[i] = Some(v);
    }
    std::hint::black_box(&slots);
    sum
}

/// CPU time of the calling thread: other processes on a busy machine inflate wall time, not this.
fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn median(mut v: Vec<u128>) -> u128 {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if let Some(rate) = std::env::var("NL6_HEAP_BENCH_RATE")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        nl6_profile::heap::set_rate(rate);
    }
    for mix in [Mix::Heavy, Mix::Typical] {
        run(mix);
    }
}

/// Thread CPU time of one workload run under the sampler or System. The mode is System again on return,
/// before the caller allocates anything: every block the run allocated was freed inside it.
fn timed(sampler: bool, mix: Mix) -> u128 {
    USE_SAMPLER.store(sampler, Ordering::Relaxed);
    let start = thread_cpu_ns();
    std::hint::black_box(workload(mix));
    let ns = thread_cpu_ns() - start;
    USE_SAMPLER.store(false, Ordering::Relaxed);
    ns
}

/// One row: alternating rounds of `mix` under each mode, then the figures.
fn run(mix: Mix) {
    // NL6_HEAP_BENCH_AA=1: both columns use System, to show the bench's own bias between the two slots.
    let aa = std::env::var_os("NL6_HEAP_BENCH_AA").is_some();
    // NL6_HEAP_BENCH_ONLY=system|sampling runs one column (for instruction counts under callgrind).
    let only = std::env::var("NL6_HEAP_BENCH_ONLY").ok();
    let rounds = std::env::var("NL6_HEAP_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    // Warm both paths (allocator arenas, the sampler's tables), untimed.
    for mode in [false, true] {
        timed(mode, mix);
    }
    let sampled_before = sampled();
    let (mut system, mut sampling) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        for (mode, out) in [(false, &mut system), (true, &mut sampling)] {
            if only
                .as_deref()
                .is_some_and(|o| o != ["system", "sampling"][mode as usize])
            {
                out.push(1);
                continue;
            }
            out.push(timed(mode && !aa, mix));
        }
    }
    if std::env::var_os("NL6_HEAP_BENCH_VERBOSE").is_some() {
        let us = |v: &Vec<u128>| {
            v.iter()
                .map(|n| (n / 1000).to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        eprintln!("system   µs per round: {}", us(&system));
        eprintln!("sampling µs per round: {}", us(&sampling));
    }
    let (samples, sites) = sampled();
    let (smin, pmin) = (
        *system.iter().min().unwrap(),
        *sampling.iter().min().unwrap(),
    );
    let (s, p) = (median(system), median(sampling));
    let libc = if cfg!(target_env = "musl") {
        "musl"
    } else {
        "glibc"
    };
    let name = match mix {
        Mix::Heavy => "mixed sizes",
        Mix::Typical => "typical sizes",
    };
    let per_op = |ns: u128| ns as f64 / OPS as f64;
    println!(
        "heap_overhead [{libc}] alloc+free of {name}, {rounds} alternating rounds of {OPS} ops, thread CPU \
         time: system min {:.1} / median {:.1} ns/op; sampling (rate {}) min {:.1} / median {:.1} ns/op; \
         ratio of minimums {:.3}, of medians {:.3} (target <= 1.03); {:.0} samples per round, {} new sites",
        per_op(smin),
        per_op(s),
        nl6_profile::heap::rate(),
        per_op(pmin),
        per_op(p),
        pmin as f64 / smin as f64,
        p as f64 / s as f64,
        (samples - sampled_before.0) as f64 / rounds as f64,
        sites - sampled_before.1,
    );
}

/// Sampled allocations and sites recorded so far (the sampler's own counters).
fn sampled() -> (u64, usize) {
    let snap = nl6_profile::heap::snapshot();
    (
        snap.records.iter().map(|r| r.alloc_objects).sum(),
        snap.records.len(),
    )
}
