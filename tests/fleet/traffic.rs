//! `-traffic PERIOD`: a freshly booted lab with the flag is busy enough that one 3 s CPU
//! profile holds samples under every lab subsystem (`snmp`, `trap`, `syslog`, `flow`, `scenario`, `gnmi`), the
//! way the README's quickstart `go tool pprof -tags` line shows it; the devices' counters show the work, a
//! `link-flap` scenario is running, and what has no target went to a discard socket on loopback. The
//! control: the same boot without the flag gives those subsystems nothing.

use crate::common;

use common::{boot, json, Nl6};
use nl6_profile::proto::{self, Profile};
use std::collections::BTreeMap;
use std::time::Duration;

const LAB_SUBSYSTEMS: [&str; 6] = ["snmp", "trap", "syslog", "flow", "scenario", "gnmi"];

/// CPU samples per `subsystem` label value in a `profile?seconds=N` scrape.
fn samples_per_subsystem(n: &Nl6, seconds: u32) -> BTreeMap<String, i64> {
    let (status, _, body) = n.http_with(
        "GET",
        &format!("/debug/pprof/profile?seconds={seconds}"),
        &[],
        b"",
        Duration::from_secs(u64::from(seconds) + 20),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let p: Profile = proto::decode(&body).expect("a pprof profile");
    let key = p.string_table.iter().position(|s| s == "subsystem");
    let mut out = BTreeMap::new();
    for s in &p.sample {
        let label = s.label.iter().find(|l| Some(l.key as usize) == key);
        if let Some(l) = label {
            *out.entry(p.string_table[l.str as usize].clone())
                .or_default() += s.value[0];
        }
    }
    out
}

fn device_counter(devices: &serde_json::Value, name: &str) -> u64 {
    devices["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["counters"][name].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn traffic_gives_every_lab_subsystem_cpu_samples() {
    let n = boot()
        .args(&["-snmp-port", "0", "-traffic", "10ms"])
        .start();
    n.open_pull_only();
    let seen = samples_per_subsystem(&n, 3);
    for s in LAB_SUBSYSTEMS {
        assert!(
            seen.get(s).copied().unwrap_or(0) > 0,
            "no `{s}` samples in 3 s of -traffic 10ms: {seen:?}\n{}",
            n.stderr()
        );
    }

    let (_, _, body) = n.http("GET", "/api/v1/devices", b"");
    let devices = json(&body);
    for counter in [
        "snmp_responses",
        "traps_sent",
        "syslog_sent",
        "flow_packets_sent",
        "gnmi_rpcs",
    ] {
        assert!(
            device_counter(&devices, counter) > 100,
            "{counter} after 3 s of traffic: {devices}"
        );
    }
    assert_eq!(device_counter(&devices, "send_errors"), 0, "{devices}");
    let (_, _, body) = n.http("GET", "/api/v1/scenarios", b"");
    let scenarios = json(&body);
    assert!(
        scenarios["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "link-flap"),
        "the load keeps a link-flap going: {scenarios}"
    );
}

#[test]
fn without_traffic_the_lab_gives_trap_syslog_flow_and_gnmi_nothing() {
    let n = boot().args(&["-snmp-port", "0"]).start();
    n.open_pull_only();
    let seen = samples_per_subsystem(&n, 2);
    for s in ["trap", "syslog", "flow", "gnmi", "gnmi-dialout"] {
        assert_eq!(seen.get(s), None, "{seen:?}");
    }
}

#[test]
fn traffic_rejects_a_period_below_a_millisecond_naming_the_flag() {
    let out = boot().args(&["-traffic", "100us"]).run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-traffic") && err.contains("1ms"), "{err}");
}

#[test]
fn the_discard_sink_is_on_the_bind_address() {
    let config = nl6::lab::FleetConfig::default()
        .with_devices(1)
        .with_snmp_port(0)
        .with_traffic(Some(Duration::from_millis(50)));
    let fleet = nl6::lab::Fleet::start(config).expect("the fleet starts");
    let sink = fleet.traffic_sink().expect("a sink for the unset targets");
    assert!(sink.ip().is_loopback(), "{sink}");
    let c = fleet.config();
    assert_eq!(c.trap_target(), Some(sink));
    assert_eq!(c.flow_target(), Some(sink));
    assert_eq!(c.syslog_target().map(|(_, a)| a), Some(sink));
    fleet.stop();

    // An explicit target is kept; the others still get the sink.
    let explicit = "127.0.0.1:9".parse().unwrap();
    let config = nl6::lab::FleetConfig::default()
        .with_devices(1)
        .with_snmp_port(0)
        .with_flow_target(Some(explicit), Duration::from_secs(10))
        .with_traffic(Some(Duration::from_millis(50)));
    let fleet = nl6::lab::Fleet::start(config).expect("the fleet starts");
    assert_eq!(fleet.config().flow_target(), Some(explicit));
    assert_eq!(fleet.config().trap_target(), fleet.traffic_sink());
}
