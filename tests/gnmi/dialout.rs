//! gNMI dial-out against a collector written with grpcio's generic handler (`collector.py`): every
//! device's stream arrives with the subscription name in its metadata and the device in each
//! notification's target; the collector is killed and started again on the same port, the streams
//! resume, and the counters in `/api/v1/devices` (sent, dropped, reconnects) match what it received.
//! Misbehaving collectors are in `dialout_recover`.
use crate::common;
use crate::gnmi_support;

use common::wait_until;
use gnmi_support::collector::{counters, name, Collector};
use std::time::Duration;

const DEVICES: usize = 3;
const QUEUE: u64 = 8;

#[test]
fn streams_resume_after_the_collector_restarts_and_the_counters_match() {
    let first = Collector::start(0);
    let to = format!("127.0.0.1:{}", first.port);
    let q = QUEUE.to_string();
    let nl6 = common::boot()
        .args(&["-devices", "3", "-snmp-port", "0", "-gnmi-dialout", &to])
        .args(&["-gnmi-dialout-interval", "100ms", "-gnmi-dialout-queue", &q])
        .start();
    let all_over = |c: &Collector, n: u64| (0..DEVICES).all(|i| c.count(&name(i)) >= n);
    assert!(
        wait_until(Duration::from_secs(15), || all_over(&first, 5)),
        "every device streams: {:?}",
        first.seen
    );
    assert_eq!(
        *first.names.lock().unwrap(),
        ["nl6-dialout"],
        "subscription-name"
    );
    let (port, first_seen) = (first.port, first.seen.clone());
    drop(first);
    // Away for 2 s: 20 samples per device against a queue of 8, so some are dropped.
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..DEVICES {
        let (_, dropped, _) = counters(&nl6, i);
        assert!(dropped > 0, "{}: a full queue drops and counts", name(i));
    }
    // The reader has seen all the first collector printed (its pipe closed at the kill).
    let before: Vec<u64> = (0..DEVICES)
        .map(|i| {
            first_seen
                .lock()
                .unwrap()
                .get(&name(i))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    let second = Collector::start(port);
    assert!(
        wait_until(Duration::from_secs(15), || all_over(&second, 10)),
        "streams resume: {:?}",
        second.seen
    );
    for (i, got_before) in before.iter().enumerate() {
        let (sent_a, _, reconnects) = counters(&nl6, i);
        assert!(reconnects >= 1, "{}: reconnects {reconnects}", name(i));
        // Let what was sent before the snapshot arrive, then compare.
        std::thread::sleep(Duration::from_millis(300));
        let total = got_before + second.count(&name(i));
        let (sent_b, _, _) = counters(&nl6, i);
        eprintln!(
            "FIGURE {}: sent {sent_a}..{sent_b}, received {total}",
            name(i)
        );
        // Everything counted as sent arrived: it counts once the collector's OK closed its stream.
        assert!(
            sent_a <= total,
            "{}: sent {sent_a} > received {total}",
            name(i)
        );
        // What arrived uncounted is at most the one stream the kill broke (a queue's worth).
        assert!(
            total <= sent_b + QUEUE,
            "{}: received {total}, sent only {sent_b}",
            name(i)
        );
    }
}
