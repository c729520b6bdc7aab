//! A probe of the real binary while a test floods it: `GET /api/v1/profiling` on a fresh connection every
//! 100 ms, with the highest thread count, open descriptors and RSS seen, and a client that connects from a
//! chosen loopback address (for floods that need many peers).
//!
//! Only loopback; every loop is bounded; nothing here kills a process.

use crate::common::{status_field, threads_of, Nl6};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most threads the binary may have under any flood (it has 18 with the gate closed).
pub const MAX_THREADS: usize = 64;
/// Slowest acceptable answer to the probe while other helpers load the machine (measured figures are
/// printed; the promise is far tighter).
pub const GET_LIMIT: Duration = Duration::from_secs(1);

/// Open descriptors of `pid`.
pub fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// `GET /api/v1/profiling` on a fresh connection: (status, time taken). A failure to connect or read
/// within 5 s is status 0.
pub fn probe(addr: SocketAddr) -> (u16, Duration) {
    let t = Instant::now();
    let status = (|| -> std::io::Result<u16> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(
            b"GET /api/v1/profiling HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )?;
        let mut head = [0u8; 12];
        let mut got = 0;
        while got < head.len() {
            match s.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(std::str::from_utf8(&head[9..got.max(9)])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0))
    })()
    .unwrap_or(0);
    (status, t.elapsed())
}

/// What a [`Watch`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub probes: u64,
    pub worst: Duration,
    /// Median probe time.
    pub median: Duration,
    pub max_threads: usize,
    pub max_fds: usize,
    pub max_rss_kib: u64,
}

/// Probes every 100 ms on its own thread until stopped; a failure is a non-200 or an answer slower than
/// [`GET_LIMIT`].
pub struct Watch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(Vec<Duration>, Vec<String>, Seen)>,
}

impl Watch {
    pub fn start(n: &Nl6) -> Watch {
        let (addr, pid) = (n.addr, n.pid());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut times = Vec::new();
            let mut failures = Vec::new();
            let mut seen = Seen {
                probes: 0,
                worst: Duration::ZERO,
                median: Duration::ZERO,
                max_threads: 0,
                max_fds: 0,
                max_rss_kib: 0,
            };
            while !flag.load(Ordering::SeqCst) {
                let (status, took) = probe(addr);
                times.push(took);
                if status != 200 || took > GET_LIMIT {
                    failures.push(format!("status {status} in {took:?}"));
                }
                seen.max_threads = seen.max_threads.max(threads_of(pid));
                seen.max_fds = seen.max_fds.max(fds_of(pid));
                seen.max_rss_kib = seen.max_rss_kib.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(100));
            }
            (times, failures, seen)
        });
        Watch { stop, handle }
    }

    /// Stops and asserts: every probe 200 within [`GET_LIMIT`], threads ≤ [`MAX_THREADS`].
    pub fn finish(self, what: &str) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        let (mut times, failures, mut seen) = self.handle.join().expect("watch thread");
        assert!(!times.is_empty(), "{what}: no probe ran");
        assert!(
            failures.is_empty(),
            "{what}: GET /api/v1/profiling failed {} of {} times: {failures:?}",
            failures.len(),
            times.len()
        );
        assert!(
            seen.max_threads <= MAX_THREADS,
            "{what}: {} threads (limit {MAX_THREADS})",
            seen.max_threads
        );
        times.sort();
        seen.probes = times.len() as u64;
        seen.worst = *times.last().unwrap();
        seen.median = times[times.len() / 2];
        seen
    }
}

/// A TCP connection to `to` from the loopback address `from` (127.0.0.0/8), so one test can be many
/// peers. Blocking, like `TcpStream::connect`.
pub fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    assert!(from.is_loopback() && to.ip().is_loopback(), "loopback only");
    let SocketAddr::V4(to) = to else {
        panic!("IPv4 only")
    };
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; the address structs are valid and
    // sized for the calls; the descriptor is closed on every error path and otherwise handed to TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let local = sockaddr(from, 0);
        let remote = sockaddr(*to.ip(), to.port());
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0
            || libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpStream::from_raw_fd(fd))
    }
}
