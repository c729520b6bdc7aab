//! A service outside this workspace embeds the engine as its README says: a new crate, created here in a
//! temp dir with only a path dependency on crates/nl6-profile, on tokio's multi-thread runtime with axum
//! (tests/tokio_axum_support/). Driven with concurrent requests and read by `go tool pprof`:
//! - CPU: each request's labels (`route`) are on exactly its own samples, across `.await` while tasks
//!   interleave on two workers and move between them;
//! - tokio workers' samples reach the thread root (armed and bounded at birth by `on_thread_start`);
//! - heap (the allocation-heavy handler) and goroutine (the workers by name) profiles;
//! - a SIGPROF handler the service installed first is refused, the error naming it (the service exits);
//! - the same service pushing through crates/nl6-push to the repository's Pyroscope `/ingest` double
//!   (tests/pyroscope-ingest, `NL6_PYROSCOPE_INGEST`): every upload accepted, every series stored.
//!
//! The crate is built in release, as a profiled service runs (a debug build's tokio stacks are deeper
//! than the recorded frames), into one target directory under this workspace's target/ (reused across
//! runs, so only the first run compiles tokio and axum), with the versions of its committed lockfile
//! (tests/tokio_axum_support/Cargo.lock).
//!
//!   cargo test --test engine tokio_axum::
use crate::common;
use crate::push_support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Kills the service when the test ends, however it ends.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `contents` to `path` unless it already holds them: test processes that run at once build the
/// same crate directory, and an unchanged file keeps cargo's build of it fresh.
fn write_if_changed(path: &Path, contents: &[u8]) {
    if std::fs::read(path).ok().as_deref() != Some(contents) {
        std::fs::write(path, contents).unwrap();
    }
}

/// Lays out the crate (manifest, the committed lockfile, the service) in `crate_dir` and builds it in
/// release into a target directory under this workspace's target/, with the lockfile's versions.
fn build_service(crate_dir: &Path) -> PathBuf {
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tokio_axum_support");
    let engine = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/nl6-profile");
    let push = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/nl6-push");
    std::fs::create_dir_all(crate_dir.join("src")).unwrap();
    let manifest = std::fs::read_to_string(support.join("Cargo.toml.in"))
        .unwrap()
        .replace("@ENGINE@", engine.to_str().unwrap())
        .replace("@PUSH@", push.to_str().unwrap());
    write_if_changed(&crate_dir.join("Cargo.toml"), manifest.as_bytes());
    write_if_changed(
        &crate_dir.join("Cargo.lock"),
        &std::fs::read(support.join("Cargo.lock")).unwrap(),
    );
    write_if_changed(
        &crate_dir.join("src/main.rs"),
        &std::fs::read(support.join("service.rs")).unwrap(),
    );
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tokio-axum-target");
    let out = common::nice_cargo()
        .current_dir(crate_dir)
        .args(["build", "--quiet", "--release", "--locked"])
        .arg("--target-dir")
        .arg(&target_dir)
        // The README's one build setting (the crate is outside this workspace's .cargo/config.toml).
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", "-C force-frame-pointers=yes")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "building the tokio + axum crate failed (a dependency of the engine or the push changed? refresh \
         tests/tokio_axum_support/Cargo.lock: run `cargo generate-lockfile` in {}, copy its Cargo.lock \
         back):\n{}",
        crate_dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    target_dir.join("release/tokio-axum-profiled")
}

/// The service, built once per test process. Its crate lives outside the workspace (so none of the
/// workspace's cargo configuration applies, as for any user's crate), at one place for every run.
fn service_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_service(&std::env::temp_dir().join("nl6-tokio-axum-crate")))
}

fn start(bin: &Path, env: &[(&str, &str)]) -> (Service, SocketAddr) {
    let mut child = Command::new(bin)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the service");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    (Service(child), addr)
}

fn get(addr: SocketAddr, path: &str) -> Vec<u8> {
    let (status, _, body) = common::request(addr, "GET", path, &[], &[], Duration::from_secs(60));
    assert_eq!(
        status,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&body)
    );
    body
}

fn pprof(work: &Path, args: &[&str], file: &Path) -> String {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.push(file.as_os_str());
    common::go_pprof_ok(&all, work)
}

#[test]
fn a_tokio_axum_service_gets_labelled_cpu_heap_and_goroutine_profiles() {
    let bin = service_binary();
    let work = std::env::temp_dir().join(format!("nl6-tokio-axum-pull-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let (_service, addr) = start(bin, &[]);

    // A 4-second CPU profile while four clients (two per route) and an allocating one run.
    let profiler = std::thread::spawn(move || get(addr, "/debug/pprof/profile?seconds=4"));
    std::thread::sleep(Duration::from_millis(200));
    let end = Instant::now() + Duration::from_millis(3500);
    let clients: Vec<_> = ["a", "b", "a", "b", "alloc"]
        .into_iter()
        .map(|route| {
            std::thread::spawn(move || {
                let path = if route == "alloc" {
                    "/alloc".to_string()
                } else {
                    format!("/busy/{route}")
                };
                let mut n = 0;
                while Instant::now() < end && n < 10_000 {
                    get(addr, &path);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let served: Vec<u32> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let cpu = profiler.join().unwrap();
    assert!(
        served.iter().all(|&n| n > 0),
        "requests served per client: {served:?}"
    );

    let cpu_file = work.join("cpu.pb.gz");
    std::fs::write(&cpu_file, &cpu).unwrap();
    let tags = pprof(&work, &["-tags"], &cpu_file);
    for want in ["route:", "handler:", "busy"] {
        assert!(tags.contains(want), "{want} missing from -tags:\n{tags}");
    }
    // Every sample of a route's burn function carries that route, and no other route's samples hold it.
    for (mine, theirs) in [("a", "b"), ("b", "a")] {
        let top = pprof(
            &work,
            &["-top", "-nodecount=200", &format!("-tagfocus=route={mine}")],
            &cpu_file,
        );
        assert!(
            top.contains(&format!("burn_route_{mine}")),
            "route={mine} lacks its own burner:\n{top}"
        );
        assert!(
            !top.contains(&format!("burn_route_{theirs}")),
            "route={mine} holds route {theirs}'s burner:\n{top}"
        );
    }
    let unlabelled = pprof(
        &work,
        &["-top", "-nodecount=200", "-tagignore=route=."],
        &cpu_file,
    );
    assert!(
        !unlabelled.contains("burn_route_"),
        "burner samples without a route label:\n{unlabelled}"
    );

    // Full stacks: every trace through a burner runs from the worker's thread start through tokio.
    let traces = pprof(&work, &["-traces"], &cpu_file);
    let blocks: Vec<&str> = traces
        .split("-----------+")
        .filter(|b| b.contains("burn_route_"))
        .collect();
    assert!(blocks.len() >= 2, "traces through the burners:\n{traces}");
    for b in &blocks {
        assert!(
            b.contains("tokio::runtime::"),
            "a burner stack without tokio's frames:\n{b}"
        );
        assert!(
            b.contains("start_thread") || b.contains("thread_start"),
            "a burner stack short of the thread root:\n{b}"
        );
    }

    let heap_file = work.join("heap.pb.gz");
    std::fs::write(&heap_file, get(addr, "/debug/pprof/heap")).unwrap();
    let heap = pprof(&work, &["-top", "-sample_index=alloc_space"], &heap_file);
    assert!(
        heap.contains("alloc_heavy"),
        "the allocating handler is missing from the heap profile:\n{heap}"
    );

    let goroutine_file = work.join("goroutine.pb.gz");
    std::fs::write(&goroutine_file, get(addr, "/debug/pprof/goroutine")).unwrap();
    let g = pprof(&work, &["-tags"], &goroutine_file);
    // tokio names its workers `tokio-rt-worker` (older releases: `tokio-runtime-worker`, cut to 15 bytes).
    assert!(
        g.contains("tokio-rt-worker") || g.contains("tokio-runtime-w"),
        "tokio's workers are missing from the goroutine profile:\n{g}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_competing_sigprof_handler_is_refused_naming_its_owner() {
    let out = Command::new(service_binary())
        .env("FOREIGN_SIGPROF", "1")
        .stdin(Stdio::null())
        .output()
        .expect("running the service");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the service was not refused:\n{stderr}"
    );
    for want in [
        "profiling refused: ",
        "SIGPROF: another handler is installed",
        "their_sigprof",
        "SignalOptions::take_foreign(true)",
    ] {
        assert!(stderr.contains(want), "{want} missing from:\n{stderr}");
    }
    assert!(out.stdout.is_empty(), "it served anyway: {:?}", out.stdout);
}

#[test]
fn the_service_pushes_every_series_to_the_ingest_double() {
    let double = push_support::StandIn::start(&[]);
    let (_service, addr) = start(service_binary(), &[("PUSH_TO", double.url().as_str())]);
    // Four one-second intervals of busy and allocating requests.
    let end = Instant::now() + Duration::from_secs(4);
    let clients: Vec<_> = ["/busy/a", "/alloc"]
        .into_iter()
        .map(|path| {
            std::thread::spawn(move || {
                let mut n = 0;
                while Instant::now() < end && n < 10_000 {
                    get(addr, path);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for c in clients {
        assert!(c.join().unwrap() > 0, "a client got no answer");
    }
    let report = String::from_utf8(get(addr, "/push/stop")).unwrap();
    assert!(report.starts_with("flushed=true "), "{report}");
    let uploads: usize = report
        .split("uploads=")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no upload count in {report:?}"));
    assert!(report.contains(" sdk_errors=0 "), "{report}");

    let requests = double.requests();
    assert!(uploads >= 2, "{report}");
    assert_eq!(uploads, requests.len(), "{report}\n{requests:?}");
    for r in &requests {
        assert_eq!(r["status"], 200, "refused upload: {r}");
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let selector = format!(
        r#"{{service_name="tokio-axum-profiled",hostname="{}"}}"#,
        nl6::push::ingest_url::sanitize_label_value(&hostname)
    );
    for t in push_support::SERIES_TYPES {
        assert!(
            double.total(t, &selector) > 0,
            "{t} under {selector}: {:?}",
            double.profile_types()
        );
    }
}
