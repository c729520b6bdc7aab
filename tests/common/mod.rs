//! Shared helper for integration tests that boot the real `nl6` binary.
//!
//! - [`boot`] builds a command line ([`Boot::arg`], [`Boot::env`], [`Boot::nofile`], [`Boot::under`]); [`Boot::start`]
//!   serves on a free loopback port (`-listen 127.0.0.1:0` unless the test gives `-listen`/`-port`) and
//!   waits, bounded, for the boot line that names the bound address; [`Boot::run`] runs a command to
//!   completion (refusals, `--version`) with a bound on its time.
//! - [`Nl6::http`] / [`request`] are a small client on a raw `TcpStream` with timeouts (one request per
//!   connection); [`read_reply`] reads one response.
//! - Dropping an [`Nl6`] kills its own child and nothing else.
//! - Small shared waits and probes: [`wait_until`] (bounded polling; [`wait_for`] panics naming what did
//!   not happen), [`status_field`] / [`threads_of`] (`/proc/<pid>/status`).
//! - [`example::build`]: an embedder example of the workspace, built for the test's target.
//! - [`go_pprof`] / [`go_pprof_ok`]: the one way tests run `go tool pprof`. `push_support` uses this module as `crate::common`, so a test that
//!   declares `mod push_support;` also declares `mod common;`.
//!
//! Never sends traffic outside 127.0.0.1.
#![allow(dead_code)]

pub mod example;

/// `cargo`, at the lowest CPU priority: a test that builds a fixture runs beside other tests (two at a
/// time), and a build at normal priority would take both cores from a test that measures time.
pub fn nice_cargo() -> Command {
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "19"])
        .arg(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd
}

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Path of the binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_nl6");

/// How long a boot may take before the test fails.
const BOOT_TIMEOUT: Duration = Duration::from_secs(20);

/// A command line for the binary.
#[derive(Default, Clone)]
pub struct Boot {
    args: Vec<String>,
    env: Vec<(String, String)>,
    nofile: Option<u64>,
    binary: Option<String>,
    nohup: bool,
    under: Vec<String>,
}

/// Starts describing an `nl6` run.
pub fn boot() -> Boot {
    Boot::default()
}

impl Boot {
    /// Adds arguments.
    pub fn arg(mut self, a: &str) -> Boot {
        self.args.push(a.to_string());
        self
    }
    /// Starts the binary under `nohup` (SIGHUP ignored from birth, as after `nohup nl6 … &`).
    pub fn nohup(mut self) -> Boot {
        self.nohup = true;
        self
    }
    /// Adds several arguments.
    pub fn args(mut self, a: &[&str]) -> Boot {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }
    /// Sets an environment variable for the child.
    pub fn env(mut self, k: &str, v: &str) -> Boot {
        self.env.push((k.to_string(), v.to_string()));
        self
    }
    /// Runs another build of nl6 (e.g. the static musl release) instead of the test's own.
    pub fn binary(mut self, path: &str) -> Boot {
        self.binary = Some(path.to_string());
        self
    }
    /// Runs the binary under a wrapper command that execs it (`prlimit --as=N --`, `setpriv … --`).
    pub fn under(mut self, wrapper: &[&str]) -> Boot {
        self.under = wrapper.iter().map(|s| s.to_string()).collect();
        self
    }
    /// Runs the child with `ulimit -n` set to `n` (soft and hard), through `sh`.
    pub fn nofile(mut self, n: u64) -> Boot {
        self.nofile = Some(n);
        self
    }

    fn command(&self, args: &[String]) -> Command {
        let bin = self.binary.clone().unwrap_or_else(|| BIN.to_string());
        let mut cmd = match self.nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(&bin);
                c
            }
            None if self.nohup => {
                let mut c = Command::new("nohup");
                c.arg(&bin);
                c
            }
            None => match self.under.split_first() {
                Some((wrapper, rest)) => {
                    let mut c = Command::new(wrapper);
                    c.args(rest).arg(&bin);
                    c
                }
                None => Command::new(&bin),
            },
        };
        cmd.args(args);
        // A runner started under `nohup` or as a background job hands its children SIGHUP or SIGINT
        // ignored, and nl6 keeps an ignored one ignored: the tests that send them would wait in vain.
        // The child starts with both at their defaults; `nohup()` ignores SIGHUP after this, in `nohup`.
        // SAFETY: between fork and exec only `signal`, which is async-signal-safe, runs in the child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::signal(libc::SIGHUP, libc::SIG_DFL);
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        // The adhoc variable would change behaviour: only a test that sets it gets it.
        cmd.env_remove("PYROSCOPE_ADHOC_SERVER_ADDRESS");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs to completion (bounded by `limit`); the child is killed if it overruns.
    pub fn run_within(&self, limit: Duration) -> Output {
        let mut child = self
            .command(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nl6");
        let end = Instant::now() + limit;
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                return child.wait_with_output().expect("output");
            }
            if Instant::now() > end {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "nl6 {:?} did not exit within {limit:?}: {}",
                    self.args,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs to completion within 10 s.
    pub fn run(&self) -> Output {
        self.run_within(Duration::from_secs(10))
    }

    /// Starts the command as given (no `-listen` added, no boot line awaited): for `nl6 collect`.
    pub fn spawn(&self) -> Nl6 {
        self.spawn_with(&self.args)
    }

    /// Starts the binary with `args`, its stderr collected line by line.
    fn spawn_with(&self, args: &[String]) -> Nl6 {
        let mut child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nl6");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Nl6 {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
            lines,
        }
    }

    /// Boots a server and waits for its boot line.
    pub fn start(&self) -> Nl6 {
        let mut args = self.args.clone();
        if !args
            .iter()
            .any(|a| a.trim_start_matches('-') == "listen" || a.trim_start_matches('-') == "port")
        {
            args.extend(["-listen".to_string(), "127.0.0.1:0".to_string()]);
        }
        // The fleet's devices take ephemeral ports unless the test says otherwise, so tests running
        // side by side never collide on the default UDP 16100+.
        if !args
            .iter()
            .any(|a| a.trim_start_matches('-') == "snmp-port")
        {
            args.extend(["-snmp-port".to_string(), "0".to_string()]);
        }
        let mut nl6 = self.spawn_with(&args);
        let end = Instant::now() + BOOT_TIMEOUT;
        loop {
            let found = nl6.lines.lock().unwrap().iter().find_map(|l| {
                l.strip_prefix("nl6 listening on ")
                    .and_then(|rest| rest.split(';').next())
                    .map(str::to_string)
            });
            if let Some(addr) = found {
                nl6.addr = addr.parse().expect("bound address");
                return nl6;
            }
            if let Some(status) = nl6.child.try_wait().expect("try_wait") {
                panic!("nl6 exited during boot ({status}): {}", nl6.stderr());
            }
            assert!(
                Instant::now() < end,
                "no boot line within {BOOT_TIMEOUT:?}: {}",
                nl6.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A running `nl6` child.
pub struct Nl6 {
    child: Child,
    /// The address it serves on.
    pub addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
}

/// A response: status, headers (names lower-cased), body.
pub type Reply = (u16, Vec<(String, String)>, Vec<u8>);

/// The first header named `name` (lower-case).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl Nl6 {
    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Lines of stderr starting with `prefix`.
    pub fn log_lines(&self, prefix: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits (bounded) until stderr has a line containing `needle`.
    pub fn wait_for_log(&self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if self
                .lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(needle))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// One request on a fresh connection (`Connection: close`), 10 s timeouts.
    pub fn http(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.http_with(method, path, &[], body, Duration::from_secs(10))
    }

    /// One profile request (`path` names the profile and its seconds), which must be a 200: its body.
    /// The read timeout leaves room for a debug binary's first symbol reading on a loaded machine.
    pub fn profile_ok(&self, path: &str) -> Vec<u8> {
        let (s, _, b) = self.http_with("GET", path, &[], b"", Duration::from_secs(60));
        assert_eq!(s, 200, "{path}: {}", String::from_utf8_lossy(&b));
        b
    }

    /// One request with extra headers and a read timeout.
    pub fn http_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
    ) -> Reply {
        request(self.addr, method, path, headers, body, timeout)
    }

    /// Opens the profiling gate pull-only (`POST /api/v1/profiling`, no push address); asserts 200.
    pub fn open_pull_only(&self) {
        let (s, _, _) = self.http(
            "POST",
            "/api/v1/profiling",
            br#"{"enabled":true,"server_address":""}"#,
        );
        assert_eq!(s, 200);
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self, limit: Duration) -> ExitStatus {
        self.signal("TERM");
        self.wait_exit(limit)
    }

    /// Sends a signal, named or numbered as `kill -SIG` takes it (`TERM`, `HUP`, `38`).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(ok.success(), "kill -{sig} failed");
    }

    /// Waits (bounded) for the exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(Instant::now() < end, "nl6 did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True while the child has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

/// One request to `addr` on a fresh connection (`Connection: close`), with extra headers and a read
/// timeout; for servers not held as an [`Nl6`] (an in-process probe, a background load thread). A
/// state change under `/api/` gets `Content-Type: application/json` unless `headers` gives a type.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Reply {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    // As an API client does: nl6 refuses a state change under /api/ without it (415). A test that
    // means to send another type (or none) says so in `headers` or writes its request itself.
    let typed = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    if path.starts_with("/api/") && !matches!(method, "GET" | "HEAD" | "OPTIONS") && !typed {
        req.push_str("Content-Type: application/json\r\n");
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).expect("send");
    read_reply(&mut s, method == "HEAD")
}

/// Reads one response to the end (Content-Length, or EOF).
pub fn read_reply(s: &mut TcpStream, head_only: bool) -> Reply {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk) {
            Ok(0) => panic!(
                "connection closed before a full response head: {:?}",
                String::from_utf8_lossy(&buf)
            ),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!(
                "reading response head: {e}; got {:?}",
                String::from_utf8_lossy(&buf)
            ),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: Option<usize> = header(&headers, "content-length").and_then(|v| v.parse().ok());
    let mut body = buf[head_end..].to_vec();
    if head_only {
        return (status, headers, Vec::new());
    }
    loop {
        if len.is_some_and(|n| body.len() >= n) {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading response body: {e}"),
        }
    }
    (status, headers, body)
}

impl Drop for Nl6 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback URL on a port nothing listens on (bound, then released), for push targets in tests.
pub fn unused_loopback_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
}

/// Parses a JSON body.
pub fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// Polls `cond` every 20 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `cond` (every 20 ms, through [`wait_until`]) for up to `secs` seconds; panics naming `what` on
/// timeout.
pub fn wait_for(what: &str, secs: u64, cond: impl FnMut() -> bool) {
    assert!(
        wait_until(Duration::from_secs(secs), cond),
        "timed out after {secs}s waiting for {what}"
    );
}

#[path = "../../crates/nl6-profile/tests/support/go_pprof.rs"]
mod go_pprof_support;
#[allow(unused_imports)] // each test binary uses its own subset
pub use go_pprof_support::{go_pprof, go_pprof_command, go_pprof_ok, go_pprof_ok_with};

/// A `/proc/<pid>/status` number (`Threads:`, `VmRSS:` in kB).
pub fn status_field(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// The number of threads of `pid`.
pub fn threads_of(pid: u32) -> usize {
    status_field(pid, "Threads:") as usize
}
