//! Hardening: POSTs that arrive while a closing push flushes to a hanging collector.
//!
//! The collector is a loopback listener that never accepts: connections complete in the kernel's backlog
//! and every upload hangs until its 10 s timeout, so closing the gate takes the full 20 s flush budget.
//! While that closing POST is in flight, 15 more POSTs (with the closer, as many as the server has
//! workers) must each answer 409 with the unchanged state within about a second, and
//! `GET /api/v1/profiling` must answer within 1 s throughout. Before the fix every such POST sat in a
//! worker behind the flush, and GET found no worker left.
use crate::common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn posts_during_a_hanging_flush_answer_409_and_get_stays_fast() {
    let hang = TcpListener::bind("127.0.0.1:0").expect("bind the hanging collector");
    let url = format!("http://{}", hang.local_addr().unwrap());
    let n = Arc::new(
        common::boot()
            .args(&[
                "-profiling-pyroscope",
                &url,
                "-profiling-upload-interval",
                "1s",
            ])
            .start(),
    );
    // Let the first window's uploads start hanging.
    std::thread::sleep(Duration::from_millis(1500));
    let closer = {
        let n = Arc::clone(&n);
        std::thread::spawn(move || {
            let t = Instant::now();
            let reply = n.http_with(
                "POST",
                "/api/v1/profiling",
                &[],
                br#"{"enabled":false}"#,
                Duration::from_secs(40),
            );
            (reply, t.elapsed())
        })
    };
    // The closer takes its turn at once; give its request time to reach the gate.
    std::thread::sleep(Duration::from_millis(500));
    let posters: Vec<_> = (0..15)
        .map(|_| {
            let n = Arc::clone(&n);
            std::thread::spawn(move || {
                let t = Instant::now();
                let reply = n.http_with(
                    "POST",
                    "/api/v1/profiling",
                    &[],
                    br#"{"enabled":true,"server_address":""}"#,
                    Duration::from_secs(40),
                );
                (reply, t.elapsed())
            })
        })
        .collect();
    // GET answers within 1 s while the POSTs are queued and while the flush goes on.
    let mut worst_get = Duration::ZERO;
    let gets_until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < gets_until {
        let t = Instant::now();
        let (s, _, body) =
            n.http_with("GET", "/api/v1/profiling", &[], b"", Duration::from_secs(5));
        worst_get = worst_get.max(t.elapsed());
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        worst_get < Duration::from_secs(1),
        "GET took {worst_get:?} during the flush"
    );
    for p in posters {
        let ((s, headers, body), took) = p.join().expect("poster");
        let v = common::json(&body);
        assert_eq!(s, 409, "{v}");
        assert_eq!(
            common::header(&headers, "content-type"),
            Some("application/json")
        );
        assert_eq!(v["error"], "a profiling transition is in progress; retry");
        // The state as of the last completed transition: still open and pushing to the collector.
        assert_eq!(v["data"]["enabled"], true, "{v}");
        assert_eq!(v["data"]["server_address"], url.as_str(), "{v}");
        assert!(took < Duration::from_secs(3), "a 409 took {took:?}");
    }
    let ((s, _, body), took) = closer.join().expect("closer");
    let v = common::json(&body);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["enabled"], false, "{v}");
    assert!(took < Duration::from_secs(25), "closing took {took:?}");
    // The refused POSTs changed nothing: the close is the only POST transition logged.
    // The line is logged before the answer is written, but this test reads the log on another thread.
    assert!(n.wait_for_log("[profiling] POST", Duration::from_secs(5)));
    assert_eq!(n.log_lines("[profiling] POST").len(), 1, "{}", n.stderr());
    eprintln!(
        "FIGURE busy gate: closing took {took:?}; worst GET {worst_get:?}; 15 POSTs answered 409"
    );
    drop(hang);
}
