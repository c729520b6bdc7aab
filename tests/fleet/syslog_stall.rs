//! A slow TCP syslog reader loses nothing uncounted: the fleet at `-traffic 10ms` sends to a receiver
//! that, a second after it accepted, reads nothing for 6 s with a 4 KiB receive buffer. Whether the
//! sender's bounded queue overflows meanwhile depends on how much the kernel's send buffer absorbs (on
//! a quiet machine it takes the whole stall; under load the sender falls behind and drops). Either way,
//! afterwards every `sequenceId` a device used is accounted for exactly: received once, or counted in
//! `syslog_dropped`; every message counted in `syslog_sent` arrived. Runs under a continuous wall-clock
//! profile, as the soak, so the sender's calls are also interrupted by signals.
use crate::common;
use crate::fleet_common;

use common::{boot, json, wait_until};
use fleet_common::receivers::{Stall, SyslogSink};
use std::time::Duration;

/// (name, syslog_sent, syslog_dropped) per device.
fn syslog_counters(n: &common::Nl6) -> Vec<(String, u64, u64)> {
    let (s, _, body) = n.http("GET", "/api/v1/devices", b"");
    assert_eq!(s, 200);
    json(&body)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let get = |k: &str| d["counters"][k].as_u64().unwrap_or(0);
            (
                d["name"].as_str().unwrap().to_string(),
                get("syslog_sent"),
                get("syslog_dropped"),
            )
        })
        .collect()
}

/// What does not add up for one device: sequenceIds 1..=highest received are each received once or
/// dropped at the queue, and all `sent` arrived. Empty when exact.
fn accounting(sink: &SyslogSink, name: &str, sent: u64, dropped: u64) -> Option<String> {
    let s = sink.streams().get(name).cloned().unwrap_or_default();
    let missing = s.ids.missing(1..s.highest + 1);
    (missing != dropped || s.ids.repeats > 0 || s.ids.distinct < sent).then(|| {
        format!(
            "{name}: {sent} counted sent, {} received (highest id {}), {missing} ids missing but \
             {dropped} counted dropped, {} repeated",
            s.ids.distinct, s.highest, s.ids.repeats
        )
    })
}

#[test]
fn a_stalled_syslog_reader_loses_only_what_the_queue_counts_dropped() {
    let sink = SyslogSink::start_with(Some(Stall {
        after: Duration::from_secs(1),
        pause: Duration::from_secs(6),
        rcvbuf: 4096,
    }));
    let n = boot()
        .args(&["-snmp-port", "0", "-traffic", "10ms", "-syslog-queue", "64"])
        .args(&["-syslog-target", &format!("tcp://{}", sink.addr)])
        .start();
    n.open_pull_only();
    // The stall happens during these profiles (1 s + 6 s, and the write timeout if the sender blocks).
    for _ in 0..3 {
        n.profile_ok("/debug/fgprof?seconds=5");
    }
    let at = syslog_counters(&n);
    let mut wrong = Vec::new();
    let exact = wait_until(Duration::from_secs(15), || {
        let now = syslog_counters(&n);
        wrong = at
            .iter()
            .zip(&now)
            // Drops after the snapshot are ids above the snapshot's: the current count covers them.
            .filter_map(|((name, sent, _), (_, _, dropped))| {
                accounting(&sink, name, *sent, *dropped)
            })
            .collect();
        wrong.is_empty()
    });
    assert!(
        exact,
        "syslog records unaccounted for after a slow reader:\n{}\n{}",
        wrong.join("\n"),
        n.stderr()
    );
    let reconnects = sink.connections.load(std::sync::atomic::Ordering::Relaxed);
    let overflowed: u64 = at.iter().map(|d| d.2).sum();
    eprintln!("{at:?}; {overflowed} dropped at the queue; {reconnects} connections");
}
