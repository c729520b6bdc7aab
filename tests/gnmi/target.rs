//! The gNMI target against a real gNMI client (pygnmi): Capabilities, Get of every served path in
//! JSON_IETF and PROTO agreeing with SNMP read around it, wildcards, Set of `config/enabled` read back
//! over SNMP with its trap and syslog line, `-device-net`'s one listener, and the refusals with the
//! gRPC status gNMI specifies. The binary is the real one, on ephemeral loopback ports.
use crate::common;
use crate::fleet_common;
use crate::gnmi_support;

use gnmi_support::{boot, client, gnmi_addr, number, refusal, snmp_addr, updates};
use serde_json::json;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const LEAVES: &[&str] = &[
    "/system/state/hostname",
    "/system/state/boot-time",
    "/interfaces/interface[name=eth1]/state/oper-status",
    "/interfaces/interface[name=eth1]/state/admin-status",
    "/interfaces/interface[name=eth1]/config/enabled",
    "/interfaces/interface[name=eth1]/state/counters/in-octets",
    "/interfaces/interface[name=eth1]/state/counters/out-octets",
    "/interfaces/interface[name=eth1]/state/counters/in-errors",
    "/interfaces/interface[name=eth1]/state/counters/out-errors",
    "/interfaces/interface[name=eth1]/state/counters/in-discards",
    "/interfaces/interface[name=eth1]/state/counters/in-pkts",
    "/interfaces/interface[name=eth1]/state/counters/out-pkts",
];

fn snmp_get(target: &str, oid: &str) -> String {
    let out = fleet_common::run(
        "snmpget",
        &[
            "-v2c", "-c", "public", "-On", "-Oqv", "-t", "1", "-r", "2", target, oid,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn capabilities_name_the_version_models_and_encodings() {
    let nl6 = boot(1, &[]);
    let caps = client(gnmi_addr(&nl6, 0), "caps", json!({}));
    assert_eq!(caps["gnmi_version"], "0.10.0", "{caps}");
    let enc = caps["supported_encodings"].to_string();
    assert!(enc.contains("json_ietf") && enc.contains("proto"), "{caps}");
    let models = caps["supported_models"].to_string();
    assert!(models.contains("openconfig-interfaces") && models.contains("openconfig-system"));
}

#[test]
fn get_serves_every_path_in_both_encodings() {
    let nl6 = boot(2, &[]);
    let at = gnmi_addr(&nl6, 1);
    for enc in ["json_ietf", "proto"] {
        let got = client(at, "get", json!({"paths": LEAVES, "encoding": enc}));
        let u = updates(&got);
        assert_eq!(u.len(), LEAVES.len(), "{enc}: one update per leaf: {got}");
        for ((path, val), want) in u.iter().zip(LEAVES) {
            assert_eq!(format!("/{path}"), *want, "{enc}");
            match path.rsplit('/').next().unwrap() {
                "hostname" => assert_eq!(val, "nl6-dev-0001"),
                "oper-status" | "admin-status" => assert_eq!(val, "UP"),
                "enabled" => assert_eq!(val, true),
                "boot-time" => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap();
                    let boot = number(val);
                    assert!(
                        boot <= now.as_nanos() as u64
                            && boot + 600_000_000_000 > now.as_nanos() as u64,
                        "{val}"
                    );
                }
                _ => {
                    number(val);
                }
            }
            // RFC 7951: 64-bit integers are strings in JSON_IETF; PROTO types them.
            if path.contains("counters") {
                assert_eq!(val.is_string(), enc == "json_ietf", "{enc} {path}: {val}");
            }
        }
    }
}

#[test]
fn a_gnmi_counter_lies_between_two_snmp_reads_around_it() {
    let nl6 = boot(1, &[]);
    let (at, snmp) = (gnmi_addr(&nl6, 0), snmp_addr(&nl6, 0));
    // ifInOctets.3 and ifOutOctets.3 (eth2): the same device counters, read before and after.
    for (oid, leaf) in [
        (".1.3.6.1.2.1.2.2.1.10.3", "in-octets"),
        (".1.3.6.1.2.1.2.2.1.16.3", "out-octets"),
    ] {
        let before: u64 = snmp_get(&snmp, oid).parse().unwrap();
        let path = format!("/interfaces/interface[name=eth2]/state/counters/{leaf}");
        let got = client(at, "get", json!({"paths": [path], "encoding": "proto"}));
        let after: u64 = snmp_get(&snmp, oid).parse().unwrap();
        let v = number(&updates(&got)[0].1);
        assert!(
            before > 0 && before <= v && v <= after,
            "{leaf}: SNMP {before} ≤ gNMI {v} ≤ SNMP {after}"
        );
    }
}

#[test]
fn wildcards_select_every_instance() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let cases = [
        ("/interfaces/interface[name=*]/state/oper-status", 4),
        ("/interfaces/interface/state/counters/in-octets", 4),
        ("/interfaces/.../in-octets", 4),
        ("/*/state/hostname", 1),
        ("/interfaces/interface[name=eth3]/state/counters", 7),
    ];
    for (path, n) in cases {
        let got = client(at, "get", json!({"paths": [path]}));
        let u = updates(&got);
        assert_eq!(u.len(), n, "{path}: {got}");
    }
}

#[test]
fn refusals_carry_the_status_gnmi_specifies() {
    let nl6 = boot(1, &[]);
    let at = gnmi_addr(&nl6, 0);
    let cases = [
        (
            "get",
            json!({"paths": ["/interfaces/interface[name=eth9]"]}),
            "NOT_FOUND",
            "no data at",
        ),
        (
            "get",
            json!({"paths": ["/nope"], "encoding": "proto"}),
            "NOT_FOUND",
            "/nope",
        ),
        (
            "raw_get",
            json!({"elems": ["system"], "encoding": 3}),
            "UNIMPLEMENTED",
            "ASCII",
        ),
        (
            "raw_get",
            json!({"elems": ["system"], "encoding": 1}),
            "UNIMPLEMENTED",
            "BYTES",
        ),
        (
            "set",
            json!({"update": [["/interfaces/interface[name=eth0]/state/oper-status", "DOWN"]]}),
            "INVALID_ARGUMENT",
            "read-only",
        ),
        (
            "set",
            json!({"update": [["/interfaces/interface[name=*]/config/enabled", false]]}),
            "INVALID_ARGUMENT",
            "wildcards",
        ),
        (
            "set",
            json!({"update": [["/interfaces/interface[name=eth0]/config/enabled", 7]]}),
            "INVALID_ARGUMENT",
            "true or false",
        ),
        (
            "set",
            json!({"delete": ["/interfaces/interface[name=eth0]/config/enabled"]}),
            "INVALID_ARGUMENT",
            "delete",
        ),
        (
            "set",
            json!({"update": [["/interfaces/interface[name=eth7]/config/enabled", false]]}),
            "NOT_FOUND",
            "eth7",
        ),
    ];
    for (action, args, code, needle) in cases {
        let got = client(at, action, args.clone());
        let (c, details) = refusal(&got);
        assert_eq!(c, code, "{action} {args}: {details}");
        assert!(details.contains(needle), "{action} {args}: {details}");
    }
    let d = gnmi_support::device(&nl6, 0);
    assert_eq!(
        d["interfaces"][0]["admin_status"], "up",
        "a refused Set changes nothing"
    );
}

#[test]
fn credentials_are_required_when_configured() {
    let nl6 = boot(1, &["-gnmi-username", "lab", "-gnmi-password", "s3cret"]);
    let at = gnmi_addr(&nl6, 0);
    let paths = json!(["/system/state/hostname"]);
    let none = client(at, "get", json!({"paths": paths}));
    assert_eq!(refusal(&none).0, "UNAUTHENTICATED");
    let wrong = client(
        at,
        "get",
        json!({"paths": paths, "user": "lab", "password": "guess"}),
    );
    assert_eq!(refusal(&wrong).0, "UNAUTHENTICATED");
    let right = client(
        at,
        "get",
        json!({"paths": paths, "user": "lab", "password": "s3cret"}),
    );
    assert_eq!(updates(&right)[0].1, "nl6-dev-0000", "{right}");
}

#[test]
fn set_enabled_is_seen_by_snmp_with_a_trap_and_a_syslog_line() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let syslog = format!("udp://{to}");
    let nl6 = boot(
        2,
        &[
            "-trap-target",
            &to,
            "-trap-interval",
            "1h",
            "-syslog-target",
            &syslog,
            "-syslog-interval",
            "1h",
        ],
    );
    let (at, snmp) = (gnmi_addr(&nl6, 1), snmp_addr(&nl6, 1));
    let set = |enabled: bool| {
        let path = "/interfaces/interface[name=eth1]/config/enabled";
        let r = client(at, "set", json!({"update": [[path, enabled]]}));
        assert_eq!(r["response"][0]["op"], "UPDATE", "{r}");
    };
    set(false);
    assert_eq!(
        snmp_get(&snmp, ".1.3.6.1.2.1.2.2.1.7.2"),
        "2",
        "ifAdminStatus.2 down"
    );
    assert_eq!(
        snmp_get(&snmp, ".1.3.6.1.2.1.2.2.1.8.2"),
        "2",
        "ifOperStatus.2 down"
    );
    let (mut trap, mut line) = (false, false);
    let end = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while Instant::now() < end && !(trap && line) {
        let Ok(n) = sink.recv(&mut buf) else { continue };
        let p = &buf[..n];
        // linkDown's OID, 1.3.6.1.6.3.1.1.5.3, BER-encoded.
        trap |= p
            .windows(9)
            .any(|w| w == [0x06, 0x0a, 0x2b, 0x06, 0x01, 0x06, 0x03, 0x01, 0x01])
            && p.windows(2).any(|w| w == [0x05, 0x03]);
        line |= String::from_utf8_lossy(p).contains("Interface eth1 changed state to down");
    }
    assert!(trap && line, "trap {trap}, syslog {line}");
    let g = client(
        at,
        "get",
        json!({"paths": ["/interfaces/interface[name=eth1]/state/admin-status"]}),
    );
    assert_eq!(updates(&g)[0].1, "DOWN");
    set(true);
    assert_eq!(
        snmp_get(&snmp, ".1.3.6.1.2.1.2.2.1.7.2"),
        "1",
        "ifAdminStatus.2 up again"
    );
}

#[test]
fn with_device_net_one_listener_serves_every_device_address() {
    let nl6 = boot(3, &["-device-net", "127.1.3.0/24"]);
    let addrs: Vec<_> = (0..3).map(|i| gnmi_addr(&nl6, i)).collect();
    assert!(
        addrs.iter().all(|a| a.port() == addrs[0].port()),
        "one port: {addrs:?}"
    );
    for (i, at) in addrs.iter().enumerate() {
        assert_eq!(at.ip().to_string(), format!("127.1.3.{}", i + 1));
        let got = client(*at, "get", json!({"paths": ["/system/state/hostname"]}));
        assert_eq!(updates(&got)[0].1, format!("nl6-dev-{i:04}"), "{at}");
    }
}

#[test]
fn tls_serves_gnmi_with_the_given_certificate_and_a_bad_one_stops_startup() {
    let dir = std::env::temp_dir().join(format!("nl6-gnmi-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = fleet_common::run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=nl6-lab",
            "-addext",
            "subjectAltName=DNS:nl6-lab",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nl6 = boot(
        1,
        &[
            "-gnmi-tls-cert",
            cert.to_str().unwrap(),
            "-gnmi-tls-key",
            key.to_str().unwrap(),
        ],
    );
    let at = gnmi_addr(&nl6, 0);
    let args = json!({"ca": cert, "name": "nl6-lab", "elems": ["system", "state", "hostname"]});
    let got = client(at, "tls_get", args);
    assert_eq!(got["value"], "nl6-dev-0000", "{got}");
    let plain = client(at, "raw_get", json!({"elems": ["system"], "encoding": 4}));
    assert_eq!(
        refusal(&plain).0,
        "UNAVAILABLE",
        "plaintext to a TLS target fails: {plain}"
    );
    drop(nl6);
    let out = common::boot()
        .args(&["-devices", "1", "-snmp-port", "0", "-gnmi-port", "0"])
        .args(&[
            "-gnmi-tls-cert",
            key.to_str().unwrap(),
            "-gnmi-tls-key",
            key.to_str().unwrap(),
        ])
        .run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not a usable PEM certificate chain and key"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
