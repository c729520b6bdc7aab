//! gNMI dial-out against collectors that misbehave (`hostile_collector`: silent, garbage, an HTTP/2
//! SETTINGS allowing no stream, a ping flood, a close at once; `collector.py`'s UNAVAILABLE and 64 MiB answers):
//! nothing counts as sent that no collector accepted, a device is redialled at the backoff's pace (no
//! faster), the outage is said once, and a good collector that takes over the port gets every device
//! within two backoff periods however the bad one left its connections.
use crate::common;
use crate::gnmi_support;

use common::{wait_until, Nl6};
use gnmi_support::collector::{counters, name, Collector};
use gnmi_support::hostile_collector::{Hostile, Mode};
use std::time::{Duration, Instant};

const DEVICES: usize = 4;
/// The backoff's default cap (`-gnmi-dialout-backoff-max`).
const CAP: Duration = Duration::from_secs(5);
/// Scheduling slack on a loaded two-core machine.
const SLACK: Duration = Duration::from_secs(1);
/// What a line of nl6's stderr says as an outage starts.
const OUTAGE: &str = "nl6: gNMI dial-out: collector";

fn boot(port: u16, extra: &[&str]) -> Nl6 {
    let to = format!("127.0.0.1:{port}");
    let n = DEVICES.to_string();
    common::boot()
        .args(&["-devices", &n, "-snmp-port", "0", "-gnmi-dialout", &to])
        .args(&[
            "-gnmi-dialout-interval",
            "200ms",
            "-gnmi-dialout-queue",
            "8",
        ])
        .args(extra)
        .start()
}

fn sent(nl6: &Nl6) -> Vec<u64> {
    (0..DEVICES).map(|i| counters(nl6, i).0).collect()
}

fn reconnects(nl6: &Nl6) -> Vec<u64> {
    (0..DEVICES).map(|i| counters(nl6, i).2).collect()
}

#[test]
fn nothing_counts_as_sent_while_only_a_stalling_collector_listens() {
    for mode in [
        Mode::Silent,
        Mode::NoStreams,
        Mode::PingFlood,
        Mode::Garbage,
    ] {
        let bad = Hostile::start(0, mode);
        let nl6 = boot(bad.port, &[]);
        assert!(
            wait_until(Duration::from_secs(15), || bad.accepted() >= DEVICES),
            "{mode:?}: every device connects ({} accepted)",
            bad.accepted()
        );
        // Twenty samples a device: each has had time to be handed to the connection and given up.
        std::thread::sleep(Duration::from_secs(4));
        let s = sent(&nl6);
        eprintln!("FIGURE {mode:?}: dialout_sent {s:?} with only the stalling collector");
        assert!(s.iter().all(|&n| n == 0), "{mode:?}: dialout_sent {s:?}");
    }
}

/// Boots against a stalling collector, lets every device stall on it, then frees the port (keeping
/// the stalled connections open) for a good collector: the time until every device delivered.
fn recovery_after(mode: Mode) -> Duration {
    let bad = Hostile::start(0, mode);
    let port = bad.port;
    let _nl6 = boot(port, &[]);
    assert!(
        wait_until(Duration::from_secs(15), || bad.accepted() >= DEVICES),
        "{mode:?}: every device connects ({} accepted)",
        bad.accepted()
    );
    std::thread::sleep(Duration::from_secs(6));
    let held = bad.release_port();
    let good = Collector::start(port);
    let t0 = Instant::now();
    let mut first = [None; DEVICES];
    let all = wait_until(Duration::from_secs(30), || {
        for (i, f) in first.iter_mut().enumerate() {
            if f.is_none() && good.count(&name(i)) > 0 {
                *f = Some(t0.elapsed());
            }
        }
        first.iter().all(Option::is_some)
    });
    let got = first.iter().filter(|f| f.is_some()).count();
    eprintln!(
        "FIGURE {mode:?}: {got} of {DEVICES} devices at the good collector, first arrivals {first:?} \
         ({} connections held by the stalled one)",
        held.conns.len()
    );
    assert!(
        all,
        "{mode:?}: {got} of {DEVICES} devices recovered in 30 s"
    );
    drop(held);
    first.iter().map(|f| f.unwrap()).max().unwrap()
}

#[test]
fn a_silent_collector_replaced_on_its_port_gets_every_device_within_two_backoffs() {
    let took = recovery_after(Mode::Silent);
    assert!(took <= 2 * CAP + SLACK, "recovered after {took:?}");
}

#[test]
fn a_ping_flooding_collector_replaced_on_its_port_gets_every_device_within_two_backoffs() {
    let took = recovery_after(Mode::PingFlood);
    assert!(took <= 2 * CAP + SLACK, "recovered after {took:?}");
}

#[test]
fn a_collector_allowing_no_stream_replaced_on_its_port_gets_every_device_within_two_backoffs() {
    let took = recovery_after(Mode::NoStreams);
    assert!(took <= 2 * CAP + SLACK, "recovered after {took:?}");
}

/// Connections a hostile collector accepted in the 10 s after the first one, and nl6's stderr then.
fn pace_against(mode: Mode, extra: &[&str]) -> (usize, Vec<u64>, String) {
    let bad = Hostile::start(0, mode);
    let nl6 = boot(bad.port, extra);
    assert!(
        wait_until(Duration::from_secs(15), || bad.accepted() > 0),
        "{mode:?}: a device connects"
    );
    let from = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let n = bad.accepted_between(from - Duration::from_millis(100), Duration::from_secs(10));
    (n, reconnects(&nl6), nl6.stderr())
}

/// Connections one device may open in 10 s from its first under a 5 s cap: pauses of at least half
/// of 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5 s add up to over 10 s after 9 attempts; tonic may dial once
/// more within an attempt when the connection died before its stream opened.
const MOST_IN_10S: usize = 2 * 10;

#[test]
fn a_closing_or_garbage_collector_is_redialled_at_the_backoff_pace_and_said_once() {
    for mode in [Mode::Close, Mode::Garbage] {
        let (n, r, stderr) = pace_against(mode, &[]);
        eprintln!(
            "FIGURE {mode:?}: {n} connections in 10 s from {DEVICES} devices ({:.1}/s), \
             dialout_reconnects {r:?}",
            n as f64 / 10.0
        );
        assert!(
            n <= DEVICES * MOST_IN_10S,
            "{mode:?}: {n} connections in 10 s"
        );
        assert!(r.iter().all(|&x| x >= 3), "{mode:?}: reconnects {r:?}");
        let said = stderr.lines().filter(|l| l.starts_with(OUTAGE)).count();
        assert_eq!(said, 1, "{mode:?}: the outage said once:\n{stderr}");
    }
}

#[test]
fn the_backoff_cap_is_the_flags() {
    let (n, r, stderr) = pace_against(Mode::Close, &["-gnmi-dialout-backoff-max", "1s"]);
    eprintln!("FIGURE cap 1s: {n} connections in 10 s, dialout_reconnects {r:?}");
    // A 5 s cap allows 8 reconnects in 10 s; a 1 s cap over 12, and pauses of at least 0.5 s.
    assert!(r.iter().all(|&x| x >= 11), "reconnects {r:?}");
    assert!(n <= DEVICES * 2 * 26, "{n} connections in 10 s");
    assert!(stderr.contains("up to 1s"), "{stderr}");
}

#[test]
fn a_collector_refusing_every_stream_is_redialled_at_the_backoff_pace() {
    for mode in ["unavailable", "huge"] {
        let bad = Collector::start_mode(0, mode);
        let nl6 = boot(bad.port, &[]);
        assert!(
            wait_until(Duration::from_secs(15), || bad.rpcs() > 0),
            "{mode}: a device publishes"
        );
        let (from, rss_before) = (bad.rpcs(), common::status_field(nl6.pid(), "VmRSS:"));
        std::thread::sleep(Duration::from_secs(10));
        let n = bad.rpcs() - from;
        let rss = common::status_field(nl6.pid(), "VmRSS:");
        eprintln!(
            "FIGURE {mode}: {n} streams in 10 s from {DEVICES} devices, sent {:?}, RSS {rss_before} -> {rss} kB",
            sent(&nl6)
        );
        assert!(n as usize <= DEVICES * 10, "{mode}: {n} streams in 10 s");
        assert!(sent(&nl6).iter().all(|&s| s == 0), "{mode}: sent");
        assert!(
            rss < rss_before + 32 * 1024,
            "{mode}: RSS {rss_before} -> {rss} kB"
        );
    }
}
