//! The heap sampler under its worst case: rate 1 (every allocation sampled, so every allocation also takes
//! the recording path, which itself allocates), many threads allocating, reallocating, freeing, spawning and
//! joining for a bounded time. Passing means: no recursion, no deadlock, and (because rate 1 sees every
//! block) frees matched exactly, including blocks moved by realloc and freed by other threads.
//!
//! Its own test binary: it changes the process-wide rate.

use nl6_profile::heap::{self, SamplingAllocator};
use nl6_profile::symbols::symbolize;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

const WORKERS: usize = 6;
const RUN_FOR: Duration = Duration::from_millis(1500);

/// Allocates, grows (realloc), hands blocks to another thread to free, and spawns short-lived threads.
#[inline(never)]
fn churn(seed: u64, deadline: Instant, handoff: mpsc::Sender<Vec<u8>>) -> u64 {
    let mut x = seed | 1;
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut ops = 0u64;
    while Instant::now() < deadline && ops < 2_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let size = [8usize, 24, 100, 512, 4096, 70_000][(x % 6) as usize];
        match x % 5 {
            0 | 1 => live.push(vec![1u8; size]),
            2 => {
                if let Some(v) = live.last_mut() {
                    v.extend_from_slice(&[2u8; 64]); // realloc of a (sampled) block
                }
            }
            3 => {
                if let Some(v) = live.pop() {
                    let _ = handoff.send(v); // freed on another thread
                }
            }
            _ => {
                if ops.is_multiple_of(64) {
                    std::thread::spawn(move || vec![3u8; size].len())
                        .join()
                        .unwrap();
                }
                live.truncate(live.len().saturating_sub(2));
            }
        }
        if live.len() > 500 {
            live.drain(..250);
        }
        ops += 1;
    }
    ops
}

#[test]
fn rate_one_never_recurses_or_deadlocks_and_frees_match() {
    heap::set_rate(1);
    let deadline = Instant::now() + RUN_FOR;
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    let freer = std::thread::spawn(move || free_rx.into_iter().count());
    for w in 0..WORKERS {
        let done = done_tx.clone();
        let handoff = free_tx.clone();
        std::thread::spawn(move || {
            let ops = churn(0x9e37_79b9 * (w as u64 + 1), deadline, handoff);
            let _ = done.send(ops);
        });
    }
    drop(done_tx);
    drop(free_tx);
    let mut total = 0;
    for _ in 0..WORKERS {
        total += done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a worker stalled: deadlock in the sampler");
    }
    let freed = freer.join().unwrap();
    heap::set_rate(heap::DEFAULT_RATE);
    assert!(total > 1000, "workers made progress: {total} ops");
    assert!(freed > 0);

    let (unplaced, dropped) = heap::lost_counts();
    let snap = heap::snapshot();
    let in_churn = |stack: &[u64]| {
        stack.iter().any(|&a| {
            symbolize(a - 1).is_some_and(|n| n.ends_with("engine_encode_heap_stress::churn"))
        })
    };
    let mut allocs = 0;
    let mut inuse = 0;
    for r in snap.records.iter().filter(|r| in_churn(&r.stack)) {
        allocs += r.alloc_objects;
        inuse += r.alloc_objects - r.free_objects;
    }
    eprintln!("ops {total}, sampled allocs in churn {allocs}, inuse {inuse}, unplaced {unplaced}, dropped {dropped}, sites {}", snap.records.len());
    assert!(
        allocs > total / 4,
        "rate 1 samples churn's allocations: {allocs} records for {total} ops"
    );
    // An allocation the sampler could not place is not recorded at all, so this holds whatever was lost.
    assert_eq!(
        inuse, 0,
        "every block churn allocated was freed; all frees must be matched"
    );
}
