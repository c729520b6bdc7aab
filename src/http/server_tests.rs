//! Framing, keep-alive, panics, idle drop, slow senders and slow readers, the connection limit, on a real
//! loopback socket.
use super::*;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;
use wire::{frame, Framed};

fn complete(buf: &[u8]) -> (Request, usize, bool) {
    match frame(buf, 1024) {
        Framed::Complete {
            request,
            consumed,
            keep_alive,
        } => (request, consumed, keep_alive),
        other => panic!("not complete: {other:?}"),
    }
}

#[test]
fn frames_a_get_with_query() {
    let (r, n, ka) = complete(b"GET /debug/pprof/heap?gc=1 HTTP/1.1\r\nHost: x\r\n\r\nrest");
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.query.as_str()),
        ("GET", "/debug/pprof/heap", "gc=1")
    );
    assert_eq!(n, 48);
    assert!(ka);
    assert_eq!(r.header("HOST"), Some("x"));
}

#[test]
fn frames_bodies_by_content_length() {
    let head = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n";
    let mut buf = head.to_vec();
    buf.extend_from_slice(b"ab");
    assert_eq!(frame(&buf, 1024), Framed::Incomplete);
    buf.extend_from_slice(b"cdGET");
    let (r, n, _) = complete(&buf);
    assert_eq!(r.body, b"abcd");
    assert_eq!(n, head.len() + 4);
}

#[test]
fn refuses_what_it_cannot_frame() {
    assert_eq!(frame(b"GET / HTTP/1.1\r\n", 10), Framed::Incomplete);
    assert!(matches!(
        frame(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 10),
        Framed::Refused(Refusal { status: 411, .. })
    ));
    assert!(matches!(
        frame(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 10),
        Framed::Refused(Refusal { status: 413, .. })
    ));
    assert!(matches!(
        frame(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 10),
        Framed::Refused(Refusal { status: 400, .. })
    ));
    assert!(matches!(
        frame(b"\x00\x01garbage\r\n\r\n", 10),
        Framed::Refused(Refusal { status: 400, .. })
    ));
    // A refusal names the limit and, once the head has one, the path (the surface picks the shape).
    match frame(
        b"POST /api/v1/x?q=1 HTTP/1.1\r\nContent-Length: 11\r\n\r\n",
        10,
    ) {
        Framed::Refused(r) => {
            assert_eq!(r.path.as_deref(), Some("/api/v1/x"));
            assert_eq!(r.message, "request body is 11 bytes; the limit is 10");
        }
        other => panic!("{other:?}"),
    }
    let big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD + 10));
    assert!(matches!(
        frame(big.as_bytes(), 10),
        Framed::Refused(Refusal { status: 431, .. })
    ));
}

#[test]
fn connection_close_and_http10_end_keep_alive() {
    assert!(!complete(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").2);
    assert!(!complete(b"GET / HTTP/1.0\r\n\r\n").2);
    assert!(complete(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").2);
}

pub(super) fn echo_server(config: ServerConfig) -> Server {
    let h: Arc<Handler> = Arc::new(|r: &Request| {
        if r.path == "/panic" {
            panic!("handler panic for a test");
        }
        if r.path == "/big" {
            return Response::new(200, "application/octet-stream", vec![7u8; 32 << 20]);
        }
        Response::new(
            200,
            "text/plain",
            format!("{} {} {}", r.method, r.path, r.body.len()),
        )
    });
    Server::bind("127.0.0.1:0", config, h).unwrap()
}

pub(super) fn roundtrip(s: &mut TcpStream, req: &[u8]) -> String {
    let head_only = req.starts_with(b"HEAD ");
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&out);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if head_only || body.len() >= len {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn serves_keep_alive_pipelined_and_survives_a_panic() {
    let server = echo_server(ServerConfig::default().workers(2));
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let a = roundtrip(&mut s, b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(a.starts_with("HTTP/1.1 200 OK\r\n"), "{a}");
    assert!(a.contains("X-Content-Type-Options: nosniff\r\n"));
    assert!(a.ends_with("GET /one 0"));
    let b = roundtrip(
        &mut s,
        b"POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert!(b.ends_with("POST /two 3"), "{b}");
    let p = roundtrip(&mut s, b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(p.starts_with("HTTP/1.1 500 "), "{p}");
    let c = roundtrip(&mut s, b"HEAD /three HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        c.contains("Content-Length: 13\r\n") && c.ends_with("\r\n\r\n"),
        "{c}"
    );
    server.shutdown();
}

#[test]
fn idle_connections_are_dropped_after_the_idle_timeout() {
    let server = echo_server(ServerConfig::default().idle_timeout(Duration::from_millis(200)));
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut b = [0u8; 16];
    let n = loop {
        match s.read(&mut b) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    assert!(
        matches!(n, Ok(0)) || n.is_err(),
        "expected the server to close: {n:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    server.shutdown();
}

#[test]
fn a_slow_sender_does_not_hold_a_worker() {
    // One worker: a client trickling its head must not stop another client being served.
    let server = echo_server(ServerConfig::default().workers(1));
    let mut slow = TcpStream::connect(server.local_addr()).unwrap();
    slow.write_all(b"GET /slow HT").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut fast = TcpStream::connect(server.local_addr()).unwrap();
    fast.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let a = roundtrip(&mut fast, b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(a.ends_with("GET /fast 0"), "{a}");
    assert!(started.elapsed() < Duration::from_secs(1));
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let b = roundtrip(&mut slow, b"TP/1.1\r\nHost: x\r\n\r\n");
    assert!(b.ends_with("GET /slow 0"), "{b}");
    server.shutdown();
}

#[test]
fn a_slow_reader_holds_a_worker_only_until_the_write_deadline() {
    let config = ServerConfig::default()
        .workers(1)
        .write_timeout(Duration::from_millis(300));
    let server = echo_server(config);
    // Asks for 32 MiB and never reads: the kernel buffers fill and the write blocks.
    let mut stuck = TcpStream::connect(server.local_addr()).unwrap();
    stuck
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut next = TcpStream::connect(server.local_addr()).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let a = roundtrip(&mut next, b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(a.ends_with("GET /after 0"), "{a}");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "the only worker was held {waited:?}"
    );
    drop(stuck);
    server.shutdown();
}

/// Reads until the server closes the connection (true) or `limit` passes (false).
pub(super) fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let end = Instant::now() + limit;
    let mut b = [0u8; 64];
    while Instant::now() < end {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    false
}

pub(super) fn connect_and_settle(server: &Server) -> TcpStream {
    let s = TcpStream::connect(server.local_addr()).unwrap();
    // Let the poll thread accept it, so connection order is parking order.
    std::thread::sleep(Duration::from_millis(60));
    s
}

#[test]
fn over_the_connection_limit_the_oldest_idle_connection_is_closed() {
    let server = echo_server(ServerConfig::default().max_connections(3));
    let mut oldest = connect_and_settle(&server);
    let mut kept: Vec<TcpStream> = (0..2).map(|_| connect_and_settle(&server)).collect();
    assert!(
        !closed_within(&mut oldest, Duration::from_millis(200)),
        "closed while at the limit, not over it"
    );
    kept.push(connect_and_settle(&server));
    assert!(
        closed_within(&mut oldest, Duration::from_secs(3)),
        "the fourth connection did not push the oldest idle one out"
    );
    for (i, s) in kept.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let a = roundtrip(
            s,
            format!("GET /kept{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert!(a.ends_with(&format!("GET /kept{i} 0")), "{a}");
    }
    server.shutdown();
}

#[test]
fn over_the_limit_the_connection_longest_without_progress_goes_first_whatever_it_does() {
    // Every held connection is mid-request (as a half-open flood makes them): the new client is not the
    // one closed, the oldest is.
    let server = echo_server(ServerConfig::default().max_connections(2));
    let mut oldest = connect_and_settle(&server);
    oldest.write_all(b"GET /slow HT").unwrap();
    let mut second = connect_and_settle(&server);
    second.write_all(b"GET /slow HT").unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let mut newest = connect_and_settle(&server);
    assert!(
        closed_within(&mut oldest, Duration::from_secs(3)),
        "the oldest connection was kept over the limit"
    );
    newest
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let b = roundtrip(&mut newest, b"GET /new HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(b.ends_with("GET /new 0"), "{b}");
    second
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let a = roundtrip(&mut second, b"TP/1.1\r\nHost: x\r\n\r\n");
    assert!(a.ends_with("GET /slow 0"), "{a}");
    server.shutdown();
}

#[test]
fn an_idle_connection_keeps_no_request_buffer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let peers = Arc::new(peers::PeerTable::default());
    let conn = |stream: TcpStream, buf: Vec<u8>| {
        let key = peers::PeerKey::of(std::net::Ipv4Addr::LOCALHOST.into());
        let mut c = Conn::new(
            stream,
            peers::PeerSlot::claim(&peers, key).0,
            Instant::now(),
        );
        c.buf = buf;
        c
    };
    let mut buf = Vec::with_capacity(200 * 1024);
    buf.extend_from_slice(b"GET /next");
    let mid_request = conn::park(conn(stream.try_clone().unwrap(), buf));
    assert_eq!(
        mid_request.buf, b"GET /next",
        "a partial request keeps its bytes"
    );
    assert!(mid_request.request_started.is_some());
    let mut served = Vec::with_capacity(200 * 1024);
    served.extend_from_slice(b"a whole request");
    served.clear();
    let idle = conn::park(conn(stream, served));
    assert_eq!(idle.buf.capacity(), 0, "an idle connection kept its buffer");
}
