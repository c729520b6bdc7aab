//! Syslog export read by our own receivers: RFC 5424 over UDP, RFC 6587 octet counting over TCP, a TCP
//! receiver restart mid-stream with nothing lost, and the queue bound with counted drops.
use crate::common;

use common::wait_for;
use nl6::http::Request;
use nl6::lab::syslog::{parse_octet_counted, Transport};
use nl6::lab::{api, Fleet, FleetConfig};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn fleet(n: usize, target: (Transport, SocketAddr), every: Duration, queue: usize) -> Fleet {
    let cfg = FleetConfig::default()
        .with_devices(n)
        .with_snmp_port(0)
        .with_syslog_target(Some(target), every)
        .with_syslog_queue(queue);
    Fleet::start(cfg).unwrap()
}

/// The fields of an RFC 5424 message as we emit it: (PRI+VERSION, TIMESTAMP, HOSTNAME, APP-NAME, PROCID,
/// MSGID, SD, MSG), checked token by token.
fn fields(msg: &[u8]) -> Vec<String> {
    let s = std::str::from_utf8(msg).unwrap();
    let mut parts: Vec<String> = s.splitn(7, ' ').map(str::to_string).collect();
    let rest = parts.pop().unwrap();
    let (sd, text) = rest
        .split_once("] ")
        .map(|(a, b)| (format!("{a}]"), b.to_string()))
        .unwrap_or((rest, String::new()));
    parts.push(sd);
    parts.push(text);
    parts
}

fn sequence_id(msg: &[u8]) -> u64 {
    let s = String::from_utf8_lossy(msg);
    let at = s.find("sequenceId=\"").unwrap() + 12;
    s[at..].split('"').next().unwrap().parse().unwrap()
}

#[test]
fn udp_messages_are_rfc5424() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let f = fleet(
        2,
        (Transport::Udp, rx.local_addr().unwrap()),
        Duration::from_secs(3600),
        16,
    );
    assert!(f.emit_syslog(1, "hello lab"));
    let mut buf = [0u8; 2048];
    let n = rx.recv(&mut buf).unwrap();
    let p = fields(&buf[..n]);
    assert_eq!(p[0], "<190>1", "local7.info, version 1");
    let ts = p[1].as_bytes();
    assert_eq!(
        (ts.len(), ts[4], ts[10], ts[19], ts[23]),
        (24, b'-', b'T', b'.', b'Z'),
        "{}",
        p[1]
    );
    assert_eq!(
        &p[2..6],
        [
            "nl6-dev-0001",
            "nl6",
            &std::process::id().to_string(),
            "EVENT"
        ]
    );
    assert_eq!(p[6], "[meta sequenceId=\"1\"]");
    assert_eq!(p[7], "hello lab");
    assert_eq!(
        f.devices()[1].counters.syslog_sent.load(Ordering::Relaxed),
        1
    );
}

#[test]
fn periodic_messages_are_jittered_not_in_lockstep() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let every = Duration::from_millis(300);
    let start = Instant::now();
    let f = fleet(4, (Transport::Udp, rx.local_addr().unwrap()), every, 16);
    let mut first = [None; 4];
    let mut count = [0; 4];
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_millis(1500) {
        if let Ok(n) = rx.recv(&mut buf) {
            let host = fields(&buf[..n])[2].clone();
            let i: usize = host.trim_start_matches("nl6-dev-").parse().unwrap();
            count[i] += 1;
            first[i].get_or_insert(start.elapsed());
        }
    }
    drop(f);
    for (i, c) in count.iter().enumerate() {
        assert!(
            (3..=7).contains(c),
            "device {i} sent {c} messages in 1.5 s at a 300 ms interval"
        );
    }
    let mut firsts: Vec<u128> = first.iter().map(|t| t.unwrap().as_millis() / 25).collect();
    firsts.sort();
    firsts.dedup();
    assert!(
        firsts.len() >= 3,
        "devices start at different phases: {first:?}"
    );
}

/// Reads from `conn` until `out` holds `want` frames in total (frames already in `out` count).
fn read_frames(conn: &mut TcpStream, want: usize, acc: &mut Vec<u8>, out: &mut Vec<Vec<u8>>) {
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 4096];
    while out.len() < want {
        assert!(
            Instant::now() < deadline,
            "only {} of {want} frames arrived",
            out.len()
        );
        match conn.read(&mut buf) {
            Ok(0) => panic!("sender closed the connection"),
            Ok(n) => acc.extend_from_slice(&buf[..n]),
            Err(_) => continue,
        }
        let (msgs, used) = parse_octet_counted(acc).expect("octet-counting framing");
        acc.drain(..used);
        out.extend(msgs);
    }
}

#[test]
fn tcp_uses_octet_counting_framing() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let f = fleet(
        1,
        (Transport::Tcp, l.local_addr().unwrap()),
        Duration::from_secs(3600),
        16,
    );
    let (mut conn, _) = l.accept().unwrap();
    for text in ["one", "two é", "three"] {
        assert!(f.emit_syslog(0, text));
    }
    // Check the first frame by hand before the shared parser: ASCII digits, one space, that many octets.
    let mut raw = Vec::new();
    let mut out = Vec::new();
    read_frames(&mut conn, 3, &mut raw, &mut out);
    for (m, text) in out.iter().zip(["one", "two é", "three"]) {
        let mut framed = Vec::new();
        nl6::lab::syslog::frame_octet_counting(m, &mut framed);
        let sp = framed.iter().position(|b| *b == b' ').unwrap();
        assert_eq!(
            std::str::from_utf8(&framed[..sp])
                .unwrap()
                .parse::<usize>()
                .unwrap(),
            m.len()
        );
        assert!(m.starts_with(b"<190>1 "));
        assert!(
            m.ends_with(text.as_bytes()),
            "{}",
            String::from_utf8_lossy(m)
        );
    }
    assert_eq!(
        out.iter().map(|m| sequence_id(m)).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    wait_for("sent counter", 2, || {
        f.devices()[0].counters.syslog_sent.load(Ordering::Relaxed) == 3
    });
}

#[test]
fn tcp_receiver_restart_loses_nothing_the_queue_holds() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let f = fleet(1, (Transport::Tcp, addr), Duration::from_secs(3600), 64);
    let (mut conn, _) = l.accept().unwrap();
    let mut got = Vec::new();
    let mut acc = Vec::new();
    for i in 0..5 {
        assert!(f.emit_syslog(0, &format!("before {i}")));
    }
    read_frames(&mut conn, 5, &mut acc, &mut got);
    // The receiver goes away mid-stream...
    drop(conn);
    drop(l);
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..10 {
        assert!(
            f.emit_syslog(0, &format!("during {i}")),
            "the queue holds them"
        );
    }
    wait_for("messages to wait in the queue", 2, || {
        f.syslog_queue_len() > 0
    });
    // ...and comes back on the same port.
    let l = TcpListener::bind(addr).unwrap();
    let (mut conn, _) = l.accept().unwrap();
    let mut acc = Vec::new();
    // `got` already holds the 5 frames from before the restart: wait for all 15.
    read_frames(&mut conn, 15, &mut acc, &mut got);
    let seqs: Vec<u64> = got.iter().map(|m| sequence_id(m)).collect();
    assert_eq!(
        seqs,
        (1..=15).collect::<Vec<_>>(),
        "every message once, in order"
    );
    assert_eq!(
        f.devices()[0]
            .counters
            .syslog_dropped
            .load(Ordering::Relaxed),
        0
    );
}

#[test]
fn beyond_the_queue_bound_messages_are_dropped_and_counted() {
    // A port with nothing listening: the sender keeps backing off, the queue fills.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let f = fleet(1, (Transport::Tcp, addr), Duration::from_secs(3600), 3);
    let accepted = (0..10)
        .filter(|i| f.emit_syslog(0, &format!("m{i}")))
        .count();
    assert_eq!(accepted, 3);
    let r = api::route(&Request::new("GET", "/api/v1/devices"), &f).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["data"][0]["counters"]["syslog_dropped"], 7);
    assert_eq!(v["data"][0]["counters"]["dropped"], 7);
    // Once a receiver appears the three queued messages arrive.
    let l = TcpListener::bind(addr).unwrap();
    let (mut conn, _) = l.accept().unwrap();
    let (mut acc, mut got) = (Vec::new(), Vec::new());
    read_frames(&mut conn, 3, &mut acc, &mut got);
    assert!(got[0].ends_with(b"m0") && got[2].ends_with(b"m2"));
}
