//! gNMI Subscribe against pygnmi: STREAM SAMPLE at 1 s for 5 s (≥ 4 updates per leaf, counters
//! monotonic), ON_CHANGE catching a scenario's flap within 1 s with the device's timestamp,
//! suppress_redundant with a heartbeat, TARGET_DEFINED, ONCE and POLL ending in sync_response, and an
//! unknown path refused with NOT_FOUND.
use crate::gnmi_support;

use gnmi_support::{boot, client, gnmi_addr, number};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const NS: u64 = 1_000_000_000;

/// `(path, value, timestamp ns, arrival s)` of every update after the first sync of a stream answer.
fn stream_updates(got: &Value) -> Vec<(String, Value, u64, f64)> {
    let mut out = Vec::new();
    let all = got["updates"]
        .as_array()
        .unwrap_or_else(|| panic!("no updates: {got}"));
    for u in all.iter().skip(1) {
        let m = &u["msg"]["update"];
        for x in m["update"].as_array().into_iter().flatten() {
            out.push((
                x["path"].as_str().unwrap().to_string(),
                x["val"].clone(),
                m["timestamp"].as_u64().unwrap(),
                u["arrived"].as_f64().unwrap(),
            ));
        }
    }
    out
}

fn by_path(u: &[(String, Value, u64, f64)]) -> BTreeMap<&str, Vec<&Value>> {
    let mut m: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for (p, v, _, _) in u {
        m.entry(p.as_str()).or_default().push(v);
    }
    m
}

#[test]
fn stream_sample_at_1s_for_5s_gives_4_or_more_monotonic_updates_per_leaf() {
    let nl6 = boot(1, &[]);
    let sub = json!([{"path": "/interfaces/interface[name=eth0]/state/counters", "mode": "sample",
                      "sample_interval": NS}]);
    let got = client(
        gnmi_addr(&nl6, 0),
        "stream",
        json!({"subs": sub, "seconds": 5.5}),
    );
    let first = &got["updates"][0]["msg"];
    assert_eq!(
        first["sync_response"], true,
        "the initial snapshot ends in sync_response: {first}"
    );
    let u = stream_updates(&got);
    let leaves = by_path(&u);
    assert_eq!(leaves.len(), 7, "every counter leaf: {leaves:?}");
    for (path, vals) in leaves {
        assert!(vals.len() >= 4, "{path}: {} updates", vals.len());
        let n: Vec<u64> = vals.iter().map(|v| number(v)).collect();
        assert!(
            n.windows(2).all(|w| w[0] <= w[1]),
            "{path} not monotonic: {n:?}"
        );
        if path.ends_with("octets") {
            assert!(n[0] < n[n.len() - 1], "{path} does not move: {n:?}");
        }
    }
}

#[test]
fn on_change_catches_a_scenario_flap_within_a_second() {
    let nl6 = boot(2, &[]);
    let at = gnmi_addr(&nl6, 1);
    let flap = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
    });
    let sub = json!([{"path": "/interfaces/interface/state/oper-status", "mode": "on_change"}]);
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn(move || {
        tx.send(client(at, "stream", json!({"subs": sub, "seconds": 5})))
    });
    flap.join().unwrap();
    let body = br#"{"name":"link-flap","device":"nl6-dev-0001","duration":"10s"}"#;
    let (s, _, b) = nl6.http("POST", "/api/v1/scenarios", body);
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    watcher.join().unwrap().unwrap();
    let got = rx.recv().unwrap();
    let u = stream_updates(&got);
    let down: Vec<_> = u.iter().filter(|(_, v, _, _)| v == "DOWN").collect();
    assert!(!down.is_empty(), "no DOWN update: {got}");
    let (path, _, ts, arrived) = down[0];
    let lag = arrived - *ts as f64 / 1e9;
    assert!(
        (0.0..1.0).contains(&lag),
        "{path}: arrived {lag:.3} s after the device's change"
    );
    assert!(
        u.iter().all(|(p, _, _, _)| p.ends_with("oper-status")),
        "only the subscribed leaf: {u:?}"
    );
}

#[test]
fn suppress_redundant_sends_unchanged_leaves_only_at_heartbeats() {
    let nl6 = boot(1, &[]);
    let sub = json!([{"path": "/system/state/hostname", "mode": "sample", "sample_interval": NS / 5,
                      "suppress_redundant": true, "heartbeat_interval": NS}]);
    let got = client(
        gnmi_addr(&nl6, 0),
        "stream",
        json!({"subs": sub, "seconds": 3.4}),
    );
    let n = stream_updates(&got).len();
    // 17 samples in 3.4 s; the value never changes, so only the heartbeats (3) send it.
    assert!((2..=4).contains(&n), "{n} updates: {got}");
}

#[test]
fn target_defined_samples_counters_and_reports_status_on_change() {
    let nl6 = boot(1, &[]);
    let sub = json!([{"path": "/interfaces/interface[name=eth2]/state", "mode": "target_defined",
                      "sample_interval": NS / 2}]);
    let got = client(
        gnmi_addr(&nl6, 0),
        "stream",
        json!({"subs": sub, "seconds": 2.6}),
    );
    let u = stream_updates(&got);
    let leaves = by_path(&u);
    let in_octets = leaves
        .get("interfaces/interface[name=eth2]/state/counters/in-octets")
        .map_or(0, Vec::len);
    assert!(in_octets >= 4, "counters sampled every 0.5 s: {leaves:?}");
    assert!(
        !leaves.contains_key("interfaces/interface[name=eth2]/state/oper-status"),
        "status unchanged, not resent: {leaves:?}"
    );
}

#[test]
fn once_and_poll_end_each_answer_with_sync_response() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let sub = json!([{"path": "/interfaces/interface[name=eth1]/state/counters/in-octets"}]);
    let once = client(at, "once", json!({"subs": sub}));
    let msgs = once["updates"].as_array().unwrap();
    assert_eq!(
        msgs.len(),
        2,
        "one update then sync_response, then the end: {once}"
    );
    assert_eq!(msgs[1]["msg"]["sync_response"], true);
    let poll = client(at, "poll", json!({"subs": sub, "polls": 3}));
    let answers = poll["updates"].as_array().unwrap();
    assert_eq!(answers.len(), 3, "{poll}");
    let mut last = 0;
    for a in answers {
        assert_eq!(a["msg"]["sync_response"], true, "{a}");
        let v = number(&a["msg"]["update"]["update"][0]["val"]);
        assert!(v >= last, "{poll}");
        last = v;
    }
}

#[test]
fn a_subscription_to_an_unknown_path_is_not_found() {
    let nl6 = boot(1, &[]);
    let sub = json!([{"path": "/interfaces/interface[name=eth9]/state"}]);
    let got = client(gnmi_addr(&nl6, 0), "once", json!({"subs": sub}));
    assert_eq!(gnmi_support::refusal(&got).0, "NOT_FOUND", "{got}");
}
