//! nl6's CPU sampler vs pprof-rs 0.15 (frame-pointer unwinder) at 100 Hz on a CPU-bound 2-thread
//! workload: interleaved runs of (no profiler, nl6, pprof-rs, no profiler again), median ratios of wall
//! and process CPU time against the first, samples each profiler reports, and the RSS each adds once
//! started. The second unprofiled run ("A/A") shows how far the machine's noise alone moves the ratios.
//! The workload is `benches/support/spin_workload.rs`, the one `cpu_overhead` times: its threads are
//! spawned through nl6's `spawn_recorded` in every mode, so nl6 arms them at birth (pprof-rs's
//! process-wide timer covers them anyway).
use std::time::Duration;

mod handler;

#[path = "../../support/spin_workload.rs"]
mod spin_workload;
use spin_workload::{calibrated_rounds, median, vm_rss_kb, workload};

#[derive(Clone, Copy, Debug)]
enum Mode {
    None,
    Nl6,
    PprofRs,
    AA,
}

fn run(mode: Mode, rounds: u64) -> ((Duration, Duration), u64) {
    match mode {
        Mode::None | Mode::AA => (workload(rounds), 0),
        Mode::Nl6 => {
            let s = nl6_profile::cpu::start(100).expect("nl6 start");
            let r = workload(rounds);
            let p = s.stop();
            (r, p.samples.iter().map(|s| s.count).sum())
        }
        Mode::PprofRs => {
            let guard = pprof::ProfilerGuardBuilder::default()
                .frequency(100)
                .build()
                .expect("pprof-rs start");
            let r = workload(rounds);
            let report = guard.report().build().expect("pprof-rs report");
            (r, report.data.values().map(|v| *v as u64).sum())
        }
    }
}

fn main() {
    // `handler [rounds]`: the SIGPROF handler's cost per sample, nl6's and pprof-rs's (`handler.rs`).
    if std::env::args().nth(1).as_deref() == Some("handler") {
        let rounds = std::env::args()
            .nth(2)
            .and_then(|a| a.parse().ok())
            .unwrap_or(50);
        return handler::main(rounds);
    }
    let rounds = calibrated_rounds();
    let pairs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let modes = [Mode::None, Mode::Nl6, Mode::PprofRs, Mode::AA];
    let mut wall = [vec![], vec![], vec![], vec![]];
    let mut cpu = [vec![], vec![], vec![], vec![]];
    let mut samples = [0u64; 4];
    for i in 0..pairs {
        let mut got = [(Duration::ZERO, Duration::ZERO); 4];
        for k in 0..4 {
            let m = (i + k) % 4; // rotate the order every round
            let (r, n) = run(modes[m], rounds);
            got[m] = r;
            samples[m] += n;
        }
        for m in 1..4 {
            wall[m].push(got[m].0.as_secs_f64() / got[0].0.as_secs_f64());
            cpu[m].push(got[m].1.as_secs_f64() / got[0].1.as_secs_f64());
        }
    }
    println!("2 CPU-bound threads, {pairs} rounds of (none, nl6, pprof-rs, none again) at 100 Hz, ~{rounds} iterations per thread");
    for m in 1..4 {
        println!(
            "  {:<8} wall ratio {:.4} ({:+.2} %)  cpu ratio {:.4} ({:+.2} %)  samples {}",
            format!("{:?}", modes[m]),
            median(wall[m].clone()),
            (median(wall[m].clone()) - 1.0) * 100.0,
            median(cpu[m].clone()),
            (median(cpu[m].clone()) - 1.0) * 100.0,
            samples[m]
        );
    }
    // RSS added once started (each measured after a busy run under that profiler).
    for mode in [Mode::Nl6, Mode::PprofRs] {
        let before = vm_rss_kb();
        let _ = run(mode, rounds);
        println!(
            "  {:<8} RSS after one profiled run: +{} kB",
            format!("{mode:?}"),
            vm_rss_kb().saturating_sub(before)
        );
    }
}
