//! Every profile kind, encoded from synthetic inputs whose stacks are real addresses in this binary, opened
//! with `go tool pprof` and checked with google/pprof's parser and CheckValid; and the heap sampler's
//! accuracy with this binary's own `SamplingAllocator`.
//!
//! Run: `cargo test --test engine_encode` (also with `--target x86_64-unknown-linux-musl`).

// The one checker, shared with nl6's tests (tests/push/alloy.rs).
#[path = "support/encode_check.rs"]
mod engine_encode_support;

mod support;
use engine_encode_support::{check, pprof, write_profile};
use nl6_profile::cpu::{CpuProfile, CpuSample};
use nl6_profile::delta::{heap_between, HeapDelta};
use nl6_profile::encode::{self, HeapView};
use nl6_profile::heap::{self, HeapRecord, HeapSnapshot, SamplingAllocator};
use nl6_profile::labels::LabelSet;
use nl6_profile::threads::ThreadStack;
use std::time::{Duration, SystemTime};
use support::proto;

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

#[inline(never)]
fn hot_leaf() -> u64 {
    std::hint::black_box(1)
}

#[inline(never)]
fn warm_caller() -> u64 {
    hot_leaf() + std::hint::black_box(2)
}

#[inline(never)]
fn cold_root() -> u64 {
    warm_caller() + std::hint::black_box(3)
}

fn addr(f: fn() -> u64) -> u64 {
    f as *const () as u64
}

/// A CPU-style stack: hot_leaf's instruction (exact), then return addresses inside its callers.
fn cpu_stack() -> Vec<u64> {
    vec![
        addr(hot_leaf) + 4,
        addr(warm_caller) + 9,
        addr(cold_root) + 9,
    ]
}

/// Executable mappings of this process that a profile lists (files and the vDSO), as Go's runtime/pprof.
fn executable_mappings() -> usize {
    support::maps::read_self()
        .iter()
        .filter(|m| m.executable && (m.path.starts_with('/') || m.path == "[vdso]"))
        .count()
}

fn type_names(types: &[&str]) -> Vec<String> {
    types.iter().map(|s| s.to_string()).collect()
}

#[test]
fn cpu_profile_opens_in_go_tool_pprof_with_go_shape() {
    let profile = CpuProfile {
        start: SystemTime::now(),
        duration: Duration::from_secs(2),
        period_ns: 10_000_000,
        samples: vec![
            CpuSample {
                stack: cpu_stack(),
                label: label("snmp").index(),
                count: 30,
            },
            CpuSample {
                stack: cpu_stack()[1..].to_vec(),
                label: label("trap").index(),
                count: 5,
            },
        ],
        lost: 2,
        coverage: Default::default(),
    };
    let path = write_profile("cpu", &encode::cpu(&profile));
    let shape = check(&path);
    assert_eq!(
        shape.sample_types,
        type_names(&["samples/count", "cpu/nanoseconds"])
    );
    assert_eq!(shape.period_type, "cpu/nanoseconds");
    assert_eq!(shape.period, 10_000_000);
    assert_eq!(shape.default_sample_type, "");
    assert_eq!(shape.duration_nanos, 2_000_000_000);
    assert!(shape.time_nanos > 0);
    assert_eq!(shape.totals.unwrap(), vec![37, 370_000_000]);
    let mappings = shape.mappings.unwrap();
    assert_eq!(
        mappings.len(),
        executable_mappings(),
        "one Mapping per executable mapping: {mappings:?}"
    );
    assert!(mappings.iter().all(|m| m.has_functions));
    assert!(!mappings[0].build_id.is_empty(), "the executable first");
    assert!(mappings[0].file.ends_with(
        std::env::current_exe()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    ));

    let top = pprof(&["-top", "-nodecount=5"], &path);
    let first = top
        .lines()
        .find(|l| l.contains("engine_encode::"))
        .expect("a named function in -top");
    assert!(
        first.contains("engine_encode::hot_leaf"),
        "hot_leaf is the top flat entry:\n{top}"
    );
    assert!(
        top.contains(encode::LOST_SAMPLES_FUNCTION),
        "lost samples are attributed:\n{top}"
    );
    let raw = pprof(&["-raw"], &path);
    assert!(
        raw.contains("engine_encode::warm_caller") && raw.contains("engine_encode::cold_root"),
        "{raw}"
    );
    let tags = pprof(&["-tags"], &path);
    assert!(
        tags.contains("subsystem") && tags.contains("snmp") && tags.contains("trap"),
        "{tags}"
    );
}

/// Records at three sites with hand-chosen raw counters.
fn synthetic_heap() -> HeapSnapshot {
    let rec = |stack: Vec<u64>, size: u64, allocs: u64, frees: u64| HeapRecord {
        stack,
        size,
        alloc_objects: allocs,
        alloc_bytes: allocs * size,
        free_objects: frees,
        free_bytes: frees * size,
    };
    let ret = |f: fn() -> u64| addr(f) + 9;
    HeapSnapshot {
        rate: heap::DEFAULT_RATE,
        records: vec![
            rec(vec![ret(hot_leaf), ret(warm_caller)], 4096, 10, 4),
            rec(vec![ret(warm_caller), ret(cold_root)], 1 << 20, 3, 0),
            rec(vec![ret(cold_root)], 64, 100, 100),
        ],
        note: None,
    }
}

/// Go's `scaleHeapSample` (runtime/pprof/protomem.go), written out here rather than taken from the
/// engine: (count, size) times 1 / (1 - e^(-(size/count)/rate)), truncated.
fn go_scale(count: u64, size: u64, rate: usize) -> [i64; 2] {
    if count == 0 || size == 0 {
        return [0, 0];
    }
    if rate <= 1 {
        return [count as i64, size as i64];
    }
    let avg = size as f64 / count as f64;
    let scale = 1.0 / (1.0 - (-avg / rate as f64).exp());
    [(count as f64 * scale) as i64, (size as f64 * scale) as i64]
}

fn expected_heap_totals(s: &HeapSnapshot) -> Vec<i64> {
    let mut t = vec![0i64; 4];
    for r in &s.records {
        let [ao, ab] = go_scale(r.alloc_objects, r.alloc_bytes, s.rate);
        let [io, ib] = go_scale(
            r.alloc_objects.saturating_sub(r.free_objects),
            r.alloc_bytes.saturating_sub(r.free_bytes),
            s.rate,
        );
        for (i, v) in [ao, ab, io, ib].into_iter().enumerate() {
            t[i] += v;
        }
    }
    t
}

#[test]
fn heap_and_allocs_have_go_shape_and_scaled_totals() {
    let snap = synthetic_heap();
    let want = expected_heap_totals(&snap);
    let heap_path = write_profile("heap", &encode::heap(&snap, HeapView::Heap));
    let shape = check(&heap_path);
    assert_eq!(
        shape.sample_types,
        type_names(&[
            "alloc_objects/count",
            "alloc_space/bytes",
            "inuse_objects/count",
            "inuse_space/bytes"
        ])
    );
    assert_eq!(shape.period_type, "space/bytes");
    assert_eq!(shape.period, 524_288);
    assert_eq!(shape.default_sample_type, "");
    assert_eq!(shape.duration_nanos, 0, "Go's heap profile has no duration");
    assert_eq!(shape.totals.unwrap(), want);
    let mut nums = shape.num_labels.unwrap();
    nums.sort();
    assert_eq!(nums, ["bytes=1048576", "bytes=4096", "bytes=64"]);

    // inuse_space total as go tool pprof reports it: 6×4096 + 3×1 MiB, scaled.
    let top = pprof(
        &["-sample_index=inuse_space", "-top", "-unit=byte"],
        &heap_path,
    );
    let total = want[3];
    assert!(
        top.contains(&format!("of {total}B total")),
        "inuse_space total {total}:\n{top}"
    );
    assert!(top.contains("engine_encode::hot_leaf"), "{top}");

    let allocs_path = write_profile("allocs", &encode::heap(&snap, HeapView::Allocs));
    let shape = check(&allocs_path);
    assert_eq!(shape.default_sample_type, "alloc_space");
    let top = pprof(&["-top", "-unit=byte"], &allocs_path);
    assert!(
        top.contains("Type: alloc_space"),
        "allocs defaults to alloc_space:\n{top}"
    );
    assert!(top.contains(&format!("of {}B total", want[1])), "{top}");
}

#[test]
fn goroutine_threadcreate_and_contention_profiles_are_valid() {
    let threads = vec![
        ThreadStack {
            tid: 10,
            name: "nl6-snmp-0".into(),
            label: label("snmp").index(),
            stack: cpu_stack(),
            missing: None,
        },
        ThreadStack {
            tid: 11,
            name: "nl6-snmp-0".into(),
            label: label("snmp").index(),
            stack: cpu_stack(),
            missing: None,
        },
        ThreadStack {
            tid: 12,
            name: "main".into(),
            label: 0,
            stack: cpu_stack()[1..].to_vec(),
            missing: None,
        },
    ];
    let path = write_profile("goroutine", &encode::goroutine(&threads));
    let shape = check(&path);
    assert_eq!(shape.sample_types, type_names(&["goroutine/count"]));
    assert_eq!(
        (shape.period_type.as_str(), shape.period),
        ("goroutine/count", 1)
    );
    assert_eq!(
        shape.samples, 2,
        "two identical threads aggregate into one sample"
    );
    assert_eq!(shape.totals.unwrap(), vec![3]);
    let mut labels = shape.str_labels.unwrap();
    labels.sort();
    assert_eq!(
        labels,
        [
            "subsystem=snmp",
            "thread_name=main",
            "thread_name=nl6-snmp-0"
        ]
    );
    let tags = pprof(&["-tags"], &path);
    assert!(
        tags.contains("subsystem") && tags.contains("thread_name"),
        "{tags}"
    );

    let path = write_profile(
        "threadcreate",
        &encode::threadcreate(&[cpu_stack()[1..].to_vec()]),
    );
    let shape = check(&path);
    assert_eq!(shape.sample_types, type_names(&["threadcreate/count"]));
    assert_eq!(
        (shape.period_type.as_str(), shape.period),
        ("threadcreate/count", 1)
    );
    assert!(pprof(&["-raw"], &path).contains("engine_encode::warm_caller"));

    let path = write_profile("block", &encode::contention_empty());
    let shape = check(&path);
    assert_eq!(
        shape.sample_types,
        type_names(&["contentions/count", "delay/nanoseconds"])
    );
    assert_eq!(
        (shape.period_type.as_str(), shape.period, shape.samples),
        ("contentions/count", 1, 0)
    );
    assert_eq!(
        shape.mappings.map(|m| m.len()),
        Some(executable_mappings()),
        "Go lists every mapping, samples or not"
    );
    assert!(shape.time_nanos > 0);
    pprof(&["-top"], &path);
}

#[test]
fn goroutine_text_matches_go_formats() {
    let threads = vec![
        ThreadStack {
            tid: 10,
            name: "worker".into(),
            label: label("flow").index(),
            stack: cpu_stack(),
            missing: None,
        },
        ThreadStack {
            tid: 11,
            name: "worker".into(),
            label: label("flow").index(),
            stack: cpu_stack(),
            missing: None,
        },
    ];
    let text = encode::goroutine_text(&threads, 1);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("goroutine profile: total 2"));
    let at = lines.next().unwrap();
    assert_eq!(
        at,
        format!(
            "2 @ {:#x} {:#x} {:#x}",
            cpu_stack()[0],
            cpu_stack()[1],
            cpu_stack()[2]
        )
    );
    assert_eq!(
        lines.next(),
        Some(r#"# labels: {"subsystem":"flow", "thread_name":"worker"}"#)
    );
    let frame = lines.next().unwrap();
    assert!(
        frame.starts_with(&format!("#\t{:#x}\t", cpu_stack()[0])),
        "{frame:?}"
    );
    assert!(frame.contains("engine_encode::hot_leaf+0x4"), "{frame:?}");
    // google/pprof reads Go's legacy count text too.
    let path = write_profile("goroutine-text", text.as_bytes());
    let shape = check(&path);
    assert_eq!(shape.totals.unwrap(), vec![2]);

    let dump = encode::goroutine_text(&threads, 2);
    assert!(
        dump.starts_with("goroutine 10 [running, thread \"worker\", subsystem \"flow\"]:\n"),
        "{dump}"
    );
    assert!(dump.contains("engine_encode::hot_leaf(...)\n\t"), "{dump}");
    assert!(dump.contains(" +0x4\n"), "{dump}");
}

#[test]
fn heap_text_is_readable_by_pprof() {
    let snap = synthetic_heap();
    let text = encode::heap_text(&snap);
    assert!(
        text.starts_with("heap profile: 9: 3170304 [113: 3193088] @ heap/1048576\n"),
        "{text}"
    );
    let path = write_profile("heap-text", text.as_bytes());
    check(&path);
}

// ------------------------------------------------------------------------------------------------------
// The real sampler.

const SMALL: usize = 4096;
const SMALL_COUNT: usize = 20_000;
const LARGE: usize = 1 << 20;
const LARGE_COUNT: usize = 200;

/// Allocates the known live set: 20 000 × 4 KiB and 200 × 1 MiB (plus the two Vecs holding them).
#[inline(never)]
fn hold_live_blocks() -> [Vec<Box<[u8]>>; 2] {
    let mut small = Vec::with_capacity(SMALL_COUNT);
    for _ in 0..SMALL_COUNT {
        small.push(vec![0u8; SMALL].into_boxed_slice());
    }
    let mut large = Vec::with_capacity(LARGE_COUNT);
    for _ in 0..LARGE_COUNT {
        large.push(vec![0u8; LARGE].into_boxed_slice());
    }
    std::hint::black_box([small, large])
}

/// The delta test's own site (tests run in parallel; sites must not be shared).
#[inline(never)]
fn hold_for_delta() -> Vec<Box<[u8]>> {
    (0..50)
        .map(|_| vec![0u8; LARGE].into_boxed_slice())
        .collect()
}

#[inline(never)]
fn second_wave() -> Vec<Box<[u8]>> {
    (0..100)
        .map(|_| vec![0u8; LARGE].into_boxed_slice())
        .collect()
}

/// Sums (alloc_space, inuse_space) over samples whose stack names `function`.
fn space_of(bytes: &[u8], function: &str) -> (i64, i64) {
    let p = proto::decode(bytes).unwrap();
    let names: std::collections::HashMap<u64, &str> = p
        .function
        .iter()
        .map(|f| (f.id, p.string_table[f.name as usize].as_str()))
        .collect();
    let locs: std::collections::HashMap<u64, &proto::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    let mut out = (0, 0);
    for s in &p.sample {
        let hit = s.location_id.iter().any(|id| {
            locs[id]
                .line
                .iter()
                .any(|l| names[&l.function_id].ends_with(function))
        });
        if hit {
            out.0 += s.value[1];
            out.1 += s.value[3];
        }
    }
    out
}

#[test]
fn heap_sampler_inuse_within_ten_percent_and_frees_are_matched() {
    assert_eq!(
        heap::rate(),
        heap::DEFAULT_RATE,
        "sampling is on from process start at Go's rate"
    );
    let held = hold_live_blocks();
    let truth =
        (SMALL * SMALL_COUNT + LARGE * LARGE_COUNT + 8 * 2 * (SMALL_COUNT + LARGE_COUNT)) as f64;
    let live = encode::heap(&heap::snapshot(), HeapView::Heap);
    let (alloc, inuse) = space_of(&live, "engine_encode::hold_live_blocks");
    let err = (inuse as f64 - truth) / truth;
    eprintln!(
        "heap accuracy: inuse_space {inuse} vs true {truth} ({:+.2} %)",
        err * 100.0
    );
    assert!(
        err.abs() <= 0.10,
        "inuse_space {inuse} vs true live {truth} ({:+.1} %)",
        err * 100.0
    );
    assert!(alloc >= inuse);
    let path = write_profile("heap-live", &live);
    check(&path);
    let top = pprof(&["-sample_index=inuse_space", "-top", "-cum"], &path);
    assert!(top.contains("engine_encode::hold_live_blocks"), "{top}");
    assert!(
        !top.contains("nl6_profile::heap::"),
        "the sampler's own frames are trimmed:\n{top}"
    );

    drop(held);
    let after = encode::heap(&heap::snapshot(), HeapView::Heap);
    let (alloc_after, inuse_after) = space_of(&after, "engine_encode::hold_live_blocks");
    assert!(
        inuse_after as f64 <= truth * 0.01,
        "after free, inuse {inuse_after} should be ~0"
    );
    assert!(
        alloc_after >= alloc,
        "alloc_space stays: {alloc_after} vs {alloc}"
    );
}

#[test]
fn delta_heap_shows_only_new_allocations() {
    let delta = HeapDelta::new();
    let held = hold_for_delta();
    let before = heap::snapshot();
    let first = delta.next(&before);
    let (alloc1, _) = space_of(&first, "engine_encode::hold_for_delta");
    assert!(alloc1 > 0, "first call is cumulative");
    let wave = second_wave();
    let after = heap::snapshot();
    let second = delta.next(&after);
    let (alloc2, inuse2) = space_of(&second, "engine_encode::hold_for_delta");
    assert_eq!(
        alloc2, 0,
        "no new allocations at hold_for_delta since the previous call"
    );
    assert!(inuse2 > 0, "inuse is absolute in a delta");
    let (wave_alloc, _) = space_of(&second, "engine_encode::second_wave");
    let wave_truth = (100 * LARGE) as f64;
    assert!(
        (wave_alloc as f64 - wave_truth).abs() <= wave_truth * 0.25,
        "second wave alloc {wave_alloc}"
    );
    check(&write_profile("delta-heap", &second));

    let between = heap_between(&before, &after, Duration::from_secs(5), HeapView::Heap);
    let shape = check(&write_profile("heap-between", &between));
    assert_eq!(shape.duration_nanos, 5_000_000_000);
    assert_eq!(space_of(&between, "engine_encode::hold_for_delta"), (0, 0));
    assert!(space_of(&between, "engine_encode::second_wave").0 > 0);
    drop((held, wave));
}

#[test]
fn symbol_endpoint_names_functions() {
    let name = nl6_profile::symbols::symbolize(addr(hot_leaf) + 3).unwrap();
    assert_eq!(name, "engine_encode::hot_leaf");
}
