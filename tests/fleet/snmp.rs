//! The SNMP agent against Debian's net-snmp tools (snmpget, snmpwalk, snmpbulkwalk), malformed packets,
//! bind failures and the devices API, with a fleet started in-process on ephemeral ports.
use crate::common;
use crate::fleet_common;

use common::wait_for;
use fleet_common::{run, snmp_tool as snmp};
use nl6::http::Request;
use nl6::lab::{api, Fleet, FleetConfig};
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn fleet(n: usize) -> Fleet {
    Fleet::start(FleetConfig::default().with_devices(n).with_snmp_port(0)).unwrap()
}

fn addr(f: &Fleet, i: usize) -> String {
    f.devices()[i].snmp_addr().unwrap().to_string()
}

/// Value rows of a walk (not the endOfMibView line).
fn rows(out: &str) -> usize {
    out.lines()
        .filter(|l| !l.contains("No more variables"))
        .count()
}

#[test]
fn snmpget_reads_system_scalars() {
    let f = fleet(3);
    let out = snmp(
        "snmpget",
        &addr(&f, 2),
        &[
            ".1.3.6.1.2.1.1.5.0",
            ".1.3.6.1.2.1.1.1.0",
            ".1.3.6.1.2.1.1.3.0",
        ],
    );
    assert!(
        out.contains(".1.3.6.1.2.1.1.5.0 = STRING: \"nl6-dev-0002\""),
        "{out}"
    );
    assert!(
        out.contains(".1.3.6.1.2.1.1.1.0 = STRING: \"nl6 simulated router nl6-dev-0002"),
        "{out}"
    );
    assert!(out.contains(".1.3.6.1.2.1.1.3.0 = Timeticks: ("), "{out}");
    // A missing instance is an exception value, not an error.
    let out = snmp("snmpget", &addr(&f, 0), &[".1.3.6.1.2.1.1.5"]);
    assert!(out.contains("No Such Instance"), "{out}");
}

#[test]
fn snmpwalk_of_system_and_iftable() {
    let f = fleet(2);
    let sys = snmp("snmpwalk", &addr(&f, 1), &[".1.3.6.1.2.1.1"]);
    assert_eq!(sys.lines().count(), 7, "{sys}");
    assert!(sys.contains(".1.3.6.1.2.1.1.7.0 = INTEGER: 72"), "{sys}");
    let ift = snmp("snmpwalk", &addr(&f, 1), &[".1.3.6.1.2.1.2.2"]);
    // ifXTable follows ifTable (tests/fleet/ifxtable.rs walks on into it): the walk stops at the subtree's
    // end, not at the view's.
    assert!(!ift.contains("No more variables"), "{ift}");
    assert_eq!(rows(&ift), 22 * 4, "{ift}");
    assert!(
        ift.contains(".1.3.6.1.2.1.2.2.1.2.3 = STRING: \"eth2\""),
        "{ift}"
    );
    assert!(
        ift.contains(".1.3.6.1.2.1.2.2.1.10.4 = Counter32: "),
        "{ift}"
    );
    assert!(
        ift.contains(".1.3.6.1.2.1.2.2.1.6.1 = Hex-STRING: 02 6E 6C 00 01 00"),
        "{ift}"
    );
}

#[test]
fn snmpbulkwalk_walks_everything_in_order() {
    let f = fleet(1);
    let all = snmp("snmpbulkwalk", &addr(&f, 0), &["-Cr7", ".1.3.6.1.2.1"]);
    // snmpbulkwalk itself fails on a non-increasing OID; we also count every row once.
    assert_eq!(rows(&all), 7 + 1 + (22 + 19) * 4, "{all}");
    assert!(all.contains(".1.3.6.1.2.1.2.1.0 = INTEGER: 4"), "{all}");
}

#[test]
fn counters_grow_between_polls() {
    let f = fleet(1);
    let read = || {
        let out = snmp(
            "snmpget",
            &addr(&f, 0),
            &["-Oqv", ".1.3.6.1.2.1.2.2.1.10.1"],
        );
        out.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("not a counter: {out}"))
    };
    let a = read();
    std::thread::sleep(Duration::from_millis(300));
    let b = read();
    assert!(b > a, "ifInOctets.1 must grow with traffic: {a} then {b}");
}

#[test]
fn malformed_packets_and_wrong_communities_are_dropped_counted_and_survived() {
    let f = fleet(1);
    let target = f.devices()[0].snmp_addr().unwrap();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let junk: [&[u8]; 4] = [
        b"",
        b"\x30\x84\xff\xff\xff\xff",
        b"hello",
        b"\x30\x03\x02\x01\x01",
    ];
    for j in junk {
        c.send_to(j, target).unwrap();
    }
    let out = run(
        "snmpget",
        &[
            "-v2c",
            "-c",
            "private",
            "-t",
            "0.3",
            "-r",
            "0",
            &target.to_string(),
            ".1.3.6.1.2.1.1.5.0",
        ],
    );
    assert!(!out.status.success(), "a wrong community gets no answer");
    // v1 and v3 are other versions (nl6 speaks v2c): unanswered, and counted as such, not as a bad
    // community (v1) or malformed (v3, which has no community).
    for version in [
        &["-v1", "-c", "public"][..],
        &["-v3", "-l", "noAuthNoPriv", "-u", "nl6"],
    ] {
        let mut args = version.to_vec();
        args.extend(["-t", "0.3", "-r", "0"]);
        let target = target.to_string();
        args.extend([target.as_str(), ".1.3.6.1.2.1.1.5.0"]);
        let out = run("snmpget", &args);
        assert!(!out.status.success(), "{version:?} gets no answer");
    }
    let ok = snmp("snmpget", &target.to_string(), &[".1.3.6.1.2.1.1.5.0"]);
    assert!(ok.contains("nl6-dev-0000"), "the loop still answers: {ok}");
    let d = &f.devices()[0];
    wait_for("counters", 2, || {
        d.counters.malformed.load(Ordering::Relaxed) == 4
    });
    assert_eq!(d.counters.bad_community.load(Ordering::Relaxed), 1);
    wait_for("version counter", 2, || {
        d.counters.bad_version.load(Ordering::Relaxed) == 2
    });
    let r = api::route(&Request::new("GET", "/api/v1/devices"), &f).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["data"][0]["counters"]["malformed"], 4);
    assert!(v["data"][0]["counters"]["sent"].as_u64().unwrap() >= 1);
    assert_eq!(v["data"][0]["snmp"]["address"], "127.0.0.1");
    assert_eq!(v["data"][0]["snmp"]["port"], target.port());
}

#[test]
fn a_taken_port_stops_startup_naming_device_port_and_remedy() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(port))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nl6-dev-0000"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains("-snmp-port 0"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn zero_devices_is_a_fleet_too() {
    let f = fleet(0);
    let r = api::route(&Request::new("GET", "/api/v1/devices"), &f).unwrap();
    // The one REST writer ends every body with a newline, as the gate's routes do; the page says where
    // it is and how many devices there are in all.
    assert_eq!(
        r.text(),
        "{\"data\":[],\"limit\":100,\"offset\":0,\"total\":0}\n"
    );
}

/// The list is paged, so a fleet of any size never makes one unbounded body.
#[test]
fn the_device_list_is_paged_with_the_total() {
    let f = fleet(250);
    let page = |query: &str| {
        let mut req = Request::new("GET", "/api/v1/devices");
        req.query = query.to_string();
        let r = api::route(&req, &f).unwrap();
        (
            r.status,
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap(),
        )
    };
    let (status, v) = page("");
    assert_eq!(status, 200);
    assert_eq!(
        (v["total"].as_u64(), v["limit"].as_u64()),
        (Some(250), Some(100))
    );
    assert_eq!(
        v["data"].as_array().unwrap().len(),
        100,
        "the default page is bounded"
    );
    let (_, v) = page("offset=240&limit=50");
    let names: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 10);
    assert_eq!((names[0], names[9]), ("nl6-dev-0240", "nl6-dev-0249"));
    assert_eq!(page("offset=999").1["data"], serde_json::json!([]));
    for bad in ["limit=0", "limit=1001", "offset=-1", "limit=x"] {
        let (status, v) = page(bad);
        assert_eq!(status, 400, "{bad}: {v}");
        let name = bad.split('=').next().unwrap();
        assert!(v["error"].as_str().unwrap().contains(name), "{bad}: {v}");
    }
}

#[test]
fn stop_ends_every_thread_promptly() {
    let f = fleet(50);
    let t = std::time::Instant::now();
    f.stop();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        t.elapsed()
    );
    let target = f.devices()[0].snmp_addr().unwrap().to_string();
    let out = run(
        "snmpget",
        &[
            "-v2c",
            "-c",
            "public",
            "-t",
            "0.3",
            "-r",
            "0",
            &target,
            ".1.3.6.1.2.1.1.5.0",
        ],
    );
    assert!(!out.status.success(), "a stopped fleet answers nothing");
}

#[test]
fn snmpgets_own_request_decodes_and_re_encodes_byte_for_byte() {
    use nl6::lab::snmp::{pdu, Message};
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let target = sock.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        run(
            "snmpget",
            &[
                "-v2c",
                "-c",
                "public",
                "-t",
                "0.5",
                "-r",
                "0",
                &target,
                ".1.3.6.1.2.1.1.1.0",
            ],
        )
    });
    let mut buf = [0u8; 1500];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    let _ = t.join();
    let m = Message::decode(&buf[..n]).unwrap();
    assert_eq!(
        (m.version, m.community.as_slice(), m.pdu_type),
        (1, &b"public"[..], pdu::GET)
    );
    assert_eq!(m.varbinds.len(), 1);
    assert_eq!(m.varbinds[0].0.to_string(), "1.3.6.1.2.1.1.1.0");
    assert_eq!(
        m.encode(),
        &buf[..n],
        "our encoder reproduces net-snmp's bytes"
    );
}
