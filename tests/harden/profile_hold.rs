//! Hardening: nothing holds the profiler once nobody may have it.
//!
//! - A client that goes away ends its timed request: a dropped `profile?seconds=20` frees the CPU sampler
//!   (no `nl6-cpu-collect` thread, no POSIX timer) within 2 s and the next CPU profile gets 200, not the
//!   busy 500; eight dropped `heap?seconds=30` deltas give back their timed slots.
//! - Closing the gate ends a running profile within 1 s (threads named `nl6-cpu-collect` counted in
//!   `/proc/PID/task/*/comm`, timers in `/proc/PID/timers`), whether a pull `profile` or the push holds
//!   the sampler (the push hung in an upload to a collector that never answers); the in-flight pull
//!   request gets the documented 503 naming the close, `heap?seconds=N` too.
use crate::common;

use common::{boot, request, wait_until, Nl6, Reply};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Threads of `pid` named `nl6-cpu-collect` (the CPU sampler's collector).
fn cpu_collectors(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "nl6-cpu-collect")
        .count()
}

/// POSIX timers of `pid` (`/proc/PID/timers` has one `ID:` line per timer).
fn posix_timers(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/timers"))
        .expect("/proc/PID/timers (kernel with CONFIG_CHECKPOINT_RESTORE)")
        .lines()
        .filter(|l| l.starts_with("ID:"))
        .count()
}

fn profiler_free(pid: u32) -> bool {
    cpu_collectors(pid) == 0 && posix_timers(pid) == 0
}

/// Sends a GET and leaves the connection open without reading.
fn send_get(nl6: &Nl6, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(nl6.addr).expect("connect");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", nl6.addr).expect("send");
    s
}

/// Runs one GET in a thread; its answer (or a panic message) comes back on join.
fn get_in_background(nl6: &Nl6, path: &str) -> std::thread::JoinHandle<(Reply, Instant)> {
    let (addr, path) = (nl6.addr, path.to_string());
    std::thread::spawn(move || {
        let r = request(addr, "GET", &path, &[], b"", Duration::from_secs(45));
        (r, Instant::now())
    })
}

/// The in-flight request got the documented 503 naming the close, within 2 s of `closed`.
fn assert_cut_by_the_close(inflight: std::thread::JoinHandle<(Reply, Instant)>, closed: Instant) {
    let ((s, _, body), at) = inflight.join().expect("in-flight request");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(s, 503, "{body}");
    assert!(body.contains("gate closed while the profile ran"), "{body}");
    assert!(at.duration_since(closed) < Duration::from_secs(2));
}

fn close_gate(nl6: &Nl6) {
    let (s, _, b) = nl6.http("POST", "/api/v1/profiling", br#"{"enabled":false}"#);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
}

#[test]
fn a_cpu_profile_whose_client_left_frees_the_sampler() {
    let nl6 = boot().start();
    nl6.open_pull_only();
    let pid = nl6.pid();
    let client = send_get(&nl6, "/debug/pprof/profile?seconds=20");
    assert!(
        wait_until(Duration::from_secs(5), || cpu_collectors(pid) == 1),
        "the profile did not start"
    );
    std::thread::sleep(Duration::from_secs(1));
    drop(client);
    let left = Instant::now();
    assert!(
        wait_until(Duration::from_secs(2), || profiler_free(pid)),
        "2 s after its client left, the profile still holds {} collector(s) and {} timer(s)",
        cpu_collectors(pid),
        posix_timers(pid)
    );
    eprintln!("sampler free {:?} after the client left", left.elapsed());
    let (s, _, b) = nl6.http("GET", "/debug/pprof/profile?seconds=1", b"");
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
}

#[test]
fn deltas_whose_clients_left_give_back_their_slots() {
    let nl6 = boot().start();
    nl6.open_pull_only();
    // Eight timed requests take every timed slot (MAX_TIMED); a ninth is refused while they run.
    let clients: Vec<TcpStream> = (0..8)
        .map(|_| send_get(&nl6, "/debug/pprof/heap?seconds=30"))
        .collect();
    // A probe admitted before all eight are holds a slot itself (and one delta is refused), so the probes
    // start only once the eight have had time to be admitted; none of them may have been answered (a
    // refusal is answered at once, an admitted delta says nothing for 30 s).
    std::thread::sleep(Duration::from_millis(1500));
    for (i, c) in clients.iter().enumerate() {
        c.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let answered =
            !matches!(c.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        assert!(!answered, "delta {i} was answered at once (refused?)");
    }
    assert!(
        wait_until(Duration::from_secs(5), || {
            nl6.http("GET", "/debug/pprof/goroutine?seconds=1", b"").0 == 503
        }),
        "the eight deltas never took every timed slot"
    );
    drop(clients);
    let mut last = (0, Vec::new(), Vec::new());
    let freed = wait_until(Duration::from_secs(3), || {
        last = nl6.http("GET", "/debug/pprof/goroutine?seconds=1", b"");
        last.0 == 200
    });
    assert!(
        freed,
        "3 s after their clients left, the deltas still hold the slots: {} {}",
        last.0,
        String::from_utf8_lossy(&last.2)
    );
}

#[test]
fn closing_the_gate_ends_a_pull_cpu_profile_within_a_second() {
    let nl6 = boot().start();
    nl6.open_pull_only();
    let pid = nl6.pid();
    let inflight = get_in_background(&nl6, "/debug/pprof/profile?seconds=30");
    assert!(
        wait_until(Duration::from_secs(5), || cpu_collectors(pid) == 1
            && posix_timers(pid) > 0),
        "the profile did not start"
    );
    close_gate(&nl6);
    let closed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(1), || profiler_free(pid)),
        "1 s after the gate closed: {} collector(s), {} timer(s)",
        cpu_collectors(pid),
        posix_timers(pid)
    );
    eprintln!("sampler free {:?} after the close", closed.elapsed());
    assert_cut_by_the_close(inflight, closed);
}

#[test]
fn closing_the_gate_ends_a_heap_delta() {
    let nl6 = boot().start();
    nl6.open_pull_only();
    let inflight = get_in_background(&nl6, "/debug/pprof/heap?seconds=30");
    std::thread::sleep(Duration::from_millis(500));
    close_gate(&nl6);
    let closed = Instant::now();
    assert_cut_by_the_close(inflight, closed);
}

#[test]
fn closing_the_gate_stops_the_push_sampler_while_an_upload_hangs() {
    // A collector that accepts and never answers: the push's upload hangs for its 10 s timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for s in silent.incoming().take(4).flatten() {
            kept.push(s);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    let nl6 = boot()
        .args(&[
            "-profiling-pyroscope",
            &url,
            "-profiling-upload-interval",
            "1s",
        ])
        .start();
    let pid = nl6.pid();
    assert!(
        wait_until(Duration::from_secs(5), || cpu_collectors(pid) == 1),
        "the push did not start its CPU sampler"
    );
    // Past the first interval the push thread sits in an upload nobody answers.
    std::thread::sleep(Duration::from_millis(2500));
    // The closing POST answers after the push's bounded flush; it runs in the background.
    let addr = nl6.addr;
    std::thread::spawn(move || {
        request(
            addr,
            "POST",
            "/api/v1/profiling",
            &[],
            br#"{"enabled":false}"#,
            Duration::from_secs(40),
        )
    });
    let posted = Instant::now();
    assert!(
        wait_until(Duration::from_millis(1500), || profiler_free(pid)),
        "1.5 s after the closing POST was sent: {} collector(s), {} timer(s)",
        cpu_collectors(pid),
        posix_timers(pid)
    );
    eprintln!("sampler free {:?} after the closing POST", posted.elapsed());
    drop(nl6);
    drop(held);
}
