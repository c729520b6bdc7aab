//! NetFlow v9 export decoded by Wireshark's own dissector: tshark captures the loopback traffic of a fleet
//! and decodes it as cflow (needs capture rights: root, as in CI), plus the allocation-free flow funnel.
use crate::fleet_common;

use fleet_common::{free_udp_port, Guard};
use nl6::lab::{Fleet, FleetConfig};
use std::io::Read;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn tshark_decodes_our_netflow_v9() {
    let port = free_udp_port();
    // A receiver so the packets are not refused with ICMP; tshark sees them on lo either way.
    let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    let fields = [
        "cflow.version",
        "cflow.count",
        "cflow.source_id",
        "cflow.template_id",
        "cflow.template_field_count",
        "cflow.octets",
        "cflow.srcaddr",
        "cflow.dstaddr",
        "cflow.protocol",
        "cflow.inputint",
        "cflow.sequence",
        "_ws.expert.message",
    ];
    let mut args = vec![
        "-i".to_string(),
        "lo".into(),
        "-f".into(),
        format!("udp dst port {port}"),
        "-a".into(),
        "duration:4".into(),
        "-d".into(),
        format!("udp.port=={port},cflow"),
        "-T".into(),
        "fields".into(),
        "-E".into(),
        "separator=|".into(),
        "-l".into(),
    ];
    for f in fields {
        args.push("-e".into());
        args.push(f.into());
    }
    let mut child = Command::new("tshark")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark must be installed (Debian package tshark)");
    // Wait for "Capturing on 'Loopback: lo'" before sending anything.
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut b = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("Capturing on") {
        assert!(
            Instant::now() < deadline,
            "tshark did not start capturing: {}",
            String::from_utf8_lossy(&seen)
        );
        let n = stderr.read(&mut b).unwrap();
        assert!(n > 0, "tshark exited: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&b[..n]);
    }
    let mut stdout = child.stdout.take().unwrap();
    let child = Guard(child);
    let cfg = FleetConfig::default()
        .with_devices(2)
        .with_snmp_port(0)
        .with_flow_target(Some(rx.local_addr().unwrap()), Duration::from_millis(300));
    let fleet = Fleet::start(cfg).unwrap();
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap(); // ends when tshark's 4 s capture ends
    drop(fleet);
    drop(child);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('|').collect()).collect();
    assert!(rows.len() >= 4, "at least two packets per device: {out}");
    for r in &rows {
        assert_eq!(r[0], "9", "version: {out}");
        assert_eq!(
            r[11], "",
            "Wireshark reports no malformed or unexpected data: {out}"
        );
        assert!(r[3].split(',').any(|t| t == "256"), "template 256: {out}");
        assert!(
            r[4].split(',').any(|t| t == "11"),
            "11 template fields: {out}"
        );
        let records = r[1].parse::<usize>().unwrap() - 1;
        assert_eq!(
            r[5].split(',').count(),
            records,
            "one IN_BYTES per data record: {out}"
        );
        assert!(
            r[5].split(',').all(|o| o.parse::<u64>().unwrap() > 0),
            "{out}"
        );
        assert!(r[8].split(',').all(|p| p == "6"), "TCP flows: {out}");
        assert!(
            r[6].split(',')
                .chain(r[7].split(','))
                .all(|a| a.starts_with("10.0.") || a.starts_with("198.51.100.")),
            "{out}"
        );
    }
    for source in ["0", "1"] {
        let seqs: Vec<u32> = rows
            .iter()
            .filter(|r| r[2] == source)
            .map(|r| r[10].parse().unwrap())
            .collect();
        assert!(seqs.len() >= 2, "source {source}: {out}");
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "sequence numbers count packets: {seqs:?}"
        );
    }
}
