//! Hardening: an SNMP device is no reflector.
//!
//! - A hand-built 120-byte GETBULK asking for 1000 repetitions of six ifTable columns gets one answer of
//!   at most 1452 bytes (one unfragmented datagram over IPv4 or IPv6) and at most 8 × the request: the
//!   varbinds are the first ones of the full answer, in order (RFC 3416 §4.2.3 truncation).
//! - net-snmp's `snmpbulkget` asking for 200 repetitions reads a valid, truncated answer; its own debug
//!   dump shows the sizes on the wire.
//! - Devices that listen beyond loopback with the default community make the binary warn at startup.
//!
//! Loopback only (the beyond-loopback case binds 0.0.0.0 for an instant and sends nothing).
use crate::common;
use crate::fleet_common;

use fleet_common::run;
use nl6::lab::snmp::ber::Value;
use nl6::lab::snmp::{pdu, Message};
use nl6::lab::{Fleet, FleetConfig};
use std::net::UdpSocket;
use std::time::Duration;

const MAX_DATAGRAM: usize = 1452;
const MAX_RATIO: usize = 8;

/// A BER TLV with a short-form length (everything here is under 128 bytes).
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    assert!(content.len() < 128);
    let mut out = vec![tag, content.len() as u8];
    out.extend_from_slice(content);
    out
}

/// GETBULK, community "public", non-repeaters 0, max-repetitions 1000, ifTable columns 1..=6.
fn hand_built_getbulk() -> Vec<u8> {
    let mut list = Vec::new();
    for column in 1..=6u8 {
        // 1.3.6.1.2.1.2.2.1.<column>: first two arcs folded into 0x2b.
        let oid = tlv(0x06, &[0x2b, 6, 1, 2, 1, 2, 2, 1, column]);
        let null = tlv(0x05, &[]);
        list.extend(tlv(0x30, &[oid, null].concat()));
    }
    let pdu_body = [
        tlv(0x02, &[0x12, 0x34, 0x56, 0x78]), // request-id
        tlv(0x02, &[0]),                      // non-repeaters
        tlv(0x02, &[0x03, 0xe8]),             // max-repetitions 1000
        tlv(0x30, &list),
    ]
    .concat();
    let message = [
        tlv(0x02, &[1]), // version: v2c
        tlv(0x04, b"public"),
        tlv(pdu::GET_BULK, &pdu_body),
    ]
    .concat();
    tlv(0x30, &message)
}

#[test]
fn a_getbulk_answer_fits_one_datagram_and_a_bounded_ratio() {
    let fleet = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
    let target = fleet.devices()[0].snmp_addr().unwrap();
    let request = hand_built_getbulk();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    client.send_to(&request, target).unwrap();
    let mut buf = vec![0u8; 65_536];
    let (n, _) = client.recv_from(&mut buf).expect("an answer");
    eprintln!(
        "GETBULK of {} bytes answered with {n} bytes (x{:.1})",
        request.len(),
        n as f64 / request.len() as f64
    );
    assert!(
        n <= MAX_DATAGRAM,
        "{n} bytes: more than one unfragmented datagram"
    );
    assert!(
        n <= MAX_RATIO * request.len(),
        "{n} bytes for a {}-byte request",
        request.len()
    );
    let reply = Message::decode(&buf[..n]).expect("a valid message");
    assert_eq!(reply.pdu_type, pdu::RESPONSE);
    assert_eq!(reply.request_id, 0x1234_5678);
    assert_eq!(reply.error_status, 0, "GETBULK is truncated, not tooBig");
    assert!(
        reply.varbinds.len() >= 6,
        "at least one full repetition: {}",
        reply.varbinds.len()
    );
    // Truncation keeps the first bindings, in order. Cursor j (column j+1) at repetition k has walked
    // k steps along ifTable's 4 rows, then on into the next columns.
    for (i, (oid, value)) in reply.varbinds.iter().enumerate() {
        let walked = (i % 6) * 4 + i / 6;
        let want = format!("1.3.6.1.2.1.2.2.1.{}.{}", walked / 4 + 1, walked % 4 + 1);
        assert_eq!(oid.to_string(), want, "binding {i}");
        assert_ne!(*value, Value::EndOfMibView);
    }
}

/// `Sending N bytes` / `Received N byte packet` figures from net-snmp's `-d` dump.
fn dumped_sizes(stderr_and_out: &str, marker: &str) -> Vec<usize> {
    stderr_and_out
        .lines()
        .filter_map(|l| l.strip_prefix(marker))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn snmpbulkget_reads_a_truncated_answer() {
    let fleet = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
    let target = fleet.devices()[0].snmp_addr().unwrap().to_string();
    let out = run(
        "snmpbulkget",
        &[
            "-v2c",
            "-c",
            "public",
            "-On",
            "-t",
            "1",
            "-r",
            "2",
            "-d",
            "-Cn0",
            "-Cr200",
            &target,
            ".1.3.6.1.2.1.2.2.1.2",
            ".1.3.6.1.2.1.2.2.1.10",
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let sent = dumped_sizes(&text, "Sending ");
    let received = dumped_sizes(&text, "Received ");
    assert_eq!((sent.len(), received.len()), (1, 1), "{text}");
    eprintln!(
        "snmpbulkget: sent {} bytes, received {}",
        sent[0], received[0]
    );
    assert!(received[0] <= MAX_DATAGRAM, "{text}");
    assert!(received[0] <= MAX_RATIO * sent[0], "{text}");
    let rows = text
        .lines()
        .filter(|l| l.starts_with(".1.3.6.1.2.1.2.2.1."))
        .count();
    assert!((2..400).contains(&rows), "{rows} rows: {text}");
    assert!(
        text.contains(".1.3.6.1.2.1.2.2.1.2.1 = STRING: \"eth0\""),
        "{text}"
    );
}

#[test]
fn devices_beyond_loopback_with_the_default_community_warn_at_startup() {
    let warning = "listen beyond loopback (0.0.0.0) with the default SNMP community";
    let mut exposed = common::boot()
        .args(&["-devices", "1", "-bind", "0.0.0.0"])
        .start();
    assert!(
        exposed.wait_for_log(warning, Duration::from_secs(2)),
        "{}",
        exposed.stderr()
    );
    exposed.terminate(Duration::from_secs(25));
    // Loopback, or a community of one's own: no warning.
    let mut quiet = common::boot()
        .args(&[
            "-devices",
            "1",
            "-bind",
            "0.0.0.0",
            "-snmp-community",
            "s3cret",
        ])
        .start();
    let mut local = common::boot().args(&["-devices", "1"]).start();
    std::thread::sleep(Duration::from_millis(300));
    for nl6 in [&quiet, &local] {
        assert!(
            !nl6.stderr().contains("default SNMP community"),
            "{}",
            nl6.stderr()
        );
    }
    quiet.terminate(Duration::from_secs(25));
    local.terminate(Duration::from_secs(25));
}
