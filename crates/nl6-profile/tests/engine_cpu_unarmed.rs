//! Threads the CPU sampler cannot arm are counted, named and reported, never silently absent: this test
//! binary runs itself again under `setpriv` (a uid nothing else uses, so no other process's timers count
//! against it) and `prlimit --sigpending`, where the kernel refuses `timer_create` past the limit.
//! - limit 4: a profile starts with 4 timers; its coverage, its note (the comment every encoded profile
//!   carries), `sampler_gaps()` and one log line count the others and name them, with the cause.
//! - limit 0: no timer at all: the start fails with the cause and the remedy.
//!
//! Needs root (setpriv), as nl6's `serve_pull_low_limits`.
mod support;
use nl6_profile::cpu;
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const CHILD: &str = "NL6_UNARMED_CHILD";
const SPINNERS: usize = 10;

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn sink(line: &str) {
    LOG.lock().unwrap().push(line.to_string());
}

/// Runs `test` of this binary again under `prlimit --sigpending=limit` as a fresh uid; returns its output.
fn run_limited(test: &str, limit: u32) -> String {
    let uid = (61_000 + (std::process::id() % 2_000) * 2 + limit.min(1)).to_string();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"])
        .arg("prlimit")
        .arg(format!("--sigpending={limit}:{limit}"))
        .arg("--")
        .arg(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, limit.to_string())
        .output()
        .expect("setpriv and prlimit (util-linux) run this test as root");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the limited run failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the limited run ran nothing:\n{text}"
    );
    text
}

#[test]
fn threads_refused_a_timer_are_counted_named_and_logged() {
    if std::env::var(CHILD).as_deref() != Ok("4") {
        let out = run_limited("threads_refused_a_timer_are_counted_named_and_logged", 4);
        assert!(out.contains("limited run checked"), "{out}");
        return;
    }
    nl6_profile::notes::set_log_sink(sink);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for i in 0..SPINNERS {
            let stop = &stop;
            std::thread::Builder::new()
                .name(format!("spin-{i}"))
                .spawn_scoped(s, move || {
                    while !stop.load(Ordering::Relaxed) {
                        black_box(i.wrapping_mul(31));
                    }
                })
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let session = cpu::start(100).expect("4 timers fit under the limit");
        // The collector logs at its first tick (100 ms).
        let deadline = Instant::now() + Duration::from_secs(3);
        while LOG.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let gaps = nl6_profile::sampler_gaps();
        let profile = session.stop();
        stop.store(true, Ordering::Relaxed);

        let coverage = &profile.coverage;
        let threads = SPINNERS + 3; // the spinners, the harness's main and test threads, the collector
        assert!(
            coverage.unarmed.len() + 4 >= threads && coverage.unarmed.len() < threads,
            "{coverage:?}"
        );
        assert!(coverage.threads_seen >= threads, "{coverage:?}");
        assert!(
            coverage.unarmed.values().all(|t| t.errno == libc::EAGAIN),
            "{coverage:?}"
        );
        let unarmed_spinners = coverage
            .unarmed
            .values()
            .filter(|t| t.name.starts_with("spin-"))
            .count();
        assert!(unarmed_spinners >= SPINNERS - 4, "{coverage:?}");
        let note = coverage.note().expect("a note when threads are unarmed");
        let count = format!(
            "on {} of {} threads",
            coverage.unarmed.len(),
            coverage.threads_seen
        );
        for part in [count.as_str(), "RLIMIT_SIGPENDING", "ulimit -i", "spin-"] {
            assert!(note.contains(part), "{part} missing: {note}");
        }
        assert!(
            gaps.iter()
                .any(|g| g.starts_with("cpu profile: ") && g.contains("could not arm")),
            "{gaps:?}"
        );
        let log = LOG.lock().unwrap();
        assert_eq!(log.len(), 1, "one line per profile: {log:?}");
        assert!(log[0].contains("could not arm"), "{log:?}");
    });
    println!("limited run checked");
}

#[test]
fn no_timer_at_all_fails_the_start_with_the_cause() {
    if std::env::var(CHILD).as_deref() != Ok("0") {
        let out = run_limited("no_timer_at_all_fails_the_start_with_the_cause", 0);
        assert!(out.contains("limited run checked"), "{out}");
        return;
    }
    let timers_before = support::proc_timers();
    let err = cpu::start(100).expect_err("no timer can be created");
    let text = err.to_string();
    assert!(matches!(err, cpu::CpuError::Os { .. }), "{err:?}");
    assert!(
        text.starts_with("timer_create: ") && text.contains("RLIMIT_SIGPENDING"),
        "{text}"
    );
    // The OS's error itself is kept as the source, not only its text.
    let source = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error source: {err:?}"));
    assert_eq!(source.raw_os_error(), Some(libc::EAGAIN), "{source:?}");
    assert!(!cpu::is_running(), "the failed start left a session");
    assert_eq!(
        support::proc_timers(),
        timers_before,
        "the failed start leaked timers"
    );
    println!("limited run checked");
}
