//! The fleet under a continuous wall-clock profile: `-traffic 10ms` (SNMP walks, traps, syslog, flows)
//! while `/debug/fgprof?seconds=5` runs back to back, so every thread is signalled 99 times a second the
//! whole time. Fails on any error an interrupted call would cause: a non-200 answer, a device's
//! `send_errors`, a log line naming an interrupted call (`os error 4`, `Interrupted`), a traffic walk
//! that stopped answering, or RSS growing past 8 MiB after the first two profiles (warm-up). Short by default (20 s);
//! `NL6_WALL_SOAK_SECONDS=600` is the ten-minute run:
//!   NL6_WALL_SOAK_SECONDS=600 cargo test --release -p nl6 --test fleet_wall_soak -- --nocapture
mod common;

use common::{boot, json};
use std::time::{Duration, Instant};

fn counter(n: &common::Nl6, name: &str) -> u64 {
    let (s, _, body) = n.http("GET", "/api/v1/devices", b"");
    assert_eq!(s, 200);
    json(&body)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["counters"][name].as_u64().unwrap_or(0))
        .sum()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn the_fleet_under_a_continuous_wall_profile_counts_no_interrupted_call() {
    let seconds: u64 = std::env::var("NL6_WALL_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let n = boot()
        .args(&["-snmp-port", "0", "-traffic", "10ms"])
        .start();
    n.open_pull_only();
    let end = Instant::now() + Duration::from_secs(seconds);
    let (mut profiles, mut rss_first, mut rss_max) = (0u32, 0u64, 0u64);
    let mut walks_before = counter(&n, "snmp_responses");
    while Instant::now() < end {
        let (s, _, b) = n.http_with(
            "GET",
            "/debug/fgprof?seconds=5",
            &[],
            b"",
            Duration::from_secs(30),
        );
        assert_eq!(
            s,
            200,
            "profile {profiles}: {}",
            String::from_utf8_lossy(&b)
        );
        profiles += 1;
        let walks = counter(&n, "snmp_responses");
        assert!(
            walks > walks_before + 100,
            "the traffic's walks stopped answering under the profile: {walks_before} → {walks}"
        );
        walks_before = walks;
        let rss = rss_kib(n.pid());
        // Warm-up: the first two profiles fill the symbol cache and the allocator's arenas.
        if profiles == 2 {
            rss_first = rss;
        }
        if profiles >= 2 {
            rss_max = rss_max.max(rss);
        }
    }
    assert_eq!(counter(&n, "send_errors"), 0, "{}", n.stderr());
    let err = n.stderr();
    let interrupted: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("os error 4") || l.contains("nterrupted"))
        .collect();
    assert!(interrupted.is_empty(), "{interrupted:#?}");
    eprintln!(
        "{profiles} wall profiles over {seconds} s; RSS after warm-up {rss_first} KiB, max {rss_max} KiB"
    );
    assert!(
        rss_max <= rss_first + 8 * 1024,
        "RSS grew from {rss_first} to {rss_max} KiB"
    );
}
