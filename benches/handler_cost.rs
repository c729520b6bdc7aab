//! Per-sample cost of the CPU sampler's SIGPROF handler (signal entry to ring slot written):
//! `cargo bench --bench handler_cost` (add `--target x86_64-unknown-linux-musl` for the static build).
//!
//! The thread sends itself SIGPROF with `tgkill` from the bottom of a chain of [`DEPTH`] Rust frames, so
//! every sample is taken inside libc's `syscall` wrapper (a frameless leaf: its caller comes from its CFI
//! rule, a binary search in libc's table, and every frame up to the thread's root is looked up) under a
//! real frame-pointer chain. Two figures, in rounds of
//! [`BATCH`] signals (the collector drains the ring between rounds, so no sample is lost):
//! - ns per signal with an empty handler installed (kernel delivery and return alone);
//! - ns per signal with nl6's handler and a running session (`cpu::start(1)`: its own 1 Hz timers add
//!   nothing measurable). The difference is the handler's cost; the median over rounds is printed.
//!
//! Wall time on a loaded machine is noisy; for instruction counts run the bench binary under callgrind
//! and read the handler's inclusive count (command printed at the end).
use nl6_profile::cpu;
use std::hint::black_box;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

#[path = "support/self_signal.rs"]
mod self_signal;
use self_signal::{nested, BATCH, DEPTH};

extern "C" fn empty_handler(_: c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

fn install_empty_handler() {
    // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler, same flags as nl6's.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = empty_handler as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()),
            0
        );
    }
}

/// ns per signal of one round.
fn round() -> f64 {
    let t0 = Instant::now();
    black_box(nested(DEPTH, BATCH));
    t0.elapsed().as_nanos() as f64 / f64::from(BATCH)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("NL6_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    install_empty_handler();
    let empty = median((0..rounds).map(|_| round()).collect());
    // The empty handler is this program's own: the engine takes SIGPROF from it only when told to.
    nl6_profile::set_signal_options(&nl6_profile::SignalOptions::default().take_foreign(true))
        .expect("signal options");
    let mut session = cpu::start(1).expect("cpu profile");
    let taken0 = cpu::signals_taken();
    let mut with = Vec::with_capacity(rounds);
    let (mut lost, mut frames, mut samples) = (0, 0u64, 0u64);
    for _ in 0..rounds {
        with.push(round());
        let w = session.take_window();
        lost += w.lost;
        for s in &w.samples {
            frames += s.stack.len() as u64 * s.count;
            samples += s.count;
        }
    }
    let taken = cpu::signals_taken() - taken0;
    drop(session);
    std::thread::sleep(Duration::from_millis(10));
    let with = median(with);
    println!(
        "handler_cost: {rounds} rounds of {BATCH} self-signals at depth {DEPTH}: empty handler {empty:.0} ns, \
         nl6 handler {with:.0} ns per signal => handler {:.0} ns per sample ({taken} samples, {lost} lost, \
         {:.1} frames per sample)",
        with - empty,
        frames as f64 / samples.max(1) as f64
    );
    println!(
        "instructions: NL6_BENCH_ROUNDS=5 valgrind --tool=callgrind <this binary>, then \
         callgrind_annotate --inclusive=yes: on_sigprof's Ir / {} signals",
        5 * BATCH
    );
}
