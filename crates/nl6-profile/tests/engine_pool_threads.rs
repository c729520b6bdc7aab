//! Threads a pool spawns (not the engine) that register from the pool's start hook
//! (`threads::on_thread_start`, e.g. from tokio's `on_thread_start`) are sampled from their first
//! instructions, and every sample carries the whole stack down to the thread's root: the CPU timer is
//! armed at birth and the stack bounds are learnt inside the thread, not from a first leaf-only sample.
//! Threads that do not register are measured beside them (printed, not asserted: how much of their
//! life the collector misses depends on when its rescan falls).
//!
//! Its own test binary: it runs a CPU profile.
//!   cargo test -p nl6-profile --test engine_pool_threads
mod support;

use nl6_profile::symbols::symbolize;
use nl6_profile::{cpu, threads};
use std::hint::black_box;
use std::time::Duration;

/// Pool threads per kind, run one after another.
const WORKERS: usize = 6;
/// CPU time each worker spins.
const SPIN: Duration = Duration::from_millis(60);
const HZ: u32 = 250;

#[inline(never)]
fn spin_for(cpu: Duration) -> u64 {
    let start = support::thread_cpu();
    let mut x = 1u64;
    while support::thread_cpu() - start < cpu {
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    black_box(x)
}

/// A pool worker that registers itself (its start and stop hooks).
#[inline(never)]
fn registered_worker() -> u64 {
    threads::on_thread_start();
    let x = registered_spin();
    threads::on_thread_stop();
    x
}

#[inline(never)]
fn registered_spin() -> u64 {
    black_box(spin_for(SPIN))
}

/// A pool worker that does not.
#[inline(never)]
fn unregistered_worker() -> u64 {
    black_box(unregistered_spin())
}

#[inline(never)]
fn unregistered_spin() -> u64 {
    black_box(spin_for(SPIN))
}

/// (samples, samples whose stack reaches the thread's root) among samples whose stack holds `marker`.
fn samples_of(profile: &cpu::CpuProfile, marker: &str) -> (u64, u64, u64) {
    let (mut all, mut rooted, mut leaf_only) = (0, 0, 0);
    for s in &profile.samples {
        let names: Vec<String> = s.stack.iter().filter_map(|a| symbolize(a - 1)).collect();
        let leaf = s
            .stack
            .first()
            .and_then(|a| symbolize(*a))
            .unwrap_or_default();
        let mine = leaf.ends_with(marker) || names.iter().any(|n| n.ends_with(marker));
        if !mine {
            continue;
        }
        all += s.count;
        if names.iter().any(|n| n.contains("thread_start")) {
            rooted += s.count;
        }
        if s.stack.len() == 1 {
            leaf_only += s.count;
        }
    }
    (all, rooted, leaf_only)
}

#[test]
fn registered_pool_threads_are_sampled_from_birth_with_whole_stacks() {
    let session = cpu::start(HZ).expect("CPU profiler");
    for _ in 0..WORKERS {
        std::thread::spawn(registered_worker).join().unwrap();
        std::thread::spawn(unregistered_worker).join().unwrap();
    }
    let profile = session.stop();
    let expected = WORKERS as u64 * SPIN.as_nanos() as u64 * u64::from(HZ) / 1_000_000_000;
    let (reg, reg_rooted, reg_leaf) = samples_of(&profile, "::registered_spin");
    let (unreg, unreg_rooted, unreg_leaf) = samples_of(&profile, "::unregistered_spin");
    eprintln!(
        "FIGURE pool threads ({WORKERS} × {SPIN:?} of CPU at {HZ} Hz, {expected} samples expected): \
         registered {reg} sampled, {reg_rooted} reaching the thread root, {reg_leaf} leaf only; \
         unregistered {unreg} sampled, {unreg_rooted} reaching the root, {unreg_leaf} leaf only"
    );
    assert!(
        reg * 100 >= expected * 70,
        "registered workers: {reg} samples of {expected} expected: not sampled from birth"
    );
    assert_eq!(
        reg_rooted, reg,
        "registered workers: {} of {reg} samples do not reach the thread root ({reg_leaf} leaf only)",
        reg - reg_rooted
    );
}
