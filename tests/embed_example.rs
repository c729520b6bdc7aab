//! The engine crate's `embed` example (crates/nl6-profile/examples/embed.rs) is a Go-grade service: its
//! CPU profile, read by `go tool pprof -tags`, shows `subsystem` `example`, and `nl6 collect` archives it
//! like any Go service. The test builds the example with cargo into its own target directory (the
//! `cargo test` running it holds the workspace's), for the same target as this test, and starts it on
//! 127.0.0.1, port 0 (the example prints the address it got). Only the processes started here are killed.
//!
//!   cargo test --test embed_example -- --test-threads=2
mod collect_support;
mod common;

use collect_support::{go_pprof_top, meta, only_dated_dir, scratch};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Builds the example once per test binary and returns its path.
fn embed_binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("embed-example");
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "-p", "nl6-profile", "--example", "embed"])
            .arg("--target-dir")
            .arg(&target_dir);
        let mut dir = target_dir.clone();
        if cfg!(target_env = "musl") {
            cmd.args(["--target", "x86_64-unknown-linux-musl"]);
            dir.push("x86_64-unknown-linux-musl");
        }
        let out = cmd.output().expect("running cargo");
        assert!(
            out.status.success(),
            "cargo build -p nl6-profile --example embed failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir.join("debug/examples/embed")
    })
}

/// The running example, killed when dropped.
struct Embed {
    child: Child,
    addr: String,
    /// Kept open: the example's later lines (errors) must not hit a closed pipe.
    _stderr: BufReader<std::process::ChildStderr>,
}

impl Drop for Embed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_embed() -> Embed {
    let mut child = Command::new(embed_binary())
        .arg("127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the embed example");
    let mut line = String::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .filter(|a| a.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in the example's first line: {line:?}"))
        .to_string();
    Embed {
        child,
        addr,
        _stderr: stderr,
    }
}

#[test]
fn go_tool_pprof_tags_show_the_example_subsystem() {
    let embed = start_embed();
    let work = scratch("embed-tags");
    let url = format!("http://{}/debug/pprof/profile?seconds=3", embed.addr);
    let started = Instant::now();
    let text = common::go_pprof_ok(&["-tags", url.as_str()], &work);
    assert!(started.elapsed() < Duration::from_secs(60));
    let tags: Vec<&str> = text.lines().map(str::trim).collect();
    assert!(
        tags.iter().any(|l| l.starts_with("subsystem:")),
        "no subsystem tag:\n{text}"
    );
    assert!(
        tags.iter()
            .any(|l| l.ends_with(": example") && l.contains('%')),
        "no `example` value under subsystem:\n{text}"
    );
}

#[test]
fn nl6_collect_archives_the_example_like_a_go_service() {
    let embed = start_embed();
    let work = scratch("embed-collect");
    let targets = work.join("targets.txt");
    std::fs::write(&targets, format!("embed http://{}\n", embed.addr)).unwrap();
    let out = work.join("out");
    let o = Command::new(common::BIN)
        .args(["collect", "-targets", targets.to_str().unwrap()])
        .args(["-out", out.to_str().unwrap(), "-once", "-cpu-seconds", "2"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (dated, _) = only_dated_dir(&out, "embed");
    let port = embed.addr.rsplit(':').next().unwrap();
    let snapshot = dated.join("127.0.0.1").join(port);
    let m = meta(&snapshot);
    assert_eq!(m["status"], "ok", "{m}");
    for file in [
        "cpu.pb.gz",
        "heap.pb.gz",
        "cpu.top.txt",
        "heap.top.txt",
        "cpu.svg",
        "heap.svg",
    ] {
        assert!(snapshot.join(file).is_file(), "{file} missing: {m}");
    }
    // The archived CPU profile is the busy thread's: its function leads go tool pprof's table.
    let top = go_pprof_top(&work, &snapshot.join("cpu.pb.gz"));
    assert!(top.contains("embed::busy"), "{top}");
}
