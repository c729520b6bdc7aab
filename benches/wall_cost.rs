//! What a wall-clock profile costs: `cargo bench --bench wall_cost` (`NL6_BENCH_SECS`, default 3;
//! `NL6_BENCH_THREADS`, comma-separated thread counts, default `22,200,2000`).
//!
//! For each count of parked threads (22, 200 and 2 000 by default) (blocked on a condition variable, as most of nl6's are), three
//! windows of the same length side by side: no profile, a 99 Hz wall-clock profile with the default cap
//! (`wall::DEFAULT_MAX_THREADS` a tick), and one with no cap (every thread every tick). The process CPU
//! each window used beyond the idle one is the sampler's; divided by the stacks it took, that is the cost
//! per thread sampled. Printed per row: stacks taken, extra CPU as a share of one core, µs per stack.
use nl6_profile::wall::{self, WallConfig};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

fn process_cpu() -> Duration {
    // SAFETY: writes one rusage we own.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// Process CPU over `secs` with `config` running (None: no profile), and the stacks taken.
fn window(secs: u64, config: Option<WallConfig>) -> (Duration, u64) {
    let cpu0 = process_cpu();
    let session = config.map(|c| wall::start_with(c).expect("a wall-clock session"));
    std::thread::sleep(Duration::from_secs(secs));
    let stacks = session.map_or(0, |s| s.stop().samples.iter().map(|x| x.count).sum());
    (process_cpu() - cpu0, stacks)
}

/// `NL6_BENCH_THREADS` (ascending, each ≥ 2), or 22, 200 and 2 000.
fn thread_counts() -> Vec<usize> {
    let Ok(text) = std::env::var("NL6_BENCH_THREADS") else {
        return vec![22, 200, 2000];
    };
    let mut counts: Vec<usize> = text
        .split(',')
        .map(|c| match c.trim().parse::<usize>() {
            Ok(n) if n >= 2 => n,
            _ => panic!("NL6_BENCH_THREADS={text:?}: {c:?} is not a thread count of at least 2"),
        })
        .collect();
    counts.sort_unstable();
    counts
}

fn main() {
    let secs: u64 = std::env::var("NL6_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let counts = thread_counts();
    let park = Arc::new((Mutex::new(false), Condvar::new()));
    let mut handles = Vec::new();
    println!("threads | profile | stacks taken | extra CPU (% of a core) | µs per stack");
    for target in counts {
        while handles.len() + 1 < target {
            let p = park.clone();
            handles.push(
                nl6_profile::threads::spawn_recorded("parked", move || {
                    let (m, cv) = &*p;
                    let mut done = m.lock().unwrap();
                    while !*done {
                        done = cv.wait(done).unwrap();
                    }
                })
                .unwrap(),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
        let (idle, _) = window(secs, None);
        for (name, cap) in [("capped", wall::DEFAULT_MAX_THREADS), ("uncapped", target)] {
            let (cpu, stacks) = window(secs, Some(WallConfig::default().max_threads(cap)));
            let extra = cpu.saturating_sub(idle);
            println!(
                "{target} | {name} (cap {cap}) | {stacks} | {:.2} % | {:.1}",
                extra.as_secs_f64() / secs as f64 * 100.0,
                extra.as_secs_f64() * 1e6 / stacks.max(1) as f64
            );
        }
    }
    *park.0.lock().unwrap() = true;
    park.1.notify_all();
    for h in handles {
        h.join().unwrap();
    }
}
