//! Labels as Go's: several keys and values per sample, from prebuilt label sets, read back by
//! `go tool pprof -tags` (the reader our users have) from CPU and goroutine profiles.
//!
//! One CPU profile can run per process, so the CPU test is the only one in this binary that profiles.
#[path = "support/go_pprof.rs"]
mod go_pprof_support;
mod support;

use nl6_profile::labels::{self, LabelSet};
use nl6_profile::{cpu, encode, threads};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn work_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nl6-profile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Spins until this thread has used `cpu` of CPU time (on a loaded machine wall time says little),
/// for at most 30 s of wall time.
#[inline(never)]
fn spin_for(cpu: Duration) -> u64 {
    let (start, end) = (
        support::thread_cpu(),
        Instant::now() + Duration::from_secs(30),
    );
    let mut x = 1u64;
    while support::thread_cpu() - start < cpu && Instant::now() < end {
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    black_box(x)
}

/// `go tool pprof -tags` output, one `key: value` fact per line it prints.
fn tags(file: &std::path::Path, dir: &std::path::Path) -> String {
    go_pprof_support::go_pprof_ok(&["-tags".as_ref(), file.as_os_str()], dir)
}

#[test]
fn cpu_samples_carry_every_pair_of_their_set_in_go_tool_pprof() {
    let a = LabelSet::new([("tenant", "acme"), ("route", "/orders"), ("region", "eu")]);
    let b = LabelSet::new([("tenant", "globex"), ("route", "/users")]);
    let session = cpu::start(250).expect("CPU profiler");
    let workers: Vec<_> = [a, b]
        .into_iter()
        .map(|set| {
            std::thread::spawn(move || {
                threads::on_thread_start();
                labels::with(set, || spin_for(Duration::from_millis(600)))
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let profile = session.stop();
    let count = |set: LabelSet| -> u64 {
        profile
            .samples
            .iter()
            .filter(|s| s.label == set.index())
            .map(|s| s.count)
            .sum()
    };
    assert!(
        count(a) >= 20 && count(b) >= 20,
        "a: {}, b: {}",
        count(a),
        count(b)
    );
    let dir = work_dir("labels-cpu");
    let file = dir.join("cpu.pb.gz");
    std::fs::write(&file, encode::cpu(&profile)).unwrap();
    let out = tags(&file, &dir);
    eprintln!("{out}");
    // pprof prints each key once, then its values with their share of samples.
    for key in ["tenant:", "route:", "region:"] {
        assert!(
            out.contains(key),
            "`{key}` missing from go tool pprof -tags:\n{out}"
        );
    }
    for value in ["acme", "globex", "/orders", "/users", "eu"] {
        assert!(
            out.contains(value),
            "value {value} missing from go tool pprof -tags:\n{out}"
        );
    }
    // Only the samples of `a` carry a region: pprof's `-tagfocus` keeps exactly those.
    let region_only = go_pprof_support::go_pprof_ok(
        &[
            "-tags".as_ref(),
            "-tagfocus=region=eu".as_ref(),
            file.as_os_str(),
        ],
        &dir,
    );
    assert!(
        region_only.contains("acme") && !region_only.contains("globex"),
        "{region_only}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn goroutine_samples_carry_the_set_and_the_thread_name() {
    let set = LabelSet::new([("pool", "ingest"), ("shard", "7")]);
    let (ready, stop) = (Arc::new(Barrier::new(2)), Arc::new(AtomicBool::new(false)));
    let (r, s) = (ready.clone(), stop.clone());
    let worker = threads::spawn_labelled(set, "shard-seven", move || {
        r.wait();
        while !s.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
    })
    .unwrap();
    ready.wait();
    let stacks = threads::capture_all(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let mine = stacks
        .iter()
        .find(|t| t.name == "shard-seven")
        .expect("the worker is listed");
    assert_eq!(LabelSet::from_index(mine.label), Some(set));
    let dir = work_dir("labels-goroutine");
    let file = dir.join("goroutine.pb.gz");
    std::fs::write(&file, encode::goroutine(&stacks)).unwrap();
    let out = tags(&file, &dir);
    for want in [
        "pool:",
        "ingest",
        "shard:",
        "7",
        "thread_name:",
        "shard-seven",
    ] {
        assert!(
            out.contains(want),
            "{want} missing from go tool pprof -tags:\n{out}"
        );
    }
    let text = encode::goroutine_text(&stacks, 2);
    assert!(
        text.contains(r#"thread "shard-seven", pool "ingest", shard "7""#),
        "debug=2 header of the worker:\n{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
