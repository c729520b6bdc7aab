//! Helpers for the `collect_*` integration tests: the Go test service (built at test time with Debian's
//! golang-go, GO111MODULE=off), fake loopback servers (503, garbage, silent, an empty profile), archive
//! walking, and `go tool pprof -top`. Everything stays on 127.0.0.1; every wait is bounded.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod hostile_store;
pub mod seaweed;

use nl6::collect::archive::Stamp;
use nl6_profile::proto::{self, Profile};

pub const GO_SERVICE: &str = r#"package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

var sink [][]byte

//go:noinline
func burnCPU(n int) uint64 {
	var x uint64 = 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func allocateBlocks() {
	for i := 0; i < 16; i++ {
		sink = append(sink, make([]byte, 64<<10))
	}
	if len(sink) > 1024 {
		sink = sink[:0]
	}
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().String())
	os.Stdout.Sync()
	go func() {
		var acc uint64
		for {
			acc += burnCPU(1 << 20)
			allocateBlocks()
		}
	}()
	panic(http.Serve(ln, nil))
}
"#;

pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nl6-collect-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Go's build cache survives between runs so the standard library is compiled once.
pub fn go_env(cmd: &mut Command, work: &Path) {
    let cache = std::env::var_os("GOCACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("nl6-test-gocache"));
    cmd.env("GO111MODULE", "off")
        .env("GOCACHE", cache)
        .env("GOPATH", work.join("gopath"))
        .env("HOME", work)
        .env("GOFLAGS", "");
}

/// The Go service, killed when dropped.
pub struct GoService {
    child: Child,
    pub addr: String,
}

impl Drop for GoService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_go_service(work: &Path) -> GoService {
    let src = work.join("svc.go");
    fs::write(&src, GO_SERVICE).unwrap();
    let bin = work.join("svc");
    let mut build = Command::new("go");
    build.arg("build").arg("-o").arg(&bin).arg(&src);
    go_env(&mut build, work);
    let out = build
        .output()
        .expect("`go` must be installed (Debian golang-go)");
    assert!(
        out.status.success(),
        "go build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = Command::new(&bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("Go service did not print its address")
        .trim()
        .to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr:?}");
    wait_for_heap_samples(&addr);
    GoService { child, addr }
}

/// Waits (≤ 20 s) until the service's heap profile names `main.allocateBlocks`. Go's heap profile is as of
/// the last completed garbage collection, so a service just started (and starved on a loaded machine)
/// can answer with the runtime's own allocations only.
fn wait_for_heap_samples(addr: &str) {
    let url = format!("http://{addr}/debug/pprof/heap?debug=1");
    let mut last = String::new();
    let named = crate::common::wait_until(Duration::from_secs(20), || {
        last = ureq::get(&url)
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        last.contains("main.allocateBlocks")
    });
    assert!(
        named,
        "the Go service's heap profile named no main.allocateBlocks within 20 s: {last}"
    );
}

/// A loopback server answering every request the same way (or never, for `None`), until dropped.
pub struct FakeServer {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub fn fake_server(reply: Option<Vec<u8>>) -> FakeServer {
    let ln = TcpListener::bind("127.0.0.1:0").unwrap();
    ln.set_nonblocking(true).unwrap();
    let port = ln.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut held: Vec<TcpStream> = Vec::new();
        while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
            match ln.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let mut req = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
                        match s.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(_) => break,
                        }
                    }
                    match &reply {
                        Some(r) => {
                            let _ = s.write_all(r);
                        }
                        None => held.push(s), // never answer
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    FakeServer { port, stop }
}

pub const REPLY_503: &str = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n\
    Content-Length: 42\r\nConnection: close\r\n\r\nprofiling is disabled: the gate is closed\n";
pub const REPLY_GARBAGE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello world\n";

/// A 200 answer carrying a valid gzip'd CPU profile with no samples (an idle target's window).
pub fn empty_profile_reply() -> Vec<u8> {
    let p = Profile {
        sample_type: vec![
            proto::ValueType { r#type: 1, unit: 2 },
            proto::ValueType { r#type: 3, unit: 4 },
        ],
        string_table: ["", "samples", "count", "cpu", "nanoseconds"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        period_type: Some(proto::ValueType { r#type: 3, unit: 4 }),
        period: 10_000_000,
        duration_nanos: 1_000_000_000,
        ..Default::default()
    };
    profile_answer(&p)
}

/// A 200 answer carrying `p` gzip'd, as a target's `/debug/pprof/…` would send it.
pub fn profile_answer(p: &Profile) -> Vec<u8> {
    use prost::Message;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec()).unwrap();
    let body = gz.finish().unwrap();
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend(body);
    r
}

pub fn closed_port() -> u16 {
    let ln = TcpListener::bind("127.0.0.1:0").unwrap();
    ln.local_addr().unwrap().port()
}

pub fn collect(args: &[&str]) -> i32 {
    nl6::collect::main(args.iter().map(Into::into).collect())
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Every path under `dir` (relative, `/`-joined), symlinks not followed.
pub fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// The single `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` under `out/program` and the stamp it names (the
/// day's `index.html` beside the time directory is not an entry of the layout).
pub fn only_dated_dir(out: &Path, program: &str) -> (PathBuf, Stamp) {
    let mut p = out.join(program);
    let mut parts = Vec::new();
    for _ in 0..4 {
        let entries: Vec<_> = fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "index.html")
            .collect();
        assert_eq!(
            entries.len(),
            1,
            "expected one entry in {}: {entries:?}",
            p.display()
        );
        parts.push(entries[0].to_string_lossy().into_owned());
        p.push(&entries[0]);
    }
    let stamp =
        Stamp::parse_components(&parts[0], &parts[1], &parts[2], &parts[3]).expect("dated path");
    (p, stamp)
}

pub fn meta(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("meta.json")).unwrap()).unwrap()
}

/// The first data row of a `-top` table (the line after the `flat flat% …` header).
pub fn first_row(table: &str) -> String {
    let mut lines = table
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat  flat%"));
    lines.next().expect("no column header");
    lines.next().expect("no rows").to_string()
}

pub fn go_pprof_top(work: &Path, file: &Path) -> String {
    crate::common::go_pprof_ok(&[Path::new("-top"), file], work)
}
