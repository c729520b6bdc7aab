//! The cap's weighting against the wall clock: with more threads than the cap, each tick samples only
//! `cap` of them and weights each sample up, so a profile's time must still add up to every thread's
//! time over the session, as an independent clock (`Instant`, the thread count from `/proc`) measures it.
//!   cargo test -p nl6-profile --test engine_wall_cap
use nl6_profile::wall::{self, WallConfig};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// This process's threads now, from the kernel (`/proc/self/task`).
fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn capped_totals_add_up_to_every_threads_wall_time() {
    const PARKED: usize = 40;
    const CAP: usize = 4;
    let park = Arc::new((Mutex::new(false), Condvar::new()));
    let handles: Vec<_> = (0..PARKED)
        .map(|_| {
            let p = park.clone();
            std::thread::spawn(move || {
                let (m, cv) = &*p;
                let mut done = m.lock().unwrap();
                while !*done {
                    done = cv.wait(done).unwrap();
                }
            })
        })
        .collect();
    let before = threads_now();
    let started = Instant::now();
    let session = wall::start_with(WallConfig::default().max_threads(CAP)).expect("a session");
    std::thread::sleep(Duration::from_secs(2));
    let profile = session.stop();
    let elapsed = started.elapsed();
    let after = threads_now();
    *park.0.lock().unwrap() = true;
    park.1.notify_all();
    for h in handles {
        h.join().unwrap();
    }
    // Every thread but the sampler, over the ticks taken (a tick stands for one period of each).
    assert_eq!(before, after, "the thread count moved during the session");
    let sampled_threads = before as u64; // the sampler is not counted before it starts
    let total: u64 = profile.samples.iter().map(|s| s.nanos).sum();
    let stacks: u64 = profile.samples.iter().map(|s| s.count).sum();
    let want = profile.ticks * profile.period_ns * sampled_threads;
    assert!(profile.ticks > 50, "{} ticks in {elapsed:?}", profile.ticks);
    assert_eq!(
        profile.capped_ticks, profile.ticks,
        "every tick had more threads than the cap"
    );
    assert_eq!(stacks, profile.ticks * CAP as u64, "cap stacks a tick");
    let off = (total as f64 - want as f64).abs() / want as f64;
    assert!(
        off < 0.01,
        "weighted {total} ns, want {want} ns ({off:.4} off)"
    );
    // And against the wall clock: the ticks cover the session, no tick counted twice.
    let wall_total = elapsed.as_nanos() as f64 * sampled_threads as f64;
    let share = total as f64 / wall_total;
    assert!(
        (0.5..=1.02).contains(&share),
        "weighted {total} ns is {share:.3} of {sampled_threads} threads × {elapsed:?}"
    );
}
