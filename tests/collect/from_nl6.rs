//! The `nl6` binary's `collect` and `report` subcommands, and collection from a running nl6: first with
//! its profiling gate closed (503, message kept in meta.json), then open pull-only
//! (`POST /api/v1/profiling {"enabled":true,"server_address":""}`), where the archived profiles open in
//! `go tool pprof` and the top tables' first rows match it. Everything stays on 127.0.0.1; every wait
//! is bounded; only processes started here are killed.

use crate::collect_support;
use crate::common;

use std::fs;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use collect_support::*;

const NEEDS_MERGE: &str = "needs nl6's CLI dispatch and pull surface (merge main)";

fn nl6(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nl6"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn binary_dispatches_collect_and_report() {
    let help = nl6(&["collect", "-help"]);
    assert!(help.status.success(), "{NEEDS_MERGE}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("-targets FILE"));
    let bad = nl6(&["collect", "-out", "/nonexistent/nl6"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("nl6 collect: missing -targets"), "{err}");
    let bad = nl6(&["report"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).starts_with("nl6 report: "));
}

#[test]
fn collects_from_a_running_nl6_closed_then_open_pull_only() {
    let work = scratch("nl6");
    let server = common::boot().start();
    let port = server.addr.port();
    let targets = work.join("targets.txt");
    fs::write(&targets, format!("nl6 http://{}\n", server.addr)).unwrap();
    let run = |out: &str| {
        let out = work.join(out);
        let o = nl6(&[
            "collect",
            "-targets",
            targets.to_str().unwrap(),
            "-out",
            out.to_str().unwrap(),
            "-once",
            "-cpu-seconds",
            "1",
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.lines().any(|l| l.starts_with("nl6 collect: cycle ")),
            "no progress line: {err}"
        );
        let (dated, _) = only_dated_dir(&out, "nl6");
        dated.join("127.0.0.1").join(port.to_string())
    };

    // Gate closed: every pprof path answers 503; the collector keeps the message.
    let closed = run("closed");
    let m = meta(&closed);
    assert_eq!(m["status"], "failed", "{m}");
    assert_eq!(m["profiles"]["cpu"]["http_status"], 503);
    assert!(
        m["profiles"]["cpu"]["error"]
            .as_str()
            .unwrap()
            .contains("POST /api/v1/profiling"),
        "{m}"
    );

    // Open pull-only, keep nl6 busy during the CPU window, collect again.
    let (status, _, body) = server.http_with(
        "POST",
        "/api/v1/profiling",
        &[("Content-Type", "application/json")],
        br#"{"enabled":true,"server_address":""}"#,
        Duration::from_secs(10),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, addr) = (stop.clone(), server.addr);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let _ = common::request(
                    addr,
                    "GET",
                    "/api/v1/profiling",
                    &[],
                    b"",
                    Duration::from_secs(10),
                );
            }
        })
    };
    let open = run("open");
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let m = meta(&open);
    assert_eq!(m["status"], "ok", "{m}");
    for kind in ["cpu", "heap"] {
        let ours = fs::read_to_string(open.join(format!("{kind}.top.txt"))).unwrap();
        let theirs = go_pprof_top(&work, &open.join(format!("{kind}.pb.gz")));
        let go_has_rows = theirs
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat  flat%"))
            .nth(1)
            .is_some();
        if go_has_rows {
            assert_eq!(
                first_row(&ours),
                first_row(&theirs),
                "{kind}: ours\n{ours}\ngo tool pprof\n{theirs}"
            );
        } else {
            assert!(ours.contains(nl6::report::NO_SAMPLES), "{kind}: {ours}");
        }
    }
    // nl6 report reads what was archived.
    let o = nl6(&["report", open.join("heap.pb.gz").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Type: "));
    drop(server);
    fs::remove_dir_all(&work).unwrap();
}
