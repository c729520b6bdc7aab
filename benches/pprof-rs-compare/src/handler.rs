//! Per-sample cost of the SIGPROF handler, nl6's beside pprof-rs's, in one binary: each profiler runs
//! (at 1 Hz, so its own timer adds nothing) while the thread sends itself SIGPROF with `tgkill` from the
//! bottom of a chain of [`DEPTH`] Rust frames, so each sample unwinds the same stack under libc's
//! frameless `syscall` wrapper. Wall time per signal is printed; for instruction counts run it under
//! callgrind and divide each handler's inclusive count by the signals it took:
//!   valgrind --tool=callgrind --callgrind-out-file=cg.out <binary> handler 5
//!   callgrind_annotate --inclusive=yes cg.out | grep -E 'on_sigprof|perf_signal_handler'
use std::hint::black_box;
use std::time::Instant;

#[path = "../../support/self_signal.rs"]
mod self_signal;
use self_signal::{nested, BATCH, DEPTH};

fn ns_per_signal(rounds: u32) -> f64 {
    let t0 = Instant::now();
    for _ in 0..rounds {
        black_box(nested(DEPTH, BATCH));
    }
    t0.elapsed().as_nanos() as f64 / f64::from(rounds * BATCH)
}

pub fn main(rounds: u32) {
    let mut session = nl6_profile::cpu::start(1).expect("nl6 start");
    let taken0 = nl6_profile::cpu::signals_taken();
    let (mut nl6, mut frames, mut samples) = (0.0, 0u64, 0u64);
    // One round at a time, the ring drained between rounds (as the collector does), so no sample is lost.
    for _ in 0..rounds {
        nl6 += ns_per_signal(1) / f64::from(rounds);
        for s in session.take_window().samples {
            frames += s.stack.len() as u64 * s.count;
            samples += s.count;
        }
    }
    let nl6_taken = nl6_profile::cpu::signals_taken() - taken0;
    drop(session);
    let nl6_frames = frames as f64 / samples.max(1) as f64;

    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(1)
        .build()
        .expect("pprof-rs start");
    let pprof = ns_per_signal(rounds);
    let report = guard.report().build().expect("pprof-rs report");
    let pprof_taken: isize = report.data.values().sum();
    let pprof_frames = report
        .data
        .iter()
        .map(|(f, n)| f.frames.len() as f64 * *n as f64)
        .sum::<f64>()
        / pprof_taken.max(1) as f64;
    println!(
        "{rounds} rounds of {BATCH} self-signals at depth {DEPTH}: nl6 {nl6:.0} ns per signal ({nl6_taken} samples, \
         {nl6_frames:.1} frames each), pprof-rs {pprof:.0} ns per signal ({pprof_taken} samples, {pprof_frames:.1} frames each)"
    );
}
