//! The heap sampler's own memory: what an allocation-heavy service's resident set gains with sampling on
//! (Go's default rate, 512 KiB) against the same binary with sampling off (`set_rate(0)` before any
//! thread starts), and where the difference lives.
//!
//! The workload is a small "service": 4 threads, each handling requests that build short-lived strings
//! and vectors (16 B .. 2 KiB), grow one response buffer by `push` (64 KiB .. 4 MiB, so by `realloc`), and
//! replace entries of a per-thread cache of live blocks (256 entries, 1 KiB .. 256 KiB: a working set of
//! ~130 MB), with the same seeds in both runs. Each mode runs in its own child process (a process's RSS
//! never shrinks back to a baseline, so modes cannot share one). At the end, with the working set still
//! live, each child reports:
//! - `rss`: VmRSS of the process (`/proc/self/status`);
//! - `region`: the resident bytes of the sampler's region (`/proc/self/smaps`, the mappings inside
//!   `heap::sampled_region()`): the sampled blocks and the freed ones waiting for reuse;
//! - `sampled live`: bytes the live sampled blocks hold (the heap profile's unscaled `inuse`), which a
//!   service pays for with sampling on or off;
//! - `malloc`: glibc's `mallinfo2` (`arena` + `hblkhd`: bytes glibc holds from the kernel).
//!
//! The sampler's own cost is `rss(on) - rss(off) - 0`: the sampled blocks moved out of malloc into the
//! region, so the blocks themselves are in both columns; what the region holds beyond the sampled live
//! bytes (freed blocks kept for reuse, class rounding) is printed as `region overhead`. Run:
//!
//!   cargo bench --bench heap_rss
use nl6_profile::heap::{self, SamplingAllocator};
use std::hint::black_box;
use std::process::Command;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

const THREADS: usize = 4;
const REQUESTS: usize = 4_000;
const CACHE: usize = 256;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let on = args.get(i + 1).is_some_and(|m| m == "on");
        child(on);
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    let run = |mode: &str| -> Vec<(String, f64)> {
        let out = Command::new(&exe)
            .args(["--child", mode])
            .output()
            .expect("child");
        assert!(
            out.status.success(),
            "child {mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap_or(0.0)))
            .collect()
    };
    let (off, on) = (run("off"), run("on"));
    let get = |m: &[(String, f64)], k: &str| m.iter().find(|(n, _)| n == k).map_or(0.0, |x| x.1);
    let mib = |b: f64| b / (1 << 20) as f64;
    println!("heap sampler RSS, {THREADS} threads x {REQUESTS} requests, glibc malloc");
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        "", "off MiB", "on MiB", "on-off MiB"
    );
    for k in ["rss", "hwm", "malloc", "region", "sampled_live", "sites"] {
        let (a, b) = (get(&off, k), get(&on, k));
        if k == "sites" {
            println!("{k:<28} {a:>12.0} {b:>12.0} {:>12.0}", b - a);
        } else {
            println!(
                "{k:<28} {:>12.2} {:>12.2} {:>12.2}",
                mib(a),
                mib(b),
                mib(b - a)
            );
        }
    }
    let overhead = get(&on, "region") - get(&on, "sampled_live");
    println!(
        "region overhead (region - sampled_live): {:.2} MiB",
        mib(overhead)
    );
    println!(
        "sampler cost beyond its blocks (rss on - rss off): {:.2} MiB",
        mib(get(&on, "rss") - get(&off, "rss"))
    );
}

/// The workload, then its figures as `name=value` lines.
fn child(on: bool) {
    if !on {
        heap::set_rate(0);
    }
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || service(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1)))
                .expect("worker")
        })
        .collect();
    let caches: Vec<Vec<Vec<u8>>> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    let live: u64 = heap::snapshot()
        .records
        .iter()
        .map(|r| r.alloc_bytes - r.free_bytes)
        .sum();
    println!("rss={}", status_kib("VmRSS:") * 1024);
    println!("hwm={}", status_kib("VmHWM:") * 1024);
    println!("region={}", region_rss());
    println!("sampled_live={live}");
    println!("sites={}", heap::snapshot().records.len());
    // SAFETY: mallinfo2 only reads glibc's counters.
    let mi = unsafe { libc::mallinfo2() };
    println!("malloc={}", mi.arena + mi.hblkhd);
    black_box(caches);
}

/// One worker: `REQUESTS` requests; returns its cache (still live when the figures are read).
fn service(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = seed;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut cache: Vec<Vec<u8>> = (0..CACHE).map(|_| Vec::new()).collect();
    for _ in 0..REQUESTS {
        let small: Vec<String> = (0..32)
            .map(|_| "x".repeat(16 + next(2032) as usize))
            .collect();
        let mut response: Vec<u8> = Vec::new();
        let want = (64 << 10) + next(4 << 20) as usize;
        while response.len() < want {
            response.extend_from_slice(&[7u8; 4096]);
        }
        let slot = next(CACHE as u64) as usize;
        let size = 1024 + next(255 << 10) as usize;
        cache[slot] = vec![response[0] ^ small.len() as u8; size];
        black_box((&small, &response));
    }
    cache
}

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resident bytes of the mappings inside the sampler's region (0 before it is reserved).
fn region_rss() -> u64 {
    let Some(range) = heap::sampled_region() else {
        return 0;
    };
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut inside, mut total) = (false, 0u64);
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a >= range.start && b <= range.end;
                continue;
            }
        }
        if inside && line.starts_with("Rss:") {
            total += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                * 1024;
        }
    }
    total
}
