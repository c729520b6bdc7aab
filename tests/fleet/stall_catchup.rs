//! After a stall (`SIGSTOP` … `SIGCONT`), the lab's scheduler skips the syslog, flow and trap periods it
//! missed rather than replaying them: the real binary's packets, counted at a loopback sink, stay under
//! twice the steady rate in the second after the stop, and one log line says what was skipped.
//!
//! The scale is the test's (200 devices, periods of 1 s, a 5 s stop) unless `NL6_STALL_DEVICES`,
//! `NL6_STALL_PERIOD_S` and `NL6_STALL_STOP_S` say otherwise: `NL6_STALL_DEVICES=30000 NL6_STALL_PERIOD_S=10
//! NL6_STALL_STOP_S=30` is the case (devices on `-device-net 127.1.0.0/16` past 1000).
use crate::common;

use common::boot;
use std::net::UdpSocket;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Receive times of every datagram at the sink, until `end`.
fn sink(rx: UdpSocket, end: Instant) -> Arc<Mutex<Vec<Instant>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&seen);
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65_536];
        while Instant::now() < end {
            if rx.recv(&mut buf).is_ok() {
                out.lock().unwrap().push(Instant::now());
            }
        }
    });
    seen
}

fn count(seen: &Mutex<Vec<Instant>>, from: Instant, to: Instant) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|t| **t >= from && **t < to)
        .count()
}

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_five_second_stop_is_not_replayed_as_a_burst() {
    let devices = knob("NL6_STALL_DEVICES", 200);
    let period = knob("NL6_STALL_PERIOD_S", 1);
    let stop = knob("NL6_STALL_STOP_S", 5);
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = rx.local_addr().unwrap().to_string();
    let seen = sink(
        rx,
        Instant::now() + Duration::from_secs(3 * period + stop + 40),
    );
    let syslog = format!("udp://{at}");
    let (n, every) = (devices.to_string(), format!("{period}s"));
    let mut args = vec![
        "-devices",
        &n,
        "-syslog-target",
        &syslog,
        "-syslog-interval",
        &every,
        "-flow-target",
        &at,
        "-flow-interval",
        &every,
        "-trap-target",
        &at,
        "-trap-interval",
        &every,
    ];
    if devices > 1000 {
        args.extend(["-device-net", "127.1.0.0/16"]);
    }
    let mut nl6 = boot().args(&args).start();
    // Warm up (every device past its first phase), then three steady periods.
    std::thread::sleep(Duration::from_secs(period + 1));
    let t = Instant::now();
    let steady_for = Duration::from_secs(3 * period);
    std::thread::sleep(steady_for);
    let steady = count(&seen, t, t + steady_for) as f64 / steady_for.as_secs_f64();
    assert!(
        steady > devices as f64 * 1.5 / period as f64,
        "steady rate {steady}/s: the fleet is not sending"
    );
    nl6.signal("STOP");
    std::thread::sleep(Duration::from_secs(stop));
    let resume = Instant::now();
    nl6.signal("CONT");
    std::thread::sleep(Duration::from_secs(period.max(1) + 1));
    let burst = count(&seen, resume, resume + Duration::from_secs(1)) as f64;
    let after = count(
        &seen,
        resume + Duration::from_secs(1),
        resume + Duration::from_secs(2),
    ) as f64;
    // A replay slowed by the sender's own speed spreads over seconds: the first whole period counts too.
    let one_period = Duration::from_secs(period);
    let first_period = count(&seen, resume, resume + one_period) as f64;
    let steady_period = steady * period as f64;
    eprintln!(
        "steady {steady:.0}/s; first second after the stop {burst} (×{:.2}); second {after}; first period {first_period} (×{:.2})",
        burst / steady,
        first_period / steady_period
    );
    assert!(
        first_period <= 2.0 * steady_period,
        "first period after the stop: {first_period} packets, steady {steady_period} a period"
    );
    assert!(
        burst <= 2.0 * steady,
        "first second after the stop: {burst} packets, steady {steady}/s (×{:.1})",
        burst / steady
    );
    assert!(
        after >= 0.5 * steady,
        "the fleet went quiet after the stop: {after} packets, steady {steady}/s"
    );
    assert!(
        nl6.wait_for_log("lab: the scheduler ran ", Duration::from_secs(3)),
        "no log line for the skipped periods: {}",
        nl6.stderr()
    );
    let line = nl6.log_lines("lab: the scheduler ran ").join("\n");
    assert!(
        line.contains("missed periods rather than replay them"),
        "{line}"
    );
    // The API tells the same stall: periods skipped, a turn reached about the stop's length late.
    let (status, _, body) = nl6.http("GET", "/api/v1/fleet", b"");
    assert_eq!(status, 200);
    let s = &common::json(&body)["scheduler"];
    assert!(s["skipped_periods"].as_u64().unwrap() > 0, "{s}");
    let worst = s["max_us"].as_u64().unwrap();
    assert!(
        worst >= stop * 900_000,
        "worst lateness {worst} µs after a {stop} s stop: {s}"
    );
    nl6.terminate(Duration::from_secs(25));
}
