//! Encode + gzip of a 1000-stack CPU profile (target ≤ 2 ms), with a warm symbol cache as in a running
//! process that serves profiles repeatedly; the first (cold) encode is printed too.
//!
//! Run: `cargo bench --bench encode_cpu`.

use nl6_profile::cpu::{CpuProfile, CpuSample};
use nl6_profile::encode;
use std::time::{Duration, Instant, SystemTime};

const STACKS: usize = 1000;
const ROUNDS: usize = 50;

/// Real code addresses in this binary: functions of the library and std, plus offsets inside them.
fn code_addresses() -> Vec<u64> {
    let fns: [*const (); 12] = [
        encode::cpu as *const (),
        encode::heap as *const (),
        encode::goroutine as *const (),
        encode::threadcreate as *const (),
        encode::contention_empty as *const (),
        encode::heap_text as *const (),
        nl6_profile::symbols::symbolize as *const (),
        nl6_profile::symbols::demangle as *const (),
        nl6_profile::heap::snapshot as *const (),
        nl6_profile::proto::decode as *const (),
        main as *const (),
        code_addresses as *const (),
    ];
    fns.iter()
        .flat_map(|f| (1..=40u64).map(move |off| *f as u64 + off * 3))
        .collect()
}

fn profile() -> CpuProfile {
    let addrs = code_addresses();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let samples = (0..STACKS)
        .map(|i| {
            let depth = 8 + i % 24;
            let stack = (0..depth)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    addrs[(x % addrs.len() as u64) as usize]
                })
                .collect();
            CpuSample {
                stack,
                label: (i % 8) as u16,
                count: 1 + (x % 50),
            }
        })
        .collect();
    CpuProfile {
        start: SystemTime::now(),
        duration: Duration::from_secs(10),
        period_ns: 10_000_000,
        samples,
        lost: 0,
        coverage: Default::default(),
    }
}

fn main() {
    let p = profile();
    let cold = Instant::now();
    let bytes = encode::cpu(&p);
    let cold = cold.elapsed();
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        std::hint::black_box(encode::cpu(std::hint::black_box(&p)));
        times.push(t.elapsed().as_nanos());
    }
    times.sort();
    let median = times[ROUNDS / 2];
    println!(
        "encode_cpu: {STACKS} stacks -> {} bytes gzip'd; warm median {median} ns ({:.2} ms, target <= 2 ms), \
         cold first encode {:.2} ms (loads the symbol table)",
        bytes.len(),
        median as f64 / 1e6,
        cold.as_secs_f64() * 1e3
    );
}
