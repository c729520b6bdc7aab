//! End to end through the engine: sample a known hot function with the CPU sampler, encode the window as
//! pprof, and read it back with `go tool pprof`, the reader our users have. Run on the host build and on
//! the static musl build (scripts/test.sh), which is where other Rust profilers lose the running function.
//!
//! One CPU profile can run per process, so the tests here take a lock.

#[path = "support/go_pprof.rs"]
mod go_pprof_support;
mod support;

use nl6_profile::labels::LabelSet;
use nl6_profile::{cpu, encode};
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

static SAMPLER: Mutex<()> = Mutex::new(());

/// The hot function the profile must name as its top flat entry: a tight arithmetic loop that calls
/// nothing, so every sample that lands in it is its own flat time.
#[inline(never)]
fn engine_profile_hot_spin(iterations: u64) -> u64 {
    // Plain operators only (a xorshift): even an unoptimised build calls nothing from this loop.
    let mut x = black_box(0x9e3779b97f4a7c15u64);
    let mut i = 0;
    while i < iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i += 1;
    }
    x
}

/// A second, smaller load that sorts, so std's sort code and the comparison closure show in the stacks.
#[inline(never)]
fn engine_profile_hot_sort(rounds: usize) -> u64 {
    let mut acc = 0u64;
    for r in 0..rounds {
        let mut v: Vec<u64> = (0..4096u64)
            .map(|i| (i * 2654435761 + r as u64) % 10007)
            .collect();
        v.sort_by(|a, b| b.cmp(a));
        acc = acc.wrapping_add(v[17]);
    }
    acc
}

/// Burns until this thread has used `cpu` of its own CPU time (bounded by 30 s of wall time), so a loaded
/// machine still yields enough samples.
fn burn_cpu(cpu: Duration) -> u64 {
    let wall_limit = Instant::now() + Duration::from_secs(30);
    let mut acc = 0;
    while support::thread_cpu() < cpu && Instant::now() < wall_limit {
        acc ^= engine_profile_hot_spin(black_box(2_000_000));
        acc ^= engine_profile_hot_sort(black_box(1));
    }
    acc
}

fn go_pprof(args: &[&str], path: &std::path::Path) -> String {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.push(path.as_os_str());
    go_pprof_support::go_pprof_ok(&all, &std::env::temp_dir())
}

fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nl6-engine-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn cpu_profile_names_the_running_function_and_its_std_callees() {
    let _g = SAMPLER.lock().unwrap_or_else(|e| e.into_inner());
    let session = cpu::start(cpu::DEFAULT_HZ).expect("start the sampler");
    let t = nl6_profile::threads::spawn_labelled(label("snmp"), "hot-sorter", || {
        burn_cpu(Duration::from_millis(1500))
    })
    .unwrap();
    black_box(t.join().unwrap());
    let profile = session.stop();
    assert!(
        profile.samples.iter().map(|s| s.count).sum::<u64>() >= 50,
        "too few samples: {:?}",
        profile.samples.len()
    );
    let path = write_temp("cpu.pb.gz", &encode::cpu(&profile));

    // -top: the hot function is the top flat entry: the sampler recorded the interrupted instruction
    // itself, not only its callers.
    let top = go_pprof(&["-top", "-nodecount=15"], &path);
    let rows: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .collect();
    assert!(!rows.is_empty(), "no rows in:\n{top}");
    assert!(
        rows[0].ends_with("engine_profile::engine_profile_hot_spin"),
        "top flat entry is not the hot function:\n{top}"
    );

    // -traces: the hot function's stacks go through std's sort and the comparison closure.
    let traces = go_pprof(&["-traces"], &path);
    assert!(
        traces.contains("engine_profile::engine_profile_hot_sort"),
        "{traces}"
    );
    assert!(
        traces.contains("core::slice::sort"),
        "no std sort frames in stacks:\n{traces}"
    );
    assert!(
        traces.contains("{{closure}}"),
        "the comparison closure is missing:\n{traces}"
    );

    // -tags: the birth label rides on the samples.
    let tags = go_pprof(&["-tags"], &path);
    assert!(
        tags.contains("subsystem") && tags.contains("snmp"),
        "{tags}"
    );
}

#[test]
fn every_engine_profile_kind_opens_in_go_tool_pprof() {
    let _g = SAMPLER.lock().unwrap_or_else(|e| e.into_inner());
    let threads = nl6_profile::threads::capture_all(Duration::from_secs(2));
    assert!(
        threads.len() >= 2,
        "expected the test threads, got {}",
        threads.len()
    );
    let heap = nl6_profile::heap::snapshot();
    let kinds: Vec<(&str, Vec<u8>)> = vec![
        ("goroutine", encode::goroutine(&threads)),
        (
            "threadcreate",
            encode::threadcreate(&nl6_profile::threads::threadcreate_stacks()),
        ),
        ("heap", encode::heap(&heap, encode::HeapView::Heap)),
        ("allocs", encode::heap(&heap, encode::HeapView::Allocs)),
        ("block", encode::contention_empty()),
    ];
    for (name, bytes) in kinds {
        let path = write_temp(&format!("{name}.pb.gz"), &bytes);
        let raw = go_pprof(&["-raw"], &path);
        assert!(
            raw.contains("Samples:") || raw.contains("PeriodType"),
            "{name}: {raw}"
        );
    }
}
