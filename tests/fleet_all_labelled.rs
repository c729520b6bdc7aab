//! Every CPU sample of lab code carries a `subsystem` label: a fleet with every subsystem busy (SNMP
//! walks from net-snmp's `snmpbulkwalk`, traps and syslog at a millisecond interval through the lab
//! scheduler, flow exports, a running scenario, gNMI Gets and a 10 ms SAMPLE stream from pygnmi, gNMI
//! dial-out to a collector that refuses connections), profiled; any sample with an `nl6::lab::` frame
//! and no label fails the test, naming its stack.
mod fleet_common;

use fleet_common::run;
use nl6::lab::gnmi::config::{GnmiConfig, DEFAULT_DIALOUT_PATHS};
use nl6::lab::syslog::Transport;
use nl6::lab::{api, Fleet, FleetConfig};
use nl6::labels::Subsystem;
use nl6_profile::symbols::symbolize;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn every_lab_sample_is_labelled_under_a_load_of_every_subsystem() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    // A TCP port nobody listens on: dial-out keeps connecting and backing off, its samples filling
    // the queue.
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let gnmi = GnmiConfig::default().with_port(Some(0)).with_dialout(
        Some(refused),
        Duration::from_millis(20),
        DEFAULT_DIALOUT_PATHS,
    );
    let cfg = FleetConfig::default()
        .with_gnmi(gnmi)
        .with_devices(20)
        .with_snmp_port(0)
        .with_trap_target(Some(to), Duration::from_millis(2))
        .with_syslog_target(Some((Transport::Udp, to)), Duration::from_millis(1))
        .with_flow_target(Some(to), Duration::from_millis(20));
    let fleet = Fleet::start(cfg).unwrap();
    let req = nl6::http::Request::new("POST", "/api/v1/scenarios")
        .with_body(r#"{"name":"link-flap","device":"nl6-dev-0001","duration":"10s"}"#);
    let r = api::route(&req, &fleet).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let target = fleet.devices()[0].snmp_addr().unwrap().to_string();
    let gnmi_at = fleet.devices()[1].gnmi_addr().unwrap();
    let session = nl6_profile::cpu::start(250).expect("CPU profiler");
    let stream = gnmi_load(gnmi_at);
    let stop = Arc::new(AtomicBool::new(false));
    let drain = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            sink.set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let _ = sink.recv(&mut buf);
            }
        })
    };
    let end = Instant::now() + Duration::from_millis(2500);
    let mut walks = 0;
    while Instant::now() < end && walks < 200 {
        let out = run(
            "snmpbulkwalk",
            &[
                "-v2c",
                "-c",
                "public",
                "-t",
                "1",
                "-r",
                "1",
                &target,
                ".1.3.6.1.2.1",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        walks += 1;
    }
    // The walks may end first (200 of them can take under a second): the profile covers the whole
    // stream, however long pygnmi took to start.
    stream.join().unwrap();
    let profile = session.stop();
    stop.store(true, Ordering::Relaxed);
    drain.join().unwrap();
    drop(fleet);

    let (mut lab, mut unlabelled, mut seen) = (0u64, Vec::new(), std::collections::BTreeMap::new());
    for s in &profile.samples {
        let names: Vec<String> = s
            .stack
            .iter()
            .enumerate()
            .filter_map(|(i, a)| symbolize(if i == 0 { *a } else { a.saturating_sub(1) }))
            .collect();
        if !names.iter().any(|n| n.starts_with("nl6::lab::")) {
            continue;
        }
        lab += s.count;
        *seen
            .entry(Subsystem::name_of(s.label).unwrap_or("<none>"))
            .or_insert(0u64) += s.count;
        if s.label == 0 && unlabelled.len() < 5 {
            unlabelled.push(names);
        }
    }
    eprintln!("FIGURE lab samples by label: {seen:?} ({walks} SNMP walks)");
    assert!(lab >= 20, "the lab was sampled ({lab} samples)");
    assert!(
        unlabelled.is_empty(),
        "lab samples without a subsystem label: {unlabelled:#?}"
    );
    for want in [
        Subsystem::SNMP,
        Subsystem::SYSLOG,
        Subsystem::GNMI,
        Subsystem::GNMI_DIALOUT,
    ] {
        assert!(
            seen.contains_key(want.name()),
            "no {want} sample: the load did not run it ({seen:?})"
        );
    }
}

/// A gNMI client in another process (pygnmi) streaming every leaf of a device at 10 ms for 2 s.
fn gnmi_load(at: std::net::SocketAddr) -> std::thread::JoinHandle<()> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gnmi_support/client.py");
    let args =
        r#"{"subs": [{"path": "/", "mode": "sample", "sample_interval": 10000000}], "seconds": 2}"#;
    let mut cmd = std::process::Command::new("timeout");
    cmd.args([
        "30",
        "python3",
        script,
        &at.ip().to_string(),
        &at.port().to_string(),
        "stream",
        args,
    ]);
    std::thread::spawn(move || {
        let out = cmd
            .output()
            .expect("python3 with pygnmi (scripts/setup.sh)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
}
