//! `nl6 collect` and `nl6 report` end to end against a real Go service with net/http/pprof (built at test
//! time with Debian's golang-go, GO111MODULE=off), a closed port, a 503 answer (a closed nl6 gate), a
//! garbage answer and a target that never answers; plus retention with symlinks pointing outside `-out`,
//! and diffs. Runs the collector in-process through `nl6::collect::main` (the CLI dispatch lives in
//! another branch). Everything stays on 127.0.0.1; every wait is bounded.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nl6::collect::archive::Stamp;
use nl6::profiling::proto::{self, Function, Line, Location, Profile, Sample};
use nl6::report;

const GO_SERVICE: &str = r#"package main

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

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nl6-collect-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Go's build cache survives between runs so the standard library is compiled once.
fn go_env(cmd: &mut Command, work: &Path) {
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
struct GoService {
    child: Child,
    addr: String,
}

impl Drop for GoService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_go_service(work: &Path) -> GoService {
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
    GoService { child, addr }
}

/// A loopback server answering every request the same way (or never, for `None`), until dropped.
struct FakeServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn fake_server(reply: Option<Vec<u8>>) -> FakeServer {
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

const REPLY_503: &str = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Go-Pprof: 1\r\n\
    Content-Length: 42\r\nConnection: close\r\n\r\nprofiling is disabled: the gate is closed\n";
const REPLY_GARBAGE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello world\n";

/// A 200 answer carrying a valid gzip'd CPU profile with no samples (an idle target's window).
fn empty_profile_reply() -> Vec<u8> {
    use prost::Message;
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

fn closed_port() -> u16 {
    let ln = TcpListener::bind("127.0.0.1:0").unwrap();
    ln.local_addr().unwrap().port()
}

fn collect(args: &[&str]) -> i32 {
    nl6::collect::main(args.iter().map(Into::into).collect())
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Every path under `dir` (relative, `/`-joined), symlinks not followed.
fn tree(dir: &Path) -> BTreeSet<String> {
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

/// The single `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` under `out/program` and the stamp it names.
fn only_dated_dir(out: &Path, program: &str) -> (PathBuf, Stamp) {
    let mut p = out.join(program);
    let mut parts = Vec::new();
    for _ in 0..4 {
        let entries: Vec<_> = fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
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

fn meta(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("meta.json")).unwrap()).unwrap()
}

/// The first data row of a `-top` table (the line after the `flat flat% …` header).
fn first_row(table: &str) -> String {
    let mut lines = table
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat  flat%"));
    lines.next().expect("no column header");
    lines.next().expect("no rows").to_string()
}

fn go_pprof_top(work: &Path, file: &Path) -> String {
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof", "-top"]).arg(file);
    go_env(&mut cmd, work);
    cmd.env("PPROF_TMPDIR", work);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "go tool pprof failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn one_cycle_archives_go_service_and_records_failures() {
    let work = scratch("cycle");
    let svc = start_go_service(&work);
    let s503 = fake_server(Some(REPLY_503.as_bytes().to_vec()));
    let garbage = fake_server(Some(REPLY_GARBAGE.as_bytes().to_vec()));
    let idle = fake_server(Some(empty_profile_reply()));
    let silent = fake_server(None);
    let down = closed_port();
    let out = work.join("archive");
    // An expired snapshot from an earlier run: this cycle's retention must delete it.
    let old = out.join("gosvc/2020/01/01/00:00:00/127.0.0.1/1");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("meta.json"), "{}").unwrap();
    let svc_port: u16 = svc.addr.rsplit(':').next().unwrap().parse().unwrap();
    let targets = work.join("targets.txt");
    fs::write(
        &targets,
        format!(
            "# test fleet\ngosvc http://{}\ngate http://127.0.0.1:{}  # closed nl6 gate\n\
             junk http://127.0.0.1:{}\nsilent http://127.0.0.1:{}\ndown http://127.0.0.1:{down}\n\
             idle http://127.0.0.1:{}\n",
            svc.addr, s503.port, garbage.port, silent.port, idle.port
        ),
    )
    .unwrap();

    let before = unix_now();
    let began = Instant::now();
    let code = collect(&[
        "-targets",
        targets.to_str().unwrap(),
        "-out",
        out.to_str().unwrap(),
        "-once",
        "-cpu-seconds",
        "1",
        "-timeout",
        "2s",
    ]);
    let took = began.elapsed();
    assert_eq!(code, 0);
    // The silent target costs at most its own timeouts (2s heap + 1s+2s CPU), never more.
    assert!(took < Duration::from_secs(12), "cycle took {took:?}");

    // Layout: exactly <out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/ and the files.
    let (dated, stamp) = only_dated_dir(&out, "gosvc");
    assert!(
        (before..=before + 2).contains(&stamp.to_unix()),
        "stamp {stamp:?} not the cycle start ({before})"
    );
    let snap = dated.join("127.0.0.1").join(svc_port.to_string());
    let files: BTreeSet<String> = tree(&snap);
    let want: BTreeSet<String> = [
        "cpu.pb.gz",
        "heap.pb.gz",
        "cpu.top.txt",
        "heap.top.txt",
        "cpu.svg",
        "heap.svg",
        "meta.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(files, want);
    assert!(!old.exists(), "retention did not delete the 2020 snapshot");
    assert!(
        tree(&out)
            .iter()
            .all(|p| !p.contains(".partial-") && !p.contains(".tmp-")),
        "leftovers: {:?}",
        tree(&out)
    );

    // The Go service's snapshot: valid profiles whose first top row is go tool pprof's.
    let m = meta(&snap);
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(m["program"], "gosvc");
    assert_eq!(m["port"], svc_port);
    assert_eq!(
        m["profiles"]["cpu"]["bytes"],
        fs::metadata(snap.join("cpu.pb.gz")).unwrap().len()
    );
    assert_eq!(
        m["files"]["heap.svg"],
        fs::metadata(snap.join("heap.svg")).unwrap().len()
    );
    assert!(
        m["duration_ms"].as_u64().unwrap() < 5000,
        "the Go target was held up: {m}"
    );
    for kind in ["cpu", "heap"] {
        let ours = fs::read_to_string(snap.join(format!("{kind}.top.txt"))).unwrap();
        let theirs = go_pprof_top(&work, &snap.join(format!("{kind}.pb.gz")));
        assert_eq!(
            first_row(&ours),
            first_row(&theirs),
            "{kind}: ours\n{ours}\ngo tool pprof\n{theirs}"
        );
        let svg = fs::read_to_string(snap.join(format!("{kind}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{kind}.svg is not an SVG");
    }
    let heap_top = fs::read_to_string(snap.join("heap.top.txt")).unwrap();
    assert!(
        heap_top.contains("Type: inuse_space") && heap_top.contains("main.allocateBlocks"),
        "{heap_top}"
    );

    // Failures are recorded, with the server's message kept, and only meta.json is written.
    let failed = |program: &str, port: u16| {
        let (dated, _) = only_dated_dir(&out, program);
        let dir = dated.join("127.0.0.1").join(port.to_string());
        assert_eq!(
            tree(&dir),
            BTreeSet::from(["meta.json".to_string()]),
            "{program}"
        );
        let m = meta(&dir);
        assert_eq!(m["status"], "failed", "{program}: {m}");
        m
    };
    let m = failed("gate", s503.port);
    assert_eq!(m["profiles"]["cpu"]["http_status"], 503);
    assert!(
        m["profiles"]["heap"]["error"]
            .as_str()
            .unwrap()
            .contains("profiling is disabled: the gate is closed"),
        "{m}"
    );
    let m = failed("junk", garbage.port);
    assert!(
        m["profiles"]["cpu"]["error"]
            .as_str()
            .unwrap()
            .contains("not a pprof profile"),
        "{m}"
    );
    let m = failed("silent", silent.port);
    assert!(
        m["profiles"]["heap"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{m}"
    );
    // An idle target's empty profiles still get every file; the reports say "no samples".
    let (dated, _) = only_dated_dir(&out, "idle");
    let idle_dir = dated.join("127.0.0.1").join(idle.port.to_string());
    assert_eq!(tree(&idle_dir), want);
    assert_eq!(meta(&idle_dir)["status"], "ok");
    for f in ["cpu.top.txt", "heap.top.txt", "cpu.svg", "heap.svg"] {
        assert!(
            fs::read_to_string(idle_dir.join(f))
                .unwrap()
                .contains(report::NO_SAMPLES),
            "{f}"
        );
    }
    go_pprof_top(&work, &idle_dir.join("cpu.pb.gz"));
    let m = failed("down", down);
    assert!(
        m["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{m}"
    );

    // A second cycle with -baseline: cpu.diff.txt against the first cycle's CPU profile.
    let targets2 = work.join("targets2.txt");
    fs::write(&targets2, format!("gosvc http://{}\n", svc.addr)).unwrap();
    let out2 = work.join("archive2");
    let code = collect(&[
        "--targets",
        targets2.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--once",
        "--cpu-seconds=1",
        "-baseline",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let (dated2, _) = only_dated_dir(&out2, "gosvc");
    let snap2 = dated2.join("127.0.0.1").join(svc_port.to_string());
    let diff = fs::read_to_string(snap2.join("cpu.diff.txt")).unwrap();
    assert!(
        diff.starts_with(&format!("Baseline: {}", snap.join("cpu.pb.gz").display())),
        "{diff}"
    );
    assert_eq!(
        meta(&snap2)["baseline"]["profile"],
        snap.join("cpu.pb.gz").display().to_string()
    );

    // nl6 report reads the archived files (exit 0) and writes a diff flame graph.
    let cpu = snap.join("cpu.pb.gz").to_string_lossy().into_owned();
    assert_eq!(report::main(vec![cpu.clone().into()]), 0);
    let svg = work.join("diff.svg");
    let cpu2 = snap2.join("cpu.pb.gz").to_string_lossy().into_owned();
    assert_eq!(
        report::main(vec![
            "-diff-base".into(),
            cpu.clone().into(),
            "-svg".into(),
            svg.clone().into(),
            cpu2.into()
        ]),
        0
    );
    assert!(fs::read_to_string(&svg).unwrap().contains("<svg"));

    drop(svc);
    fs::remove_dir_all(&work).unwrap();
}

/// A copy of `p` with extra samples in a new leaf function `name` called from the first sample's stack.
fn with_hot_function(p: &Profile, name: &str, samples: i64) -> Profile {
    let mut q = p.clone();
    q.string_table.push(name.to_string());
    let name_ix = (q.string_table.len() - 1) as i64;
    let fid = q.function.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    q.function.push(Function {
        id: fid,
        name: name_ix,
        system_name: name_ix,
        filename: 0,
        start_line: 0,
    });
    let lid = q.location.iter().map(|l| l.id).max().unwrap_or(0) + 1;
    q.location.push(Location {
        id: lid,
        mapping_id: 0,
        address: 0,
        line: vec![Line {
            function_id: fid,
            line: 1,
            column: 0,
        }],
        is_folded: false,
    });
    let mut stack = vec![lid];
    if let Some(s) = p.sample.first() {
        stack.extend(&s.location_id);
    }
    let period = if p.period > 0 { p.period } else { 10_000_000 };
    let values = p
        .sample_type
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { samples } else { samples * period })
        .collect();
    q.sample.push(Sample {
        location_id: stack,
        value: values,
        label: vec![],
    });
    q
}

#[test]
fn diffs_of_real_profiles() {
    let work = scratch("diff");
    let svc = start_go_service(&work);
    let url = format!("http://{}/debug/pprof/profile?seconds=1", svc.addr);
    let fetched = nl6::collect::fetch::fetch(&url, Duration::from_secs(10));
    let bytes = fetched.body.expect("CPU profile from the Go service");
    let p = proto::decode(&bytes).unwrap();
    let index = report::default_sample_index(&p).unwrap();

    // Against itself: every function, zero change.
    let rows = report::diff_rows(&p, &p, index).unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.flat == 0 && r.cum == 0), "{rows:?}");
    assert!(report::diff_table(&p, &p, index)
        .unwrap()
        .contains("no change"));

    // With an added hot function: it comes first, with the whole added value as its flat change.
    let hot = with_hot_function(&p, "main.addedHotFunction", 500);
    let rows = report::diff_rows(&p, &hot, index).unwrap();
    assert_eq!(rows[0].name, "main.addedHotFunction");
    assert_eq!(rows[0].flat, 500 * p.period.max(1));
    let table = report::diff_table(&p, &hot, index).unwrap();
    assert!(
        first_row(&table).ends_with("  main.addedHotFunction"),
        "{table}"
    );
    // And the reverse diff shows it first with a negative change.
    let rev = report::diff_rows(&hot, &p, index).unwrap();
    assert_eq!(
        (rev[0].name.as_str(), rev[0].flat),
        ("main.addedHotFunction", -500 * p.period.max(1))
    );
    fs::remove_dir_all(&work).unwrap();
}

#[cfg(unix)]
#[test]
fn retention_deletes_only_old_dated_dirs_inside_out() {
    use std::os::unix::fs::symlink;
    let work = scratch("retention");
    let out = work.join("out");
    let outside = work.join("outside");
    let now = unix_now();
    let recent = Stamp::from_unix(now - 3600).components().join("/");
    let mk = |rel: &str| {
        let d = out.join(rel);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("meta.json"), "{}").unwrap();
    };
    mk("svc/2020/01/01/00:00:00/h/80");
    mk("svc/2020/01/01/00:00:05/h/80");
    mk(&format!("svc/{recent}/h/80"));
    mk("svc/notes/keep/me/please/x"); // not a dated layout: never touched
                                      // Outside -out: a tree that looks expired, and a precious file.
    fs::create_dir_all(outside.join("svc/2020/01/01/00:00:00/h/80")).unwrap();
    fs::write(outside.join("precious.txt"), "keep").unwrap();
    fs::create_dir_all(outside.join("dated")).unwrap();
    // A program-level symlink to the outside tree, a dated-level symlink, and a symlink inside an
    // expired snapshot.
    symlink(&outside, out.join("linked")).unwrap();
    fs::create_dir_all(out.join("svc/2020/01/02")).unwrap();
    symlink(outside.join("dated"), out.join("svc/2020/01/02/00:00:00")).unwrap();
    symlink(
        outside.join("precious.txt"),
        out.join("svc/2020/01/01/00:00:00/h/link"),
    )
    .unwrap();

    let deletions =
        nl6::collect::retention::apply_retention(&out, now, Duration::from_secs(168 * 3600));
    let mut deleted: Vec<String> = deletions
        .iter()
        .map(|d| d.dir.relative.to_string_lossy().into_owned())
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        ["svc/2020/01/01/00:00:00", "svc/2020/01/01/00:00:05"]
    );
    assert!(deletions.iter().all(|d| d.result.is_ok()));
    assert!(
        !out.join("svc/2020/01/01").exists(),
        "emptied day directory left behind"
    );
    assert!(out.join(format!("svc/{recent}/h/80/meta.json")).exists());
    assert!(out.join("svc/notes/keep/me/please/x/meta.json").exists());
    // Symlinks above a snapshot are neither followed nor deleted; targets outside survive.
    assert!(fs::symlink_metadata(out.join("linked"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::symlink_metadata(out.join("svc/2020/01/02/00:00:00"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(outside.join("svc/2020/01/01/00:00:00/h/80").is_dir());
    assert!(outside.join("dated").is_dir());
    assert_eq!(
        fs::read_to_string(outside.join("precious.txt")).unwrap(),
        "keep"
    );
    // A second pass finds nothing more.
    assert!(
        nl6::collect::retention::apply_retention(&out, now, Duration::from_secs(168 * 3600))
            .is_empty()
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let work = scratch("usage");
    assert_eq!(collect(&["-out", "x"]), 2);
    assert_eq!(
        collect(&["-targets", "t", "-out", "o", "-interval", "often"]),
        2
    );
    let bad = work.join("bad.txt");
    fs::write(&bad, "svc http://127.0.0.1:1\noops\n").unwrap();
    assert_eq!(
        collect(&[
            "-targets",
            bad.to_str().unwrap(),
            "-out",
            work.join("o").to_str().unwrap(),
            "-once"
        ]),
        2
    );
    assert!(
        !work.join("o").exists(),
        "nothing is written on a usage error"
    );
    fs::remove_dir_all(&work).unwrap();
}
