//! Hardening, continued from fuzz.rs: bad input on the other surfaces.
//!
//! - malformed SNMP datagrams to a device's socket (crate::lab): garbage is counted as malformed, mutated
//!   requests are each accounted for (answered, malformed or refused), the read loop stays alive and a
//!   valid GET is still answered correctly afterwards;
//! - bad `POST /api/v1/scenarios` bodies: 400 whose error names the field, scenario list unchanged;
//! - malformed `/debug/pprof/symbol` input: always 200 in Go's format;
//! - absurd `seconds` values (negative, zero, huge, 1e309, overflow, non-numbers) on every pull path, open
//!   and closed, in-process and over HTTP: only the documented statuses.
use crate::common;
use crate::harden_support;

use common::wait_until;
use harden_support::{mutate, Rng};
use nl6::api::Api;
use nl6::gate::control::Gate;
use nl6::gate::port::NoopPusher;
use nl6::gate::state::Startup;
use nl6::http::Request;
use nl6::lab::snmp::ber::{Oid, Value};
use nl6::lab::snmp::{pdu, Message};
use nl6::lab::{Fleet, FleetConfig};
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn get_request(request_id: i32, community: &[u8]) -> Vec<u8> {
    Message {
        version: 1,
        community: community.to_vec(),
        pdu_type: pdu::GET,
        request_id,
        error_status: 0,
        error_index: 0,
        varbinds: vec![(Oid::parse("1.3.6.1.2.1.1.1.0").unwrap(), Value::Null)],
    }
    .encode()
}

#[test]
fn malformed_snmp_packets() {
    let fleet = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
    let dev = fleet.devices()[0].clone();
    let agent = dev.snmp_addr().expect("snmp address");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let c = &dev.counters;
    let requests = || c.snmp_requests.load(Ordering::SeqCst);
    let mut r = Rng::new(0x736e_6d70);
    // Paced sends: wait for the agent to catch up every 100 datagrams (UDP would drop a flood).
    let send = |bytes: &[u8], sent: &mut u64| {
        sock.send_to(bytes, agent).unwrap();
        *sent += 1;
        if (*sent).is_multiple_of(100) {
            let want = *sent;
            assert!(
                wait_until(Duration::from_secs(10), || requests() >= want),
                "agent stuck at {} of {want}",
                requests()
            );
        }
    };
    // 1. Garbage that cannot be a SEQUENCE: every one is malformed.
    let mut sent = 0u64;
    for _ in 0..3000 {
        let mut b = r.some_bytes(1, 300);
        if b[0] == 0x30 {
            b[0] = 0x31;
        }
        send(&b, &mut sent);
    }
    assert!(wait_until(Duration::from_secs(10), || requests() >= sent));
    assert_eq!(c.malformed.load(Ordering::SeqCst), 3000);
    // 2. Mutations of a valid GET (truncations, flipped lengths, inserted bytes): each is answered,
    // malformed or refused; none is lost or crashes the loop.
    let valid = get_request(1, b"public");
    for _ in 0..20_000 {
        let mut b = valid.clone();
        for _ in 0..1 + r.below(3) {
            mutate(&mut r, &mut b);
        }
        if b.is_empty() {
            b.push(0);
        }
        send(&b, &mut sent);
    }
    assert!(wait_until(Duration::from_secs(10), || requests() >= sent));
    let accounted = || {
        c.snmp_responses.load(Ordering::SeqCst)
            + c.malformed.load(Ordering::SeqCst)
            + c.bad_community.load(Ordering::SeqCst)
            + c.bad_version.load(Ordering::SeqCst)
            + c.not_requests.load(Ordering::SeqCst)
            + c.send_errors.load(Ordering::SeqCst)
    };
    assert!(
        wait_until(Duration::from_secs(5), || accounted() == requests()),
        "{} requests, {} accounted for",
        requests(),
        accounted()
    );
    let malformed = c.malformed.load(Ordering::SeqCst) - 3000;
    assert!(malformed > 0, "no mutation was malformed");
    // 3. Still alive and still right.
    let mut buf = [0u8; 2048];
    while sock.recv_from(&mut buf).is_ok() {} // drain the answers to mutated requests
    let probe = get_request(424_242, b"public");
    let reply = (0..20)
        .find_map(|_| {
            sock.send_to(&probe, agent).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_millis(500);
            while std::time::Instant::now() < deadline {
                if let Ok((n, _)) = sock.recv_from(&mut buf) {
                    if let Ok(m) = Message::decode(&buf[..n]) {
                        if m.request_id == 424_242 {
                            return Some(m);
                        }
                    }
                }
            }
            None
        })
        .expect("no answer to a valid GET after the fuzz");
    assert_eq!(reply.pdu_type, pdu::RESPONSE);
    assert_eq!(
        reply.varbinds[0].1,
        Value::OctetString(dev.sys_descr().as_bytes().to_vec())
    );
    eprintln!(
        "FIGURE snmp fuzz: {sent} datagrams (3000 garbage, 20000 mutated): {} malformed, {} answered, {} refused, {} not requests; valid GET answered after",
        c.malformed.load(Ordering::SeqCst),
        c.snmp_responses.load(Ordering::SeqCst),
        c.bad_community.load(Ordering::SeqCst),
        c.not_requests.load(Ordering::SeqCst)
    );
    fleet.stop();
}

#[test]
fn bad_scenario_bodies_name_the_field() {
    let fleet = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
    let dev = fleet.devices()[0].name().to_string();
    let post = |body: &[u8]| {
        nl6::lab::api::route(
            &Request::new("POST", "/api/v1/scenarios").with_body(body.to_vec()),
            &fleet,
        )
        .expect("route")
    };
    // How many scenarios exist (their bodies change as an accepted one runs).
    let list = || {
        let body = nl6::lab::api::route(&Request::new("GET", "/api/v1/scenarios"), &fleet)
            .unwrap()
            .body;
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()["data"]
            .as_array()
            .unwrap()
            .len()
    };
    let valid = serde_json::json!({"name": "link-flap", "device": dev, "duration": "1s"});
    let bad_values: &[(&str, &[serde_json::Value])] = &[
        (
            "name",
            &[
                serde_json::json!(5),
                serde_json::json!(null),
                serde_json::json!(["link-flap"]),
                serde_json::json!("nope"),
                serde_json::json!(""),
            ],
        ),
        (
            "device",
            &[
                serde_json::json!(true),
                serde_json::json!({}),
                serde_json::json!("nl6-dev-9999"),
                serde_json::json!("\u{0}"),
            ],
        ),
        (
            "duration",
            &[
                serde_json::json!(30),
                serde_json::json!("0s"),
                serde_json::json!("-1s"),
                serde_json::json!("25h"),
                serde_json::json!("1e309s"),
                serde_json::json!("99999999999999999999h"),
                serde_json::json!(""),
                serde_json::json!("abc"),
            ],
        ),
        (
            "start_at",
            &[
                serde_json::json!(12),
                serde_json::json!("yesterday"),
                serde_json::json!("2024-13-01T00:00:00Z"),
                serde_json::json!("9999999999-01-01T00:00:00Z"),
            ],
        ),
        ("extra", &[serde_json::json!(1)]),
    ];
    let before = list();
    let mut cases = 0;
    for (field, values) in bad_values {
        for v in values.iter() {
            let mut body = valid.clone();
            body[*field] = v.clone();
            let resp = post(&serde_json::to_vec(&body).unwrap());
            let err = serde_json::from_slice::<serde_json::Value>(&resp.body).unwrap()["error"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert_eq!(resp.status, 400, "{body}: {}", resp.text());
            assert!(
                err.contains(field),
                "{body}: error does not name {field}: {err}"
            );
            cases += 1;
        }
        if *field != "start_at" && *field != "extra" {
            let mut body = valid.clone();
            body.as_object_mut().unwrap().remove(*field);
            let resp = post(&serde_json::to_vec(&body).unwrap());
            assert_eq!(resp.status, 400);
            assert!(resp.text().contains(field), "{}", resp.text());
            cases += 1;
        }
    }
    // Random junk and mutations of the valid body: 400 naming the body or a field (or, rarely, a
    // mutation that is still valid: 201).
    let mut r = Rng::new(0x7363_656e);
    let valid_bytes = serde_json::to_vec(&valid).unwrap();
    let mut accepted = 0;
    for i in 0..5000 {
        let body = if i % 2 == 0 {
            harden_support::json_value(&mut r, 3).into_bytes()
        } else {
            let mut b = valid_bytes.clone();
            mutate(&mut r, &mut b);
            b
        };
        let before = list();
        let resp = post(&body);
        match resp.status {
            201 => accepted += 1,
            400 => {
                let t = resp.text();
                assert!(
                    ["body", "name", "device", "duration", "start_at", "field"]
                        .iter()
                        .any(|f| t.contains(f)),
                    "{}: {t}",
                    String::from_utf8_lossy(&body)
                );
                assert_eq!(list(), before, "a refused scenario changed the list");
            }
            s => panic!(
                "{}: status {s}: {}",
                String::from_utf8_lossy(&body),
                resp.text()
            ),
        }
        cases += 1;
    }
    if accepted == 0 {
        assert_eq!(list(), before);
    }
    eprintln!("FIGURE scenario fuzz: {cases} bad bodies, {accepted} mutations still valid (201)");
    fleet.stop();
}

fn open_api() -> Api {
    let gate = Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    );
    // As the binary composes it: the console mounted.
    let flame = std::sync::Arc::new(nl6::console::CpuSlot::new());
    let api = nl6::console::mount(Api::new(gate), &flame);
    let r = api.handle(
        &Request::new("POST", "/api/v1/profiling")
            .with_body(br#"{"enabled":true,"server_address":""}"#.to_vec()),
    );
    assert_eq!(r.status, 200);
    api
}

#[test]
fn malformed_symbol_input() {
    let api = open_api();
    let mut r = Rng::new(0x7379_6d62);
    let fixed: &[&[u8]] = &[
        b"",
        b"+",
        b"++++++++",
        b"0x",
        b"0xffffffffffffffffffff",
        b"0x0+0x1+0xffffffffffffffff",
        b"18446744073709551616",
        b"-1",
        b"0b",
        b"0o9",
        b"09",
        b"\xff\xfe\x00",
        b"0x1__2",
        b"%30x10",
    ];
    let mut cases = 0;
    for i in 0..5000 {
        let input: Vec<u8> = match fixed.get(i) {
            Some(f) => f.to_vec(),
            None if i % 3 == 0 => r.some_bytes(0, 200),
            None => (0..1 + r.below(50))
                .map(|_| format!("0x{:x}", r.next() >> r.below(64)))
                .collect::<Vec<_>>()
                .join("+")
                .into_bytes(),
        };
        let post =
            api.handle(&Request::new("POST", "/debug/pprof/symbol").with_body(input.clone()));
        let query = String::from_utf8_lossy(&input).replace(['#', ' '], "");
        let get = api.handle(&Request::new(
            "GET",
            &format!("/debug/pprof/symbol?{query}"),
        ));
        for resp in [post, get] {
            assert_eq!(resp.status, 200, "{:?}", String::from_utf8_lossy(&input));
            assert!(
                resp.text().starts_with("num_symbols: 1\n"),
                "{}",
                resp.text()
            );
            cases += 1;
        }
    }
    // Still symbolizes after the junk.
    let addr = Api::handle as *const () as usize;
    let resp = api.handle(
        &Request::new("POST", "/debug/pprof/symbol").with_body(format!("{addr:#x}").into_bytes()),
    );
    assert!(
        resp.text().contains(&format!("{addr:#x} ")),
        "{addr:#x} not symbolized: {}",
        resp.text()
    );
    eprintln!("FIGURE symbol fuzz: {cases} requests, all 200 in Go's format");
}

/// `seconds` values no one should send: negative, zero, over the limit, overflow, floats, non-numbers.
const ABSURD_SECONDS: &[&str] = &[
    "-1",
    "0",
    "-0",
    "301",
    "1e309",
    "1.5",
    "NaN",
    "inf",
    "abc",
    "",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "99999999999999999999999999",
    "0x10",
    "%20",
    "5%00",
    "%",
    "%ff%fe",
    "1%2C2",
];

/// The statuses documented for `path?seconds=<absurd>` while the gate is open and the CPU sampler is
/// busy (another profile or the push holds it).
fn documented(path: &str, seconds: &str) -> &'static [u16] {
    let decoded = nl6_profile::pull::query_param(&format!("seconds={seconds}"), "seconds");
    let parsed = decoded.and_then(|s| s.parse::<i64>().ok());
    match path {
        // bad or ≤ 0 → the 30 s default, refused as busy; above 300 → 400
        "profile" if parsed.is_some_and(|n| n > 300) => &[400],
        "profile" => &[500],
        // Go's rule: an empty `seconds` is no delta at all (the plain profile).
        "heap" | "allocs" | "goroutine" | "threadcreate" | "block" | "mutex"
            if seconds.is_empty() =>
        {
            &[200]
        }
        "heap" | "allocs" | "goroutine" | "threadcreate" | "block" | "mutex" => &[400],
        "delta_heap" | "delta_block" | "delta_mutex" | "symbol" | "" => &[200],
        _ => &[404], // trace, cmdline, unknown
    }
}

const PATHS: &[&str] = &[
    "profile",
    "heap",
    "allocs",
    "goroutine",
    "threadcreate",
    "block",
    "mutex",
    "delta_heap",
    "delta_block",
    "delta_mutex",
    "symbol",
    "trace",
    "cmdline",
    "",
    "nope",
];

#[test]
fn absurd_seconds_on_every_profile_path() {
    // In-process: hold the CPU sampler so a default-30 s profile is refused at once (500 busy).
    let session = nl6_profile::cpu::start(100).expect("cpu sampler");
    let open = open_api();
    let closed = Api::new(Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    ));
    let mut cases = 0;
    for path in PATHS {
        for s in ABSURD_SECONDS {
            for debug in ["", "&debug=1"] {
                let target = format!("/debug/pprof/{path}?seconds={s}{debug}");
                let resp = open.handle(&Request::new("GET", &target));
                assert!(
                    documented(path, s).contains(&resp.status),
                    "{target}: {} {}",
                    resp.status,
                    resp.text()
                );
                if resp.status != 200 {
                    assert!(!resp.body.is_empty(), "{target}: empty error");
                }
                let closed_status = closed.handle(&Request::new("GET", &target)).status;
                let want = if *path == "cmdline" { 404 } else { 503 };
                assert_eq!(closed_status, want, "{target} on a closed gate");
                cases += 2;
            }
        }
    }
    drop(session.stop());
    eprintln!("FIGURE seconds fuzz in-process: {cases} requests, documented statuses only");
}

#[test]
fn absurd_seconds_over_http() {
    // The push to a refused loopback port holds the CPU sampler (so the 30 s default is refused as busy).
    let n = common::boot()
        .args(&[
            "-profiling-pyroscope",
            &common::unused_loopback_url(),
            "-profiling-upload-interval",
            "1s",
        ])
        .start();
    let mut cases = 0;
    for path in PATHS {
        for s in ABSURD_SECONDS {
            let target = format!("/debug/pprof/{path}?seconds={s}");
            let (status, headers, body) = n.http("GET", &target, b"");
            assert!(
                documented(path, s).contains(&status),
                "{target}: {status} {}",
                String::from_utf8_lossy(&body)
            );
            if status >= 400 && status != 404 {
                assert_eq!(
                    common::header(&headers, "x-go-pprof"),
                    Some("1"),
                    "{target}"
                );
            }
            cases += 1;
        }
    }
    assert!(!n.stderr().contains("panicked"));
    eprintln!("FIGURE seconds fuzz over HTTP: {cases} requests, documented statuses only");
}
