//! Serving under many connections, against the real binary: 1000 idle or trickling connections are held
//! with at most 64 threads while `GET /api/v1/profiling` answers 200 within 1 s; idle connections are
//! dropped after the read timeout; accept errors (EMFILE) are survived and logged once per burst.
use crate::common;

use common::{boot, Nl6};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads: line")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn timed_get(n: &Nl6) -> (u16, Duration) {
    let t = Instant::now();
    let (s, _, _) = n.http_with("GET", "/api/v1/profiling", &[], b"", Duration::from_secs(5));
    (s, t.elapsed())
}

#[test]
fn a_thousand_idle_and_slow_connections_with_bounded_threads() {
    // This test process holds 1000 sockets too.
    nl6::http::sys::raise_nofile_limit().expect("raise this test's RLIMIT_NOFILE");
    let n = boot().start();
    let pid = n.pid();
    let baseline_fds = open_fds(pid);
    let mut conns = Vec::with_capacity(1000);
    for i in 0..1000 {
        let mut s = TcpStream::connect_timeout(&n.addr, Duration::from_secs(5)).expect("connect");
        if i % 2 == 1 {
            // Half trickle the start of a request head and then stall.
            s.write_all(b"GET /api/v1/prof").unwrap();
        }
        conns.push(s);
    }
    assert!(
        common::wait_until(Duration::from_secs(10), || open_fds(pid)
            >= baseline_fds + 1000),
        "server holds only {} fds",
        open_fds(pid)
    );
    for _ in 0..5 {
        let (status, took) = timed_get(&n);
        assert_eq!(status, 200);
        assert!(
            took < Duration::from_secs(1),
            "GET took {took:?} with 1000 connections open"
        );
    }
    let threads = threads_of(pid);
    assert!(threads <= 64, "{threads} threads with 1000 connections");
    eprintln!("1000 connections: {threads} threads, {} fds", open_fds(pid));
    // Idle and stalled connections are dropped after the 10 s read timeouts.
    let deadline = Instant::now() + Duration::from_secs(20);
    while open_fds(pid) > baseline_fds + 10 {
        assert!(
            Instant::now() < deadline,
            "still {} fds after 20 s",
            open_fds(pid)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(conns);
    assert_eq!(timed_get(&n).0, 200);
}

#[test]
fn accept_errors_are_survived_and_logged_once() {
    // A hard limit of 64 descriptors: the server runs out while 100 clients connect.
    let n = boot().nofile(64).start();
    let mut conns = Vec::new();
    for _ in 0..100 {
        match TcpStream::connect_timeout(&n.addr, Duration::from_secs(2)) {
            Ok(s) => conns.push(s),
            Err(_) => break,
        }
    }
    assert!(
        n.wait_for_log("nl6: http: accept failed: ", Duration::from_secs(5)),
        "{}",
        n.stderr()
    );
    std::thread::sleep(Duration::from_millis(500));
    drop(conns);
    // The server keeps accepting: the next request is answered.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _) = timed_get(&n);
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no 200 after the burst");
    }
    let failures = n.log_lines("nl6: http: accept failed").len();
    assert!(
        (1..=3).contains(&failures),
        "accept failures logged {failures} times: {}",
        n.stderr()
    );
}
