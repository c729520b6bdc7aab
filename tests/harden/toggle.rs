//! Hardening: a toggle storm against the real binary.
//!
//! 1000 random transitions (push to stand-in A, re-target to stand-in B, off, pull-only; a third of them
//! with a revert after 10–500 ms) from 4 concurrent clients, while 2 clients scrape /debug/pprof/* (heap,
//! goroutine, allocs, delta_heap, profile?seconds=1 — 200, or the documented 503 while the gate is closed
//! and 500 while the CPU sampler is busy). Checks:
//! - no deadlock: every request has a timeout and the storm ends within its time budget;
//! - every answer has the documented shape and is internally consistent (closed ⇒ not pushing and no
//!   address; pushing ⇒ the address is A or B; `revert_at` iff `revert_pending`);
//! - consistency with the last transition: first a sequential phase (one client, each GET must show
//!   exactly what its POST asked), then after the storm a quiescent check (the last POST wins, and it
//!   cancels every pending revert);
//! - no thread leak: the thread count returns to its closed-gate baseline;
//! - mutex and block profiles are still empty.
use crate::common;
use crate::harden_support;
use crate::push_support;

use common::{threads_of, wait_until};
use harden_support::Rng;
use prost::Message;
use push_support::StandIn;
use serde_json::Value;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TRANSITIONS: usize = 1000;
const TOGGLERS: usize = 4;

fn check_shape(v: &Value, a: &str, b: &str) -> Result<(), String> {
    let d = &v["data"];
    let enabled = d["enabled"].as_bool().ok_or("enabled")?;
    let pushing = d["pushing"].as_bool().ok_or("pushing")?;
    let address = d["server_address"].as_str().ok_or("server_address")?;
    let pending = d["revert_pending"].as_bool().ok_or("revert_pending")?;
    d["sdk_errors"].as_u64().ok_or("sdk_errors")?;
    if d["pprof_path"] != "/debug/pprof/" {
        return Err("pprof_path".into());
    }
    if !enabled && (pushing || !address.is_empty()) {
        return Err("closed but pushing or addressed".into());
    }
    if pushing && address != a && address != b {
        return Err(format!("pushing to {address:?}"));
    }
    if pending != d.get("revert_at").is_some() {
        return Err("revert_at without revert_pending (or the reverse)".into());
    }
    Ok(())
}

/// One random transition body: (body, wanted enabled, wanted address).
fn transition(r: &mut Rng, a: &str, b: &str, with_revert: bool) -> String {
    let base = match r.below(4) {
        0 => format!(r#""enabled":true,"server_address":"{a}""#),
        1 => format!(r#""enabled":true,"server_address":"{b}""#),
        2 => r#""enabled":false"#.to_string(),
        _ => r#""enabled":true,"server_address":"""#.to_string(),
    };
    if with_revert {
        format!(r#"{{{base},"duration":"{}ms"}}"#, 10 + r.below(491))
    } else {
        format!("{{{base}}}")
    }
}

fn post(n: &common::Nl6, body: &str) -> Value {
    let (s, _, b) = n.http_with(
        "POST",
        "/api/v1/profiling",
        &[],
        body.as_bytes(),
        Duration::from_secs(25),
    );
    assert_eq!(s, 200, "{body}: {}", String::from_utf8_lossy(&b));
    common::json(&b)
}

fn get(n: &common::Nl6) -> Value {
    let (s, _, b) = n.http_with("GET", "/api/v1/profiling", &[], b"", Duration::from_secs(5));
    assert_eq!(s, 200);
    common::json(&b)
}

fn sample_count(gz: &[u8]) -> usize {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .expect("gzip");
    nl6_profile::proto::Profile::decode(raw.as_slice())
        .expect("pprof")
        .sample
        .len()
}

#[test]
fn toggle_storm() {
    let (sa, sb) = (StandIn::start(&[]), StandIn::start(&[]));
    let (a, b) = (sa.url(), sb.url());
    let n = Arc::new(
        common::boot()
            .args(&["-profiling-upload-interval", "1s"])
            .start(),
    );
    let pid = n.pid();
    std::thread::sleep(Duration::from_millis(300));
    let baseline = threads_of(pid);
    let started = Instant::now();

    // Phase 1: one client, sequential: each GET shows exactly what its POST asked for.
    let mut r = Rng::new(0x746f_6767);
    for i in 0..40 {
        let body = transition(&mut r, &a, &b, false);
        let answer = post(&n, &body);
        let now = get(&n);
        check_shape(&now, &a, &b).unwrap_or_else(|e| panic!("{body}: {e}: {now}"));
        assert_eq!(answer["data"], now["data"], "step {i}: {body}");
        let want: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(now["data"]["enabled"], want["enabled"], "{body}: {now}");
        if let Some(addr) = want["server_address"].as_str() {
            assert_eq!(now["data"]["server_address"], addr, "{body}: {now}");
            assert_eq!(now["data"]["pushing"], !addr.is_empty(), "{body}: {now}");
        }
    }

    // Phase 2: the storm.
    let done = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scrapers: Vec<_> = (0..2)
        .map(|k| {
            let (n, done, scrapes) = (n.clone(), done.clone(), scrapes.clone());
            std::thread::spawn(move || {
                let paths = [
                    "heap",
                    "goroutine",
                    "allocs",
                    "delta_heap",
                    "profile?seconds=1",
                ];
                let mut i = k;
                while !done.load(Ordering::SeqCst) {
                    let path = paths[i % paths.len()];
                    i += 1;
                    let (s, _, body) = n.http_with(
                        "GET",
                        &format!("/debug/pprof/{path}"),
                        &[],
                        b"",
                        Duration::from_secs(30),
                    );
                    let ok = match s {
                        200 => !body.is_empty(),
                        503 => String::from_utf8_lossy(&body).contains("/api/v1/profiling"),
                        500 => {
                            path.starts_with("profile")
                                && String::from_utf8_lossy(&body).contains("already in use")
                        }
                        _ => false,
                    };
                    assert!(ok, "{path}: {s} {}", String::from_utf8_lossy(&body));
                    scrapes.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let togglers: Vec<_> = (0..TOGGLERS)
        .map(|k| {
            let (n, a, b) = (n.clone(), a.clone(), b.clone());
            std::thread::spawn(move || {
                let mut r = Rng::new(0x5354_4f52 + k as u64);
                let deadline = Instant::now() + Duration::from_secs(150);
                for _ in 0..TRANSITIONS / TOGGLERS {
                    assert!(Instant::now() < deadline, "storm overran 150 s (deadlock?)");
                    let revert = r.chance(33);
                    let body = transition(&mut r, &a, &b, revert);
                    let answer = post(&n, &body);
                    check_shape(&answer, &a, &b)
                        .unwrap_or_else(|e| panic!("{body}: {e}: {answer}"));
                    let now = get(&n);
                    check_shape(&now, &a, &b)
                        .unwrap_or_else(|e| panic!("GET after {body}: {e}: {now}"));
                }
            })
        })
        .collect();
    for t in togglers {
        t.join().expect("toggler");
    }
    let storm = started.elapsed();
    done.store(true, Ordering::SeqCst);
    for s in scrapers {
        s.join().expect("scraper");
    }
    let max_threads = threads_of(pid);

    // Quiescent: the last POST wins and cancels every pending revert.
    let last = post(&n, &format!(r#"{{"enabled":true,"server_address":"{b}"}}"#));
    std::thread::sleep(Duration::from_millis(600)); // past the longest revert a storm POST could set
    let now = get(&n);
    assert_eq!(last["data"]["server_address"], b.as_str());
    assert_eq!(now["data"]["enabled"], true, "{now}");
    assert_eq!(now["data"]["pushing"], true, "{now}");
    assert_eq!(now["data"]["server_address"], b.as_str(), "{now}");
    assert_eq!(now["data"]["revert_pending"], false, "{now}");

    // Mutex and block stay empty (nl6 records no contention).
    post(&n, r#"{"enabled":true,"server_address":""}"#);
    for p in ["mutex", "block"] {
        let (s, _, body) = n.http("GET", &format!("/debug/pprof/{p}"), b"");
        assert_eq!(s, 200);
        assert_eq!(sample_count(&body), 0, "{p} has samples after the storm");
    }

    // No thread leak: closed again, the count returns to the baseline (revert timers end within 1 s).
    post(&n, r#"{"enabled":false}"#);
    let back = wait_until(Duration::from_secs(10), || threads_of(pid) == baseline);
    assert!(
        back,
        "threads: baseline {baseline}, now {} after the storm",
        threads_of(pid)
    );
    let lines = n.log_lines("[profiling] ").len();
    assert!(
        lines >= TRANSITIONS,
        "{lines} transition lines for {TRANSITIONS}+ transitions"
    );
    assert!(!n.stderr().contains("panicked"), "{}", n.stderr());
    eprintln!(
        "FIGURE toggle storm: {TRANSITIONS} transitions from {TOGGLERS} clients in {storm:?} ({:.1} ms each), {} scrapes; threads baseline {baseline}, {max_threads} at the end of the storm, back to {baseline}; {lines} log lines; uploads A {} B {}",
        storm.as_secs_f64() * 1000.0 / TRANSITIONS as f64,
        scrapes.load(Ordering::SeqCst),
        sa.requests().len(),
        sb.requests().len()
    );
}
