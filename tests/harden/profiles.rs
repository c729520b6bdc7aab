//! Hostile profiles against the real `nl6 report` and `nl6 collect`: a 1.7 KB
//! profile whose one 1 MiB function name fills 200 samples × 200 frames, a 1 KB profile with one
//! 1 000 000-frame sample, a 1 MB gzip bomb and a 520 KB bomb behind a valid profile prefix. Each must
//! end quickly with exit 1, one clear line on stderr and bounded memory (the child's peak RSS, from
//! wait4). In `collect`, a hostile target fails alone: the good target beside it is archived.
//!
//! The fixtures are generated here. Everything stays on 127.0.0.1; every wait is bounded; only the
//! processes started here are killed.

use crate::collect_support;
use crate::hostile_support;

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hostile_support::fixtures;

/// Peak RSS allowed for any hostile input (the target is 256 MB).
const RSS_LIMIT_KB: i64 = 256 * 1000;
/// Wall time allowed here; the target (2 s) is measured on an idle machine, and this one is
/// shared with other builds.
const TIME_LIMIT: Duration = Duration::from_secs(20);

/// What a finished child did: exit code, stderr, wall time and peak RSS in kB.
struct Run {
    code: Option<i32>,
    stderr: String,
    elapsed: Duration,
    max_rss_kb: i64,
}

/// Runs the nl6 binary with `args`, reaping it with wait4 for its own peak RSS; killed past
/// [`TIME_LIMIT`].
// The child is reaped by wait4 below (std's wait would not give its rusage).
#[allow(clippy::zombie_processes)]
fn run_nl6(args: &[&str]) -> Run {
    let start = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nl6"));
    // A regression must not take the shared machine's memory with it: 4 GiB of address space at most.
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (std never waits for it: we reap it here).
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nl6 {args:?} still running after {TIME_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Run {
        code,
        stderr: reader.join().unwrap(),
        elapsed: start.elapsed(),
        max_rss_kb: usage.ru_maxrss,
    }
}

#[test]
fn report_refuses_each_hostile_profile_quickly_in_one_line() {
    let work = collect_support::scratch("report-hostile");
    for (name, bytes) in fixtures() {
        let file = work.join("hostile.pb.gz");
        fs::write(&file, &bytes).unwrap();
        let svg = work.join("out.svg");
        let r = run_nl6(&[
            "report",
            "-svg",
            svg.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        eprintln!(
            "{name}: {} bytes, exit {:?}, {:?}, max RSS {} kB: {}",
            bytes.len(),
            r.code,
            r.elapsed,
            r.max_rss_kb,
            r.stderr.trim_end()
        );
        assert_eq!(r.code, Some(1), "{name}: {}", r.stderr);
        assert_eq!(
            r.stderr.lines().count(),
            1,
            "{name}: one line: {}",
            r.stderr
        );
        assert!(
            r.stderr.starts_with("nl6 report: ") && r.stderr.contains("limit"),
            "{name}: the line names the limit: {}",
            r.stderr
        );
        assert!(r.stderr.len() < 400, "{name}: {}", r.stderr);
        assert!(
            r.max_rss_kb < RSS_LIMIT_KB,
            "{name}: peak RSS {} kB",
            r.max_rss_kb
        );
        assert!(
            !svg.exists(),
            "{name}: no SVG is written for a refused profile"
        );
    }
    let _ = fs::remove_dir_all(&work);
}

/// An HTTP 200 answer carrying `body`.
fn ok_reply(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn read_meta(dir: &Path) -> serde_json::Value {
    collect_support::meta(dir)
}

#[test]
fn collect_archives_the_good_target_beside_each_hostile_one() {
    let work = collect_support::scratch("collect-hostile");
    let good = collect_support::fake_server(Some(collect_support::empty_profile_reply()));
    for (i, (name, bytes)) in fixtures().into_iter().enumerate() {
        let hostile = collect_support::fake_server(Some(ok_reply(&bytes)));
        let targets = work.join("targets.txt");
        fs::write(
            &targets,
            format!(
                "good http://127.0.0.1:{}\nhostile http://127.0.0.1:{}\n",
                good.port, hostile.port
            ),
        )
        .unwrap();
        let out = work.join(format!("out{i}"));
        let r = run_nl6(&[
            "collect",
            "-targets",
            targets.to_str().unwrap(),
            "-out",
            out.to_str().unwrap(),
            "-once",
            "-cpu-seconds",
            "1",
            "-timeout",
            "10s",
        ]);
        eprintln!(
            "collect, {name}: exit {:?}, {:?}, max RSS {} kB",
            r.code, r.elapsed, r.max_rss_kb
        );
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        assert!(
            r.max_rss_kb < RSS_LIMIT_KB,
            "{name}: peak RSS {} kB",
            r.max_rss_kb
        );
        let (good_dated, _) = collect_support::only_dated_dir(&out, "good");
        let good_dir = good_dated.join("127.0.0.1").join(good.port.to_string());
        assert_eq!(read_meta(&good_dir)["status"], "ok", "{name}");
        assert!(good_dir.join("cpu.pb.gz").exists(), "{name}");
        let (bad_dated, _) = collect_support::only_dated_dir(&out, "hostile");
        let bad_dir = bad_dated.join("127.0.0.1").join(hostile.port.to_string());
        let m = read_meta(&bad_dir);
        assert_eq!(m["status"], "failed", "{name}: {m}");
        let err = m["error"].as_str().unwrap_or("");
        assert!(err.contains("limit"), "{name}: {err}");
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(&format!(":{}: ", hostile.port)))
            .unwrap_or_else(|| panic!("{name}: no log line for the hostile target: {}", r.stderr));
        assert!(line.len() < 1000, "{name}: {line}");
    }
    let _ = fs::remove_dir_all(&work);
}
