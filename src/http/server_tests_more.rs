//! Strict framing, deferred answers, the per-address cap, the budget of answers waiting
//! for slow readers and the client probe, on a real loopback socket.
use super::tests_support::{closed_within, connect_and_settle, echo_server, roundtrip};
use super::*;
use crate::http::{Deferred, Waker};
use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use wire::{frame, Framed};

fn status_of(buf: &[u8]) -> Option<u16> {
    match frame(buf, 1024) {
        Framed::Refused(r) => Some(r.status),
        Framed::Complete { .. } => None,
        Framed::Incomplete => Some(0),
    }
}

#[test]
fn framing_refuses_what_a_proxy_could_read_differently() {
    let refused: &[(&[u8], u16)] = &[
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 411),
    ];
    for (raw, want) in refused {
        assert_eq!(
            status_of(raw),
            Some(*want),
            "{}",
            String::from_utf8_lossy(raw)
        );
    }
    // Served: identical repeated lengths (as Go), HTTP/1.0 without Host, an empty Host.
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na"[..],
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
    ] {
        assert_eq!(status_of(raw), None, "{}", String::from_utf8_lossy(raw));
    }
    match frame(b"GET /p HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 10) {
        Framed::Refused(r) => assert_eq!(r.message, "more than one Host header"),
        other => panic!("{other:?}"),
    }
}

/// A deferred answer that becomes ready when `open` is set (and its waker called), or at `deadline`.
struct Gate {
    open: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
    deadline: Instant,
}

impl Deferred for Gate {
    fn deadline(&self) -> Instant {
        self.deadline
    }
    fn ready(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }
    fn set_waker(&mut self, wake: Waker) {
        *self.waker.lock().unwrap() = Some(wake);
    }
    fn finish(self: Box<Self>) -> Response {
        let body = if self.ready() { "opened" } else { "timed out" };
        Response::new(200, "text/plain", body)
    }
}

#[test]
fn deferred_answers_hold_no_worker_and_come_when_woken_or_due() {
    let open = Arc::new(AtomicBool::new(false));
    let waker: Arc<Mutex<Option<Waker>>> = Arc::default();
    let (o, w) = (Arc::clone(&open), Arc::clone(&waker));
    let h: Arc<Handler> = Arc::new(move |r: &Request| {
        let secs = if r.path == "/short" { 0.3 } else { 30.0 };
        if r.path == "/fast" {
            return Response::new(200, "text/plain", "fast");
        }
        Response::deferred(Box::new(Gate {
            open: Arc::clone(&o),
            waker: Arc::clone(&w),
            deadline: Instant::now() + Duration::from_secs_f64(secs),
        }))
    });
    let server = Server::bind("127.0.0.1:0", ServerConfig::default().workers(1), h).unwrap();
    let mut waiting: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(server.local_addr()).unwrap();
            s.write_all(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    let mut short = TcpStream::connect(server.local_addr()).unwrap();
    short
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let t = Instant::now();
    let a = roundtrip(&mut short, b"GET /short HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(a.ends_with("timed out"), "{a}");
    assert!(t.elapsed() >= Duration::from_millis(250) && t.elapsed() < Duration::from_secs(3));
    // The only worker is free while four answers wait.
    let mut fast = TcpStream::connect(server.local_addr()).unwrap();
    fast.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    assert!(roundtrip(&mut fast, b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n").ends_with("fast"));
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    open.store(true, Ordering::SeqCst);
    let wake = waker.lock().unwrap().clone().expect("a waker was given");
    wake();
    let t = Instant::now();
    for s in &mut waiting {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let a = roundtrip(s, b"");
        assert!(a.ends_with("opened"), "{a}");
    }
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    server.shutdown();
}

#[test]
fn one_address_over_its_cap_loses_its_oldest_connection() {
    let server = echo_server(ServerConfig::default().max_per_peer(3));
    let mut oldest = connect_and_settle(&server);
    let mut kept: Vec<TcpStream> = (0..3).map(|_| connect_and_settle(&server)).collect();
    assert!(
        closed_within(&mut oldest, Duration::from_secs(3)),
        "the cap was not kept"
    );
    for (i, s) in kept.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let a = roundtrip(
            s,
            format!("GET /k{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert!(a.ends_with(&format!("GET /k{i} 0")), "{a}");
    }
    server.shutdown();
}

/// Reads until the end of the stream or `limit` bytes; returns how many came.
fn drain(s: &mut TcpStream, limit: usize) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut chunk = vec![0u8; 1 << 16];
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(20);
    while got < limit && Instant::now() < end {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}

#[test]
fn answers_waiting_for_readers_are_bounded_and_the_latest_reader_keeps_its_answer() {
    // 1 MiB of answers may wait. Two clients ask for 32 MiB and do not read: the one that took nothing
    // for longer is closed; the other still gets all of its answer once it reads.
    let server = echo_server(ServerConfig::default().max_pending_output(1 << 20));
    let whole = 32 << 20;
    let mut first = TcpStream::connect(server.local_addr()).unwrap();
    first
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut second = TcpStream::connect(server.local_addr()).unwrap();
    second
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let got_first = drain(&mut first, whole + 1024);
    assert!(
        got_first < whole,
        "the first client's answer was kept whole"
    );
    let got_second = drain(&mut second, whole);
    assert!(
        got_second >= whole,
        "the second client got {got_second} bytes"
    );
    server.shutdown();
}

#[test]
fn a_handler_learns_that_its_client_went_away() {
    let saw_gone = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&saw_gone);
    let h: Arc<Handler> = Arc::new(move |r: &Request| {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if r.client.gone() {
                flag.store(true, Ordering::SeqCst);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Response::new(200, "text/plain", "done")
    });
    let server = Server::bind("127.0.0.1:0", ServerConfig::default(), h).unwrap();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(b"GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !saw_gone.load(Ordering::SeqCst),
        "gone while the client waits"
    );
    drop(s);
    let end = Instant::now() + Duration::from_secs(3);
    while !saw_gone.load(Ordering::SeqCst) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        saw_gone.load(Ordering::SeqCst),
        "the handler never saw the client go"
    );
    assert!(
        !Request::new("GET", "/").client.gone(),
        "an in-process request has no client to lose"
    );
    server.shutdown();
}
