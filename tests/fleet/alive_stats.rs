//! `GET /api/v1/fleet` against what a loopback sink counts: the real binary's fleet sends traps, syslog
//! and flows to one sink; the totals the API reports match the datagrams the sink received, and the
//! scheduler's turns and lateness percentiles are there and add up.
use crate::common;

use common::{boot, json, wait_until};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts every datagram `rx` receives, for 60 s at most.
fn sink(rx: UdpSocket) -> Arc<AtomicU64> {
    let seen = Arc::new(AtomicU64::new(0));
    let out = Arc::clone(&seen);
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    std::thread::spawn(move || {
        let mut buf = [0u8; 65_536];
        while Instant::now() < end {
            if rx.recv(&mut buf).is_ok() {
                out.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    seen
}

#[test]
fn the_fleet_totals_match_the_sink_and_the_scheduler_tells_its_lateness() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = rx.local_addr().unwrap().to_string();
    let seen = sink(rx);
    let syslog = format!("udp://{at}");
    let nl6 = boot()
        .args(&[
            "-devices",
            "40",
            "-syslog-target",
            &syslog,
            "-flow-target",
            &at,
        ])
        .args(&["-trap-target", &at, "-syslog-interval", "1s"])
        .args(&["-flow-interval", "1s", "-trap-interval", "1s"])
        .start();
    let fleet = || {
        let (status, _, body) = nl6.http("GET", "/api/v1/fleet", b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        json(&body)
    };
    // Past every device's first trap phase (up to 1.5 periods), so every kind is sending.
    std::thread::sleep(Duration::from_secs(3));
    let before = seen.load(Ordering::Relaxed);
    let v = fleet();
    let t = &v["totals"];
    let sent: u64 = ["traps_sent", "syslog_sent", "flow_packets_sent"]
        .iter()
        .map(|k| t[k].as_u64().unwrap_or_else(|| panic!("totals.{k} in {v}")))
        .sum();
    assert_eq!(v["devices"], 40);
    for k in ["traps_sent", "syslog_sent", "flow_packets_sent"] {
        assert!(t[k].as_u64().unwrap() >= 40, "{k}: {v}");
    }
    // Every datagram counted sent reaches the sink; the sink saw no more than was sent (a datagram
    // in the kernel between the send and its count is the only slack).
    assert!(before <= sent + 3, "sink {before} before, {sent} sent");
    assert!(
        wait_until(Duration::from_secs(3), || seen.load(Ordering::Relaxed)
            >= sent),
        "the sink got {} of {sent} sent",
        seen.load(Ordering::Relaxed)
    );
    assert_eq!(t["send_errors"], 0, "{v}");
    let s = &v["scheduler"];
    let turns = s["turns"].as_u64().unwrap();
    // A link turn sends a trap and a syslog line, a syslog turn a line, a flow turn one export: the
    // turns (each recorded before it sends) are at least every syslog line plus every export.
    let (lines, flows) = (
        t["syslog_sent"].as_u64().unwrap(),
        t["flow_packets_sent"].as_u64().unwrap(),
    );
    assert!(
        turns >= lines + flows,
        "{turns} turns for {lines} lines and {flows} exports: {s}"
    );
    // How late is the machine's to say (a loaded one starves the scheduler): only that the figures
    // are there and agree with each other.
    assert!(s["skipped_periods"].is_u64(), "{s}");
    let (p50, p99) = (s["p50_us"].as_u64().unwrap(), s["p99_us"].as_u64().unwrap());
    assert!(p50 <= p99 && p99 <= s["p999_us"].as_u64().unwrap(), "{s}");
    let in_buckets: u64 = s["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(in_buckets, turns, "{s}");
    let (status, headers, _) = nl6.http("POST", "/api/v1/fleet", b"{}");
    assert_eq!(status, 405);
    assert_eq!(common::header(&headers, "allow"), Some("GET, HEAD"));
}
