//! The realloc cliff: a `Vec<u8>` grown by `extend_from_slice` from empty to 256 MiB (so by `realloc`,
//! doubling), freed, with the heap sampler at Go's default rate (512 KiB; a growing buffer is sampled at
//! almost every growth past 1 MiB) and with sampling off (`set_rate(0)`), rounds alternated in one process
//! so both see the same machine load. Wall time and the thread's CPU time per round; the medians and their
//! ratio are printed (target ≤ 1.1). `NL6_REALLOC_BENCH_ROUNDS=N` (default 7), `NL6_REALLOC_BENCH_MIB=M`
//! (default 256).
//!
//!   cargo bench --bench heap_realloc
use nl6_profile::heap::{self, SamplingAllocator};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One growth to `bytes`, then the free: (wall, cpu).
fn grow(bytes: usize) -> (Duration, Duration) {
    let chunk = [0x5au8; 4096];
    let (w, c) = (Instant::now(), thread_cpu());
    let mut v: Vec<u8> = Vec::new();
    while v.len() < bytes {
        v.extend_from_slice(&chunk);
    }
    black_box(&v);
    drop(v);
    (w.elapsed(), thread_cpu() - c)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = env("NL6_REALLOC_BENCH_ROUNDS", 7);
    let bytes = env("NL6_REALLOC_BENCH_MIB", 256) << 20;
    let (mut off_w, mut off_c, mut on_w, mut on_c) = (vec![], vec![], vec![], vec![]);
    let (lost_before, _) = heap::lost_counts();
    for _ in 0..rounds {
        heap::set_rate(0);
        let (w, c) = grow(bytes);
        off_w.push(w);
        off_c.push(c);
        heap::set_rate(heap::DEFAULT_RATE);
        let (w, c) = grow(bytes);
        on_w.push(w);
        on_c.push(c);
    }
    let (lost_after, _) = heap::lost_counts();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (ow, oc, nw, nc) = (median(off_w), median(off_c), median(on_w), median(on_c));
    println!(
        "Vec<u8> grown to {} MiB, {rounds} rounds each, medians (glibc malloc)",
        bytes >> 20
    );
    println!("{:<10} {:>12} {:>12}", "", "wall ms", "cpu ms");
    println!("{:<10} {:>12.1} {:>12.1}", "off", ms(ow), ms(oc));
    println!("{:<10} {:>12.1} {:>12.1}", "sampled", ms(nw), ms(nc));
    println!(
        "{:<10} {:>12.3} {:>12.3}",
        "ratio",
        nw.as_secs_f64() / ow.as_secs_f64(),
        nc.as_secs_f64() / oc.as_secs_f64()
    );
    println!(
        "unplaced samples during the run: {}",
        lost_after - lost_before
    );
}
