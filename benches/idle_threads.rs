//! What a running CPU profile costs when the process has many idle threads:
//! `cargo bench --bench idle_threads` (`NL6_BENCH_THREADS`, default 10 000; `NL6_BENCH_SECS`, default 5).
//!
//! The process starts that many idle threads (plain `std::thread::spawn`, so the sampler has to find
//! them itself, blocked on a condition variable) and one worker spinning on a fixed workload. Two windows
//! of the same length, without and with a CPU profile at 100 Hz; in each, the CPU the process used beyond
//! the worker's own thread CPU time is the machinery's (the idle threads use none). Printed:
//! - the profile's extra CPU, as a share of one core (with minus without);
//! - the share of the profile's samples with a frame of the sampler's machinery (`nl6_profile::cpu::`,
//!   `nl6_profile::unwind::`: the collector's rescans and drains).
use nl6_profile::{cpu, symbols::symbolize, threads};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn process_cpu() -> Duration {
    // SAFETY: writes one rusage we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[inline(never)]
fn spin(mut x: u64) -> u64 {
    for _ in 0..1_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Runs the worker for `secs`; returns (process CPU beyond the worker's, wall).
fn window(secs: f64) -> (Duration, Duration) {
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let worker = threads::spawn_recorded("bench-worker", move || {
        let start = thread_cpu();
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut x = 1u64;
        while Instant::now() < end {
            x = black_box(spin(x));
        }
        thread_cpu() - start
    })
    .expect("spawn worker");
    let worker_cpu = worker.join().unwrap();
    let wall = t0.elapsed();
    ((process_cpu() - cpu0).saturating_sub(worker_cpu), wall)
}

fn main() {
    let n: usize = std::env::var("NL6_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let secs: f64 = std::env::var("NL6_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let done = Arc::new(AtomicBool::new(false));
    let idle: Vec<_> = (0..n)
        .map(|_| {
            let (gate, done) = (Arc::clone(&gate), Arc::clone(&done));
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let (lock, cv) = &*gate;
                    let mut open = lock.lock().unwrap();
                    while !*open && !done.load(Ordering::Relaxed) {
                        open = cv.wait(open).unwrap();
                    }
                })
                .expect("spawn idle thread")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    let (base, base_wall) = window(secs);
    let session = cpu::start(100).expect("cpu profile");
    let (with, with_wall) = window(secs);
    let profile = session.stop();

    let total: u64 = profile.samples.iter().map(|s| s.count).sum();
    let names = |s: &cpu::CpuSample| -> Vec<String> {
        s.stack
            .iter()
            .enumerate()
            .filter_map(|(i, a)| symbolize(if i == 0 { *a } else { a.saturating_sub(1) }))
            .collect()
    };
    let is_machinery =
        |f: &String| f.starts_with("nl6_profile::cpu::") || f.starts_with("nl6_profile::unwind::");
    // Arming every thread at start and deleting every timer at stop are paid once per profile; the
    // rest (rescans, drains) is paid all along.
    let once = |f: &String| f == "nl6_profile::cpu::start" || f.ends_with("Timers::delete_all");
    let (mut machinery, mut steady) = (0u64, 0u64);
    for s in &profile.samples {
        let n = names(s);
        if n.iter().any(is_machinery) {
            machinery += s.count;
            steady += u64::from(!n.iter().any(once)) * s.count;
        }
    }
    if std::env::var_os("NL6_BENCH_VERBOSE").is_some() {
        for s in &profile.samples {
            let names: Vec<String> = s
                .stack
                .iter()
                .take(8)
                .map(|a| symbolize(*a).unwrap_or_else(|| format!("{a:#x}")))
                .collect();
            if !names.iter().any(|n| n.contains("spin")) {
                println!("{} {names:?}", s.count);
            }
        }
    }
    let share = |cpu: Duration, wall: Duration| 100.0 * cpu.as_secs_f64() / wall.as_secs_f64();
    println!(
        "idle_threads: {n} idle threads, {secs} s windows: beyond the worker, {:.2} % of a core without \
         the profile, {:.2} % with it => profile costs {:.2} % of one core; machinery frames in {machinery} \
         of {total} samples ({:.2} %; {steady} ({:.2} %) without the start's arming and the stop's deleting)",
        share(base, base_wall),
        share(with, with_wall),
        share(with, with_wall) - share(base, base_wall),
        100.0 * machinery as f64 / total.max(1) as f64,
        100.0 * steady as f64 / total.max(1) as f64
    );
    done.store(true, Ordering::Relaxed);
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    for h in idle {
        h.join().unwrap();
    }
}
