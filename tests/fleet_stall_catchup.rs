//! After a stall (`SIGSTOP` … `SIGCONT`), the lab's scheduler skips the syslog, flow and trap periods it
//! missed rather than replaying them: the real binary's packets, counted at a loopback sink, stay under
//! twice the steady rate in the second after the stop, and one log line says what was skipped.
mod common;

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

#[test]
fn a_five_second_stop_is_not_replayed_as_a_burst() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = rx.local_addr().unwrap().to_string();
    let seen = sink(rx, Instant::now() + Duration::from_secs(40));
    let syslog = format!("udp://{at}");
    let mut nl6 = boot()
        .args(&[
            "-devices",
            "200",
            "-syslog-target",
            &syslog,
            "-syslog-interval",
            "1s",
            "-flow-target",
            &at,
            "-flow-interval",
            "1s",
            "-trap-target",
            &at,
            "-trap-interval",
            "1s",
        ])
        .start();
    // Warm up (every device past its first phase), then three steady seconds.
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let steady = count(&seen, t, t + Duration::from_secs(3)) as f64 / 3.0;
    assert!(
        steady > 300.0,
        "steady rate {steady}/s: the fleet is not sending"
    );
    nl6.signal("STOP");
    std::thread::sleep(Duration::from_secs(5));
    let resume = Instant::now();
    nl6.signal("CONT");
    std::thread::sleep(Duration::from_secs(2));
    let burst = count(&seen, resume, resume + Duration::from_secs(1)) as f64;
    let after = count(
        &seen,
        resume + Duration::from_secs(1),
        resume + Duration::from_secs(2),
    ) as f64;
    eprintln!(
        "steady {steady:.0}/s; first second after the stop {burst} (×{:.2}); second {after}",
        burst / steady
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
    nl6.terminate(Duration::from_secs(25));
}
