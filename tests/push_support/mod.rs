//! Shared fixtures of the push tests: a fake profile source (valid pprof the stand-in accepts), an
//! in-process fake `/ingest` server, the Pyroscope stand-in (the repository's own `/ingest` double,
//! tests/pyroscope-ingest) as a child process, a log capture and bounded waits. Only loopback
//! addresses; every loop is bounded in time; only processes started here are killed.
#![allow(dead_code)]

use nl6::gate::port::{PushRun, PushTarget, Pusher};
use nl6::push::{
    EncodedProfile, Hostname, ProfileKind, ProfileSource, PushConfig, PyroscopePusher,
};
use nl6_profile::cpu::CpuError;
use nl6_profile::proto::{Function, Label, Line, Location, Profile, Sample, ValueType};
use nl6_profile::wall::WallError;
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// Declared by every test that uses this module (`mod common;`).
/// The seven series an nl6 upload cycle stores in Pyroscope (CPU first), as the stand-in names them.
pub const SERIES_TYPES: [&str; 7] = [
    "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    "process_cpu:samples:count:cpu:nanoseconds",
    "memory:alloc_objects:count:space:bytes",
    "memory:alloc_space:bytes:space:bytes",
    "memory:inuse_objects:count:space:bytes",
    "memory:inuse_space:bytes:space:bytes",
    "goroutines:goroutine:count:goroutine:count",
];

#[allow(unused_imports)] // re-exported for the tests that wait through this module
pub use crate::common::wait_until;

/// Captured log lines.
#[derive(Clone, Default)]
pub struct Logs(pub Arc<Mutex<Vec<String>>>);

impl Logs {
    pub fn sink(&self) -> nl6::push::LogSink {
        let lines = self.0.clone();
        Arc::new(move |l: &str| lines.lock().unwrap().push(l.to_string()))
    }
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    pub fn count(&self, needle: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(needle)).count()
    }
}

pub fn config(logs: &Logs, upload_timeout: Duration) -> PushConfig {
    nl6::push::config()
        .with_upload_timeout(upload_timeout)
        .with_hostname(Hostname::Fixed("test-host".into()))
        .with_version("9.9.9-test")
        .with_log(logs.sink())
}

pub fn target(address: &str, interval: Duration) -> PushTarget {
    PushTarget {
        address: address.to_string(),
        basic_auth: None,
        tenant: None,
        interval,
        wall: false,
    }
}

/// Starts a push over a fake source; returns the run and the source's control.
pub fn start_fake(config: PushConfig, target: PushTarget) -> (Box<dyn PushRun>, FakeControl) {
    let (source, control) = FakeSource::new();
    let pusher = PyroscopePusher::with_source(config, Box::new(source));
    (pusher.start(target).expect("push starts"), control)
}

// ---------------------------------------------------------------------------------------------------
// Fake source

/// Knobs and counters shared with a [`FakeSource`].
#[derive(Clone, Default)]
pub struct FakeControl {
    /// When set, `cpu_start` is refused as the engine's busy sampler would be.
    pub cpu_busy: Arc<AtomicBool>,
    pub cpu_windows: Arc<AtomicU64>,
    pub cpu_stops: Arc<AtomicU64>,
    pub heaps: Arc<AtomicU64>,
    pub threads: Arc<AtomicU64>,
    /// When set, `heap` panics as a broken engine would.
    pub heap_panics: Arc<AtomicBool>,
}

/// Produces small, valid profiles (the stand-in's google/pprof checks pass) stamped with the current time.
pub struct FakeSource {
    control: FakeControl,
    cpu_since: Option<SystemTime>,
}

impl FakeSource {
    pub fn new() -> (FakeSource, FakeControl) {
        let control = FakeControl::default();
        (
            FakeSource {
                control: control.clone(),
                cpu_since: None,
            },
            control,
        )
    }

    fn cpu_profile(&self, from: SystemTime, until: SystemTime) -> EncodedProfile {
        let period = 10_000_000;
        EncodedProfile {
            kind: ProfileKind::Cpu,
            pprof_gz: pprof(
                &[("samples", "count"), ("cpu", "nanoseconds")],
                ("cpu", "nanoseconds"),
                period,
                &[(
                    &["fake_cpu_burn", "fake_main"],
                    vec![7, 7 * period],
                    Some("fake-subsystem"),
                )],
                from,
            ),
            from,
            until,
        }
    }
}

impl ProfileSource for FakeSource {
    fn cpu_start(&mut self) -> Result<(), CpuError> {
        if self.control.cpu_busy.load(Ordering::SeqCst) {
            return Err(CpuError::Busy);
        }
        self.cpu_since = Some(SystemTime::now());
        Ok(())
    }
    fn cpu_window(&mut self) -> Option<EncodedProfile> {
        let from = self.cpu_since?;
        let now = SystemTime::now();
        self.cpu_since = Some(now);
        self.control.cpu_windows.fetch_add(1, Ordering::SeqCst);
        Some(self.cpu_profile(from, now))
    }
    fn cpu_stop(&mut self) -> Option<EncodedProfile> {
        let from = self.cpu_since.take()?;
        self.control.cpu_stops.fetch_add(1, Ordering::SeqCst);
        Some(self.cpu_profile(from, SystemTime::now()))
    }
    fn heap(&mut self, from: SystemTime) -> EncodedProfile {
        if self.control.heap_panics.load(Ordering::SeqCst) {
            panic!("the heap snapshot broke");
        }
        self.control.heaps.fetch_add(1, Ordering::SeqCst);
        EncodedProfile {
            kind: ProfileKind::Heap,
            pprof_gz: pprof(
                &[
                    ("alloc_objects", "count"),
                    ("alloc_space", "bytes"),
                    ("inuse_objects", "count"),
                    ("inuse_space", "bytes"),
                ],
                ("space", "bytes"),
                512 * 1024,
                &[(&["fake_alloc", "fake_main"], vec![3, 3072, 1, 1024], None)],
                SystemTime::now(),
            ),
            from,
            until: SystemTime::now(),
        }
    }
    // The fake pushes no wall-clock windows: the binary's tests (tests/push/wall.rs) push the engine's.
    fn wall_start(&mut self) -> Result<(), WallError> {
        Err(WallError::Busy)
    }
    fn wall_window(&mut self) -> Option<EncodedProfile> {
        None
    }
    fn wall_stop(&mut self) -> Option<EncodedProfile> {
        None
    }
    fn threads(&mut self, from: SystemTime) -> EncodedProfile {
        self.control.threads.fetch_add(1, Ordering::SeqCst);
        EncodedProfile {
            kind: ProfileKind::Threads,
            pprof_gz: pprof(
                &[("goroutine", "count")],
                ("goroutine", "count"),
                1,
                &[(&["fake_wait", "fake_main"], vec![2], Some("fake-subsystem"))],
                SystemTime::now(),
            ),
            from,
            until: SystemTime::now(),
        }
    }
}

type FakeSample<'a> = (&'a [&'a str], Vec<i64>, Option<&'a str>);

/// A gzip'd pprof with the given sample types, one location per frame name, a `subsystem` label.
pub fn pprof(
    types: &[(&str, &str)],
    period_type: (&str, &str),
    period: i64,
    samples: &[FakeSample<'_>],
    time: SystemTime,
) -> Vec<u8> {
    let mut strings = vec![String::new()];
    let mut intern = |s: &str| -> i64 {
        if let Some(i) = strings.iter().position(|x| x == s) {
            return i as i64;
        }
        strings.push(s.to_string());
        (strings.len() - 1) as i64
    };
    let sample_type = types
        .iter()
        .map(|(t, u)| ValueType {
            r#type: intern(t),
            unit: intern(u),
        })
        .collect();
    let period_type = Some(ValueType {
        r#type: intern(period_type.0),
        unit: intern(period_type.1),
    });
    let mut functions: Vec<Function> = Vec::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut out_samples = Vec::new();
    for (frames, values, label) in samples {
        let mut ids = Vec::new();
        for name in frames.iter() {
            let n = intern(name);
            let id = match functions.iter().find(|f| f.name == n) {
                Some(f) => f.id,
                None => {
                    let id = functions.len() as u64 + 1;
                    functions.push(Function {
                        id,
                        name: n,
                        system_name: n,
                        filename: 0,
                        start_line: 0,
                    });
                    locations.push(Location {
                        id,
                        mapping_id: 0,
                        address: 0x1000 * id,
                        line: vec![Line {
                            function_id: id,
                            line: 1,
                            column: 0,
                        }],
                        is_folded: false,
                    });
                    id
                }
            };
            ids.push(id);
        }
        let labels = label
            .map(|v| {
                vec![Label {
                    key: intern("subsystem"),
                    str: intern(v),
                    num: 0,
                    num_unit: 0,
                }]
            })
            .unwrap_or_default();
        out_samples.push(Sample {
            location_id: ids,
            value: values.clone(),
            label: labels,
        });
    }
    let profile = Profile {
        sample_type,
        sample: out_samples,
        location: locations,
        function: functions,
        string_table: strings,
        time_nanos: time.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64,
        period_type,
        period,
        ..Default::default()
    };
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&profile.encode_to_vec()).unwrap();
    enc.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------------
// In-process fake server

/// One request the fake server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn query(&self, key: &str) -> Option<String> {
        let q = self.target.split_once('?')?.1;
        q.split('&').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            (k == key).then(|| v.to_string())
        })
    }
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// A sequential HTTP/1.1 server on 127.0.0.1:0 answering every request with a fixed status (and an
/// optional `Location`), recording what it saw. Stops and joins its thread on drop.
pub struct FakeServer {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl FakeServer {
    pub fn start(status: u16, extra_headers: &'static str) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        serve_one(stream, status, extra_headers, &seen2);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FakeServer {
            addr,
            seen,
            stop,
            handle: Some(handle),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Reads one request and records it *before* answering: a client that has its answer must find its
/// request in `seen` (a test reads it right after the client's call returns).
fn serve_one(
    mut stream: TcpStream,
    status: u16,
    extra_headers: &str,
    record: &Mutex<Vec<Seen>>,
) -> Option<()> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let deadline = Instant::now() + Duration::from_secs(5);
    let (head_len, seen) = loop {
        if Instant::now() > deadline {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
            let seen = Seen {
                method: req.method.unwrap_or("").to_string(),
                target: req.path.unwrap_or("").to_string(),
                headers: req
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).to_string(),
                        )
                    })
                    .collect(),
                body: Vec::new(),
            };
            break (n, seen);
        }
    };
    let mut seen = seen;
    let len: usize = seen
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_len + len {
        if Instant::now() > deadline {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    seen.body = buf[head_len..].to_vec();
    record.lock().unwrap().push(seen);
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\n{extra_headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    Some(())
}

/// A loopback port nothing listens on (bound, then released).
pub fn refused_address() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

// ---------------------------------------------------------------------------------------------------
// The stand-in

/// The stand-in binary: `$NL6_PYROSCOPE_INGEST` when set, else the repository's own double
/// (tests/pyroscope-ingest), built into `target/pyroscope-ingest` by scripts/build-pyroscope-ingest.sh
/// the first time a test of this process needs it (the script skips an up-to-date binary and is safe to
/// run from several test processes at once).
pub fn stand_in_binary() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        if let Some(path) = std::env::var_os("NL6_PYROSCOPE_INGEST") {
            return Ok(std::path::PathBuf::from(path));
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = root.join("target/pyroscope-ingest");
        let out = Command::new("bash")
            .arg(root.join("scripts/build-pyroscope-ingest.sh"))
            .arg(&path)
            .output()
            .map_err(|e| format!("running bash: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(path)
    });
    let path = match built {
        Ok(path) => path.clone(),
        Err(why) => panic!("the Pyroscope /ingest double could not be built: {why}"),
    };
    assert!(
        path.exists(),
        "the Pyroscope /ingest double is missing at {} (NL6_PYROSCOPE_INGEST); unset it to build \
         tests/pyroscope-ingest, or run `bash scripts/build-pyroscope-ingest.sh {}`",
        path.display(),
        path.display()
    );
    path
}

/// A running stand-in on a free loopback port, killed (and reaped) on drop.
pub struct StandIn {
    pub port: u16,
    child: Child,
}

impl StandIn {
    /// Starts the double on `127.0.0.1:0` and takes the port from the address it logs at startup, so
    /// the port the test talks to is the one the kernel gave this child (no bind-release-rebind race).
    pub fn start(args: &[&str]) -> StandIn {
        let mut child = Command::new(stand_in_binary())
            .args(["-listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the stand-in");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the startup line, then drains stderr until the child exits.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let port = line
                    .split("://127.0.0.1:")
                    .nth(1)
                    .and_then(|p| p.trim().parse::<u16>().ok());
                if let (Some(port), Some(tx)) = (port, tx.take()) {
                    let _ = tx.send(port);
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(port) => StandIn { port, child },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the stand-in did not report its address within 10 s");
            }
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// GET a query path (plain HTTP only); returns the parsed JSON body.
    pub fn get_json(&self, path_and_query: &str) -> serde_json::Value {
        let body = http_get(self.port, path_and_query);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path_and_query}: {e}: {body}"))
    }

    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.get_json("/api/requests")
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn profile_types(&self) -> Vec<String> {
        self.get_json("/api/profile-types")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    /// `total` of `/api/query` for a profile type and a `{k="v",…}` selector.
    pub fn total(&self, profile_type: &str, selector: &str) -> i64 {
        let q = format!(
            "/api/query?type={}&selector={}",
            nl6::push::ingest_url::query_escape(profile_type),
            nl6::push::ingest_url::query_escape(selector)
        );
        self.get_json(&q)["total"].as_i64().unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A one-shot HTTP/1.0 GET on loopback (the server closes after answering).
pub fn http_get(port: u16, path_and_query: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("GET {path_and_query}: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&out).to_string();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A self-signed certificate for 127.0.0.1 (and its key) made with `openssl` in `dir`: `(cert, key)`.
pub fn self_signed_certificate(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}
