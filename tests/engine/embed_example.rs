//! The engine crate's `embed` example (crates/nl6-profile/examples/embed.rs) is a Go-grade service: its
//! CPU profile, read by `go tool pprof -tags`, shows `subsystem` `example`, and `nl6 collect` archives it
//! like any Go service. The test builds the example with cargo into its own target directory (the
//! `cargo test` running it holds the workspace's), for the same target as this test, and starts it on
//! 127.0.0.1, port 0 (the example prints the address it got). Only the processes started here are killed.
//!
//!   cargo test --test engine embed_example:: -- --test-threads=2
use crate::collect_support;
use crate::common;

use collect_support::{go_pprof_top, meta, only_dated_dir, scratch};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Builds the example once per test binary and returns its path.
fn embed_binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| common::example::build("nl6-profile", "embed", "embed-example", None))
}

/// The example built without frame pointers (the workspace's other flags kept), once per test binary.
fn embed_binary_without_frame_pointers() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let mut flags = vec!["-Clink-arg=-Wl,--build-id", "-Cforce-frame-pointers=no"];
        if cfg!(target_env = "musl") {
            flags.push("-Ctarget-feature=+crt-static");
        }
        common::example::build("nl6-profile", "embed", "embed-example-nofp", Some(&flags))
    })
}

/// The running example, killed when dropped.
struct Embed {
    child: Child,
    addr: String,
    /// Kept open: the example's later lines (errors) must not hit a closed pipe.
    stderr: BufReader<std::process::ChildStderr>,
}

impl Drop for Embed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_embed() -> Embed {
    start_embed_binary(embed_binary())
}

fn start_embed_binary(binary: &Path) -> Embed {
    let mut child = Command::new(binary)
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
        stderr,
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

/// A copy of the example stripped of its symbol table (`objcopy --strip-all`, binutils).
fn stripped_embed(work: &Path) -> PathBuf {
    let out = work.join("embed-stripped");
    let o = Command::new("objcopy")
        .arg("--strip-all")
        .arg(embed_binary())
        .arg(&out)
        .output()
        .expect("objcopy (binutils) must be installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The comments `go tool pprof -comments` shows for the profile at `path` of the running example.
fn profile_comments(embed: &Embed, path: &str, work: &Path) -> String {
    let addr = embed.addr.parse().unwrap();
    let (status, _, body) = common::request(addr, "GET", path, &[], &[], Duration::from_secs(30));
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    let file = work.join("profile.pb.gz");
    std::fs::write(&file, &body).unwrap();
    common::go_pprof_ok(&["-comments", file.to_str().unwrap()], work)
}

/// An executable the engine cannot see well says so: one stderr line when its first profile starts and
/// a comment in every profile (`go tool pprof -comments`). Built as the workspace builds (frame
/// pointers, symbol table, unwind rules), nothing is said.
#[test]
fn a_profile_of_an_executable_without_frame_pointers_or_symbols_says_so_once() {
    let work = scratch("embed-sight");
    let stripped = stripped_embed(&work);
    let cases: [(&str, &Path, Option<&str>); 3] = [
        ("as the workspace builds it", embed_binary(), None),
        ("stripped", &stripped, Some("no symbol table")),
        (
            "without frame pointers",
            embed_binary_without_frame_pointers(),
            Some("no frame pointers"),
        ),
    ];
    for (what, binary, said) in cases {
        let mut embed = start_embed_binary(binary);
        for path in [
            "/debug/pprof/profile?seconds=1",
            "/debug/pprof/heap",
            "/debug/pprof/profile?seconds=1",
        ] {
            let comments = profile_comments(&embed, path, &work);
            match said {
                Some(needle) => assert!(
                    comments.contains(&format!("nl6-profile: {needle}")),
                    "{what}: {path}'s comments lack {needle:?}:\n{comments}"
                ),
                None => assert!(
                    !comments.contains("nl6-profile:"),
                    "{what}: {path} says it cannot see:\n{comments}"
                ),
            }
        }
        let _ = embed.child.kill();
        let _ = embed.child.wait();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut embed.stderr, &mut rest);
        let lines: Vec<&str> = rest
            .lines()
            .filter(|l| l.starts_with("nl6-profile:"))
            .collect();
        match said {
            Some(needle) => assert!(
                lines.len() == 1 && lines[0].contains(needle),
                "{what}: want one stderr line saying {needle:?}, got:\n{rest}"
            ),
            None => assert!(lines.is_empty(), "{what}: {rest}"),
        }
    }
}
