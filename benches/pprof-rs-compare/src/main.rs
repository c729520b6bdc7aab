//! nl6's CPU sampler vs pprof-rs 0.15 (frame-pointer unwinder) at 100 Hz on a CPU-bound 2-thread
//! workload: interleaved runs of (no profiler, nl6, pprof-rs, no profiler again), median ratios of wall
//! and process CPU time against the first, samples each profiler reports, and the RSS each adds once
//! started. The second unprofiled run ("A/A") shows how far the machine's noise alone moves the ratios.
//! Workload threads are spawned through nl6's `spawn_recorded` in every mode, so nl6 arms them at birth
//! (pprof-rs's process-wide timer covers them anyway); a plain `std::thread::spawn` thread waits up to
//! 100 ms for nl6's rescan and would make nl6 look cheaper than it is.
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn spin(mut x: u64, rounds: u64) -> u64 {
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn workload(rounds: u64) -> (Duration, Duration) {
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let hs: Vec<_> = (0..2u64)
        .map(|i| {
            nl6::profiling::threads::spawn_recorded("bench-spin", move || {
                black_box(spin(i + 1, rounds))
            })
            .expect("spawn")
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    (t0.elapsed(), process_cpu() - cpu0)
}

fn process_cpu() -> Duration {
    // SAFETY: writes one rusage we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

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
            let s = nl6::profiling::cpu::start(100).expect("nl6 start");
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
    let mut rounds = 10_000_000u64;
    while workload(rounds).0 < Duration::from_millis(500) {
        rounds *= 2;
    }
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
