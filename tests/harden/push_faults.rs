//! Hardening: collector faults, through the real binary pushing every second.
//!
//! Six faults, each in its own thread with its own nl6 and collector (so the suite takes as long as the
//! slowest case, the hang): the stand-in answering 401, 413 and 500; the stand-in hanging 12 s (longer
//! than the 10 s upload timeout); a refused connection; a listener that resets the connection mid-body
//! (SO_LINGER 0). For each: `GET /api/v1/profiling` keeps answering 200 within 1 s, `sdk_errors` counts
//! every failed upload, `last_error` says what failed, exactly one `push to … failing` log line per push,
//! and closing the gate returns within 21 s.
use crate::common;
use crate::harden_support;
use crate::push_support;

use common::wait_until;
use harden_support::ResetServer;
use push_support::StandIn;
use serde_json::Value;
use std::time::{Duration, Instant};

enum Collector {
    StandIn(StandIn),
    Reset(ResetServer),
    Refused(String),
}

impl Collector {
    fn url(&self) -> String {
        match self {
            Collector::StandIn(s) => s.url(),
            Collector::Reset(r) => r.url(),
            Collector::Refused(u) => u.clone(),
        }
    }
    /// Uploads the collector has seen fail so far (None: it cannot tell).
    fn failures_seen(&self) -> Option<u64> {
        match self {
            Collector::StandIn(s) => Some(s.requests().len() as u64),
            Collector::Reset(r) => Some(r.connections.load(std::sync::atomic::Ordering::SeqCst)),
            Collector::Refused(_) => None,
        }
    }
}

struct Outcome {
    name: &'static str,
    sdk_errors: u64,
    seen: Option<u64>,
    last_error: String,
    worst_get: Duration,
    close: Duration,
}

fn state(n: &common::Nl6) -> (Value, Duration) {
    let t = Instant::now();
    let (s, _, b) = n.http_with("GET", "/api/v1/profiling", &[], b"", Duration::from_secs(5));
    assert_eq!(s, 200);
    (common::json(&b)["data"].clone(), t.elapsed())
}

/// Runs one fault case; `min_errors` is how many failures to wait for, `error_has` what `last_error`
/// must contain.
fn run_case(
    name: &'static str,
    collector: Collector,
    min_errors: u64,
    error_has: &[&str],
) -> Outcome {
    let url = collector.url();
    let n = common::boot()
        .args(&[
            "-profiling-pyroscope",
            &url,
            "-profiling-upload-interval",
            "1s",
        ])
        .start();
    let mut worst_get = Duration::ZERO;
    let mut last = Value::Null;
    let ok = wait_until(Duration::from_secs(40), || {
        let (v, took) = state(&n);
        worst_get = worst_get.max(took);
        last = v;
        last["sdk_errors"].as_u64().unwrap_or(0) >= min_errors
    });
    assert!(
        ok,
        "{name}: sdk_errors stayed at {}: {last}",
        last["sdk_errors"]
    );
    // Serving continues: a pull profile too.
    let (s, _, _) = n.http("GET", "/debug/pprof/heap", b"");
    assert_eq!(s, 200, "{name}: heap while the push fails");
    // Counted against what the collector saw: uploads are sequential, so at most one is in flight
    // between the collector answering and the push counting it.
    let seen_before = collector.failures_seen();
    let (v, took) = state(&n);
    worst_get = worst_get.max(took);
    let seen_after = collector.failures_seen();
    let sdk_errors = v["sdk_errors"].as_u64().unwrap();
    assert_eq!(v["pushing"], true, "{name}: {v}");
    assert_eq!(v["uploads"], 0, "{name}: {v}");
    if let (Some(a), Some(b)) = (seen_before, seen_after) {
        assert!(
            sdk_errors + 1 >= a && sdk_errors <= b + 1,
            "{name}: sdk_errors {sdk_errors}, collector saw {a}..{b} failed uploads"
        );
    }
    let last_error = v["last_error"].as_str().unwrap_or("").to_string();
    assert!(
        error_has
            .iter()
            .any(|w| last_error.to_lowercase().contains(w)),
        "{name}: last_error {last_error:?} has none of {error_has:?}"
    );
    // Closing the gate: bounded by the flush budget (two upload timeouts), plus slack for the POST.
    let t = Instant::now();
    let (s, _, b) = n.http_with(
        "POST",
        "/api/v1/profiling",
        &[],
        br#"{"enabled":false}"#,
        Duration::from_secs(30),
    );
    let close = t.elapsed();
    assert_eq!(s, 200, "{name}: {}", String::from_utf8_lossy(&b));
    assert!(
        close < Duration::from_secs(21),
        "{name}: closing took {close:?}"
    );
    let failing = n.log_lines("[profiling] push to ");
    let failing: Vec<_> = failing
        .iter()
        .filter(|l| l.contains(" failing: "))
        .collect();
    assert_eq!(failing.len(), 1, "{name}: {failing:?}\n{}", n.stderr());
    assert!(!n.stderr().contains("panicked"), "{name}: {}", n.stderr());
    assert!(
        worst_get < Duration::from_secs(1),
        "{name}: GET took {worst_get:?}"
    );
    drop(collector);
    Outcome {
        name,
        sdk_errors,
        seen: seen_after,
        last_error,
        worst_get,
        close,
    }
}

#[test]
fn collector_faults_in_parallel() {
    let started = Instant::now();
    type Case = (
        &'static str,
        fn() -> Collector,
        u64,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            "401",
            || Collector::StandIn(StandIn::start(&["-fail-status", "401"])),
            3,
            &["401"],
        ),
        (
            "413",
            || Collector::StandIn(StandIn::start(&["-fail-status", "413"])),
            3,
            &["413"],
        ),
        (
            "500",
            || Collector::StandIn(StandIn::start(&["-fail-status", "500"])),
            3,
            &["500"],
        ),
        (
            "hang 12s",
            || Collector::StandIn(StandIn::start(&["-delay", "12s"])),
            1,
            &["time", "timeout", "timed out"],
        ),
        (
            "refused",
            || Collector::Refused(common::unused_loopback_url()),
            3,
            &["refused", "connect"],
        ),
        (
            "reset mid-body",
            || Collector::Reset(ResetServer::start(200)),
            3,
            &["reset", "broken", "closed", "connection", "eof", "io"],
        ),
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|(name, make, min, has)| std::thread::spawn(move || run_case(name, make(), min, has)))
        .collect();
    let mut failures = Vec::new();
    for h in handles {
        match h.join() {
            Ok(o) => eprintln!(
                "FIGURE fault {:<15} sdk_errors {:>3} (collector saw {:?}), worst GET {:?}, close {:?}, last_error {:?}",
                o.name, o.sdk_errors, o.seen, o.worst_get, o.close, o.last_error
            ),
            Err(e) => failures.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    eprintln!(
        "FIGURE faults: 6 cases in parallel in {:?}",
        started.elapsed()
    );
}
