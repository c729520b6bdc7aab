//! Hardening: floods that could take every server worker or lock new clients out.
//!
//! - 32 clients pipeline 200 × `GET /` each and never read;
//! - 4150 half-open sockets (one request line each) from five loopback addresses, cycled oldest first, and
//!   1200 from one address;
//! - 48 POST loops while a closing push flushes to a hanging collector for 20 s.
//!
//! Throughout each: `GET /api/v1/profiling` on a fresh connection answers 200 within 1 s (the figures
//! printed are far lower), threads ≤ 64, descriptors and RSS bounded. Each test prints its figures
//! (`cargo test --test harden floods:: -- --nocapture`). Loopback only; every loop bounded in count and time.
use crate::common;
use crate::harden_support;

use common::boot;
use harden_support::watch::{connect_from, fds_of, probe, rss_kib, Seen, Watch};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn figure(what: &str, seen: &Seen) {
    eprintln!(
        "FIGURE {what}: {} probes, median GET {:?}, worst {:?}; max {} threads, {} fds, VmRSS {} KiB",
        seen.probes, seen.median, seen.worst, seen.max_threads, seen.max_fds, seen.max_rss_kib
    );
}

#[test]
fn clients_that_pipeline_and_never_read_hold_no_worker() {
    let n = boot().start();
    let pid = n.pid();
    let (fds_before, rss_before) = (fds_of(pid), rss_kib(pid));
    let watch = Watch::start(&n);
    let pipeline = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(200);
    let mut silent = Vec::new();
    for _ in 0..32 {
        let mut s = TcpStream::connect_timeout(&n.addr, Duration::from_secs(5)).expect("connect");
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(pipeline.as_bytes()).expect("send the pipeline");
        silent.push(s);
    }
    // The gate can be opened and closed meanwhile, each within the same bound.
    std::thread::sleep(Duration::from_millis(1000));
    for body in [
        &br#"{"enabled":true,"server_address":""}"#[..],
        br#"{"enabled":false}"#,
    ] {
        let t = Instant::now();
        let (s, _, b) = n.http_with(
            "POST",
            "/api/v1/profiling",
            &[],
            body,
            Duration::from_secs(5),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "POST took {:?}",
            t.elapsed()
        );
    }
    std::thread::sleep(Duration::from_millis(3000));
    let seen = watch.finish("32 pipelining clients that never read");
    // One response per connection may wait in the server (the rest is in the kernel's buffers).
    assert!(
        seen.max_fds <= fds_before + 32 + 8,
        "{} fds (before the flood {fds_before})",
        seen.max_fds
    );
    assert!(
        seen.max_rss_kib <= rss_before + 64 * 1024,
        "VmRSS {} KiB (before the flood {rss_before} KiB)",
        seen.max_rss_kib
    );
    // A client that finally reads gets all 200 answers, in order and whole.
    assert_eq!(pipelined_pages(&mut silent[0], 200), 200);
    figure("slow readers: 32 x 200 pipelined GET /, never read", &seen);
}

/// Reads up to `n` pipelined answers (each framed by its Content-Length) and counts those that are a 200
/// with the whole console page.
fn pipelined_pages(s: &mut TcpStream, n: usize) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut pages = 0;
    let end = Instant::now() + Duration::from_secs(20);
    while pages < n && Instant::now() < end {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let len: usize = text[..head_end]
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .expect("Content-Length");
            if buf.len() >= head_end + 4 + len {
                let body = String::from_utf8_lossy(&buf[head_end + 4..head_end + 4 + len]);
                if text.starts_with("HTTP/1.1 200 ") && body.contains("</html>") {
                    pages += 1;
                }
                buf.drain(..head_end + 4 + len);
                continue;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    pages
}

/// Opens `n` sockets from `addrs` in turn, each sending one request line and nothing more. (The server
/// may close one before its line is sent: that is its right, and not an error here.)
fn half_open(n: usize, addrs: &[Ipv4Addr], to: std::net::SocketAddr) -> VecDeque<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = connect_from(addrs[i % addrs.len()], to).expect("connect");
            let _ = s.write_all(b"GET /api/v1/profiling HTTP/1.1\r\n");
            s
        })
        .collect()
}

#[test]
fn half_open_sockets_from_five_addresses_do_not_lock_out_a_new_client() {
    nl6::http::sys::raise_nofile_limit().expect("raise this test's RLIMIT_NOFILE");
    let n = boot().start();
    let fds_before = fds_of(n.pid());
    let addrs: Vec<Ipv4Addr> = (2..=6).map(|d| Ipv4Addr::new(127, 0, 0, d)).collect();
    // 4150 held: over the server's 4096, under its 1024 per address.
    let mut held = half_open(4150, &addrs, n.addr);
    let stop = Arc::new(AtomicBool::new(false));
    let cycled = Arc::new(AtomicUsize::new(0));
    let (flag, count, to) = (stop.clone(), cycled.clone(), n.addr);
    // The attacker cycles: drops its oldest socket and opens a new half-open one, for at most 8 s.
    let attacker = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(8);
        let mut i = 0;
        while !flag.load(Ordering::SeqCst) && Instant::now() < end && i < 40_000 {
            held.pop_front();
            held.extend(half_open(1, &addrs[i % addrs.len()..][..1], to));
            i += 1;
            count.store(i, Ordering::SeqCst);
        }
        held
    });
    let watch = Watch::start(&n);
    std::thread::sleep(Duration::from_secs(5));
    let seen = watch.finish("4150 half-open sockets from 5 addresses, cycled");
    stop.store(true, Ordering::SeqCst);
    let held = attacker.join().expect("attacker");
    // The limit (it counts every open connection) and the process's own descriptors.
    assert!(
        seen.max_fds <= fds_before + 4096 + 64,
        "{} fds held with a limit of 4096 connections ({fds_before} before the flood)",
        seen.max_fds
    );
    assert!(
        n.wait_for_log(
            "connections held, the limit is 4096",
            Duration::from_secs(2)
        ),
        "{}",
        n.stderr()
    );
    figure(
        &format!(
            "half-open: 4150 sockets from 5 addresses, {} cycled",
            cycled.load(Ordering::SeqCst)
        ),
        &seen,
    );
    drop(held);
}

/// True when the server has closed `s` (end of stream or reset); false while it is still open.
fn closed_by_server(mut s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[test]
fn one_address_holds_at_most_1024_connections() {
    nl6::http::sys::raise_nofile_limit().expect("raise this test's RLIMIT_NOFILE");
    let n = boot().start();
    let pid = n.pid();
    let fds_before = fds_of(pid);
    let watch = Watch::start(&n);
    let one = [Ipv4Addr::new(127, 0, 0, 2)];
    let mut held = half_open(1200, &one, n.addr);
    // Well within the 10 s the server allows a request to arrive.
    let settled = common::wait_until(Duration::from_secs(4), || {
        fds_of(pid) <= fds_before + 1024 + 2
    });
    // Hold them while the watch probes a little longer.
    std::thread::sleep(Duration::from_secs(2));
    let seen = watch.finish("1200 half-open sockets from one address");
    assert!(
        settled,
        "{} fds: the server holds more than 1024 connections of one address",
        fds_of(pid)
    );
    // The oldest ones went; the newest are still served.
    std::thread::sleep(Duration::from_millis(200));
    let closed_oldest = held
        .iter()
        .take(100)
        .filter(|s| closed_by_server(s))
        .count();
    let closed_newest = held
        .iter()
        .rev()
        .take(100)
        .filter(|s| closed_by_server(s))
        .count();
    assert_eq!(
        closed_oldest, 100,
        "the oldest sockets of the address were kept"
    );
    assert_eq!(
        closed_newest, 0,
        "the newest sockets of the address were closed"
    );
    let mut newest = held.pop_back().unwrap();
    newest.set_nonblocking(false).unwrap();
    newest
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    newest.write_all(b"Host: 127.0.0.1\r\n\r\n").unwrap();
    assert_eq!(common::read_reply(&mut newest, false).0, 200);
    let lines = n.log_lines("nl6: http: 127.0.0.2 holds 1024 connections");
    assert_eq!(lines.len(), 1, "{}", n.stderr());
    assert_eq!(probe(n.addr).0, 200);
    figure("one address: 1200 half-open sockets", &seen);
}

#[test]
fn post_loops_during_a_closing_flush_do_not_slow_get() {
    // A collector that never accepts: every upload hangs, so the closing flush takes its 20 s budget.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the hanging collector");
    let url = format!("http://{}", hang.local_addr().unwrap());
    let n = Arc::new(
        boot()
            .args(&[
                "-profiling-pyroscope",
                &url,
                "-profiling-upload-interval",
                "1s",
            ])
            .start(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let closer = {
        let n = Arc::clone(&n);
        std::thread::spawn(move || {
            let t = Instant::now();
            let (s, _, _) = n.http_with(
                "POST",
                "/api/v1/profiling",
                &[],
                br#"{"enabled":false}"#,
                Duration::from_secs(40),
            );
            (s, t.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // 48 clients POST in a loop for 6 s: three times as many as the server has workers.
    let stop_at = Instant::now() + Duration::from_secs(6);
    let posters: Vec<_> = (0..48)
        .map(|_| {
            let n = Arc::clone(&n);
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                while Instant::now() < stop_at && answers.len() < 50 {
                    let t = Instant::now();
                    let (s, _, _) = n.http_with(
                        "POST",
                        "/api/v1/profiling",
                        &[],
                        br#"{"enabled":true,"server_address":""}"#,
                        Duration::from_secs(10),
                    );
                    answers.push((s, t.elapsed()));
                }
                answers
            })
        })
        .collect();
    let watch = Watch::start(&n);
    std::thread::sleep(Duration::from_secs(5));
    let seen = watch.finish("48 POST loops during a 20 s closing flush");
    let mut slowest_409 = Duration::ZERO;
    let mut count = 0;
    for p in posters {
        for (s, took) in p.join().expect("poster") {
            assert_eq!(s, 409, "a POST during the flush");
            // The documented wait: at most 1 s for the transition, then 409 (generous for a loaded machine).
            assert!(took < Duration::from_secs(3), "a 409 took {took:?}");
            slowest_409 = slowest_409.max(took);
            count += 1;
        }
    }
    let (s, took) = closer.join().expect("closer");
    assert_eq!(s, 200);
    assert!(took < Duration::from_secs(25), "closing took {took:?}");
    // The line is logged before the answer is written, but this test reads the log on another thread.
    assert!(n.wait_for_log("[profiling] POST", Duration::from_secs(5)));
    assert_eq!(n.log_lines("[profiling] POST").len(), 1, "{}", n.stderr());
    figure(
        &format!("POST loops: 48 clients, {count} POSTs answered 409 (slowest {slowest_409:?}) during a {took:?} close"),
        &seen,
    );
    drop(hang);
}
