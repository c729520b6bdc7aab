//! Hardening: request shapes that a proxy in front and nl6 could frame differently
//! (RFC 9112 §6.3, §3.2). Each is answered 400 (or 411) and the connection is closed, so a request hidden
//! in a body is never served; the well-formed neighbours of each shape are still served.
use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `raw` on a fresh connection and reads until the server closes it (at most 5 s). Returns the
/// statuses of every response received and whether the server closed the connection.
fn exchange(addr: std::net::SocketAddr, raw: &[u8]) -> (Vec<u16>, bool) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.write_all(raw).expect("send");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = Instant::now() + Duration::from_secs(5);
    let closed = loop {
        if Instant::now() > end {
            break false;
        }
        match s.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            // Nothing more within 200 ms after an answer: the server keeps the connection open.
            Err(_) if !got.is_empty() => break false,
            Err(_) => {}
        }
    };
    let text = String::from_utf8_lossy(&got);
    let statuses = text
        .match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect();
    (statuses, closed)
}

#[test]
fn ambiguous_framing_is_refused_and_the_connection_closed() {
    let n = common::boot().start();
    let hidden = "GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let cases: Vec<(&str, String)> = vec![
        (
            "two differing Content-Length",
            format!(
                "POST /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nContent-Length: 0\r\n\r\n{hidden}",
                hidden.len()
            ),
        ),
        (
            "Content-Length as a list",
            format!(
                "POST /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0, {}\r\n\r\n{hidden}",
                hidden.len()
            ),
        ),
        (
            "a signed Content-Length",
            format!("GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: +0\r\n\r\n{hidden}"),
        ),
        (
            "HTTP/1.1 without Host",
            format!("GET /api/v1/profiling HTTP/1.1\r\n\r\n{hidden}"),
        ),
        (
            "two Host headers",
            format!("GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: y\r\n\r\n{hidden}"),
        ),
        (
            "chunked and Content-Length",
            format!(
                "POST /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n{hidden}"
            ),
        ),
        (
            "Transfer-Encoding on a GET",
            format!("GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n\r\n{hidden}"),
        ),
    ];
    for (what, raw) in &cases {
        let (statuses, closed) = exchange(n.addr, raw.as_bytes());
        assert_eq!(statuses.len(), 1, "{what}: answers {statuses:?}");
        assert!(
            [400, 411].contains(&statuses[0]),
            "{what}: answered {statuses:?}"
        );
        assert!(closed, "{what}: the connection was kept open");
    }
    // The well-formed neighbours are served: repeated identical lengths (as Go accepts), HTTP/1.0
    // without Host, and a pipelined pair with Host.
    let ok: Vec<(&str, String)> = vec![
        (
            "identical Content-Length twice",
            format!(
                "POST /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 17\r\nContent-Length: 17\r\nConnection: close\r\n\r\n{}",
                r#"{"enabled":false}"#
            ),
        ),
        (
            "HTTP/1.0 without Host",
            "GET /api/v1/profiling HTTP/1.0\r\n\r\n".to_string(),
        ),
        (
            "two requests with Host",
            format!("GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n{hidden}"),
        ),
    ];
    for (what, raw) in &ok {
        let (statuses, _) = exchange(n.addr, raw.as_bytes());
        assert!(
            !statuses.is_empty() && statuses.iter().all(|&s| s == 200),
            "{what}: answers {statuses:?}"
        );
    }
    // The refusals name what was wrong.
    let (s, _, body) = common::request(
        n.addr,
        "GET",
        "/api/v1/profiling",
        &[("Host", "second")],
        b"",
        Duration::from_secs(5),
    );
    assert_eq!(s, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("Host"),
        "{}",
        String::from_utf8_lossy(&body)
    );
}
