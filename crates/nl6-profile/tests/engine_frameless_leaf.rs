//! A frameless libc leaf keeps its Rust caller: a thread spends its time in libc (`free` → `munmap` of
//! large blocks, `memcpy` of large buffers) under two known `#[inline(never)]` Rust functions; in the CPU
//! profile, nearly every sample whose leaf is libc code must still have one of them on its stack.
//!
//! Libc leaves are recognised without libc's names: outside the executable's code (glibc's libc.so) or,
//! inside it (musl's libc.a in the static build), a symbol that is not a Rust path. Runs on the glibc
//! build and, through `scripts/test.sh`'s `engine_` list, on the static musl build.
use nl6_profile::labels::LabelSet;
use nl6_profile::symbols::symbolize;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

/// Allocates and frees blocks far above the mmap threshold: each one is an `mmap` and a `munmap`. libc
/// is called directly, so no Rust frame (with its frame pointer) sits between this function and libc,
/// whatever the build's optimisation level.
#[inline(never)]
fn free_big_blocks(rounds: u32) {
    for _ in 0..rounds {
        // SAFETY: malloc/free of a block we own; the pointer is not used after free.
        unsafe {
            let p = libc::malloc(4 << 20);
            black_box(p);
            libc::free(black_box(p));
        }
    }
}

/// Copies a large buffer with libc's `memcpy`, called directly.
#[inline(never)]
fn copy_big_buffer(src: &[u8], dst: &mut [u8]) {
    let n = src.len().min(dst.len());
    // SAFETY: both buffers hold at least n bytes and do not overlap.
    unsafe { libc::memcpy(dst.as_mut_ptr().cast(), black_box(src.as_ptr()).cast(), n) };
    black_box(dst);
}

/// The executable's code range, from /proc/self/maps.
fn exe_code_range() -> (u64, u64) {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let exe = exe.to_string_lossy();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut range = (u64::MAX, 0);
    for line in maps.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() >= 6 && f[1].contains('x') && f[5] == exe {
            let (lo, hi) = f[0].split_once('-').unwrap();
            range.0 = range.0.min(u64::from_str_radix(lo, 16).unwrap());
            range.1 = range.1.max(u64::from_str_radix(hi, 16).unwrap());
        }
    }
    assert!(range.1 > 0, "no code mapping of {exe}");
    range
}

fn is_rust_name(name: &str) -> bool {
    name.contains("::") || name.starts_with("_ZN") || name.starts_with("_R")
}

#[test]
fn the_rust_caller_of_a_frameless_libc_leaf_is_kept() {
    let label = label("frameless-leaf-test");
    let session = nl6_profile::cpu::start(250).expect("CPU profiler");
    // The buffers are made and freed outside the labelled thread: only the two known functions run
    // libc code under the label.
    let (src, mut dst) = (vec![7u8; 8 << 20], vec![0u8; 8 << 20]);
    let worker = nl6_profile::threads::spawn_labelled(label, "frameless-work", move || {
        let end = Instant::now() + Duration::from_millis(2500);
        while Instant::now() < end {
            free_big_blocks(200);
            copy_big_buffer(&src, &mut dst);
        }
        (src, dst)
    })
    .unwrap();
    drop(worker.join().unwrap());
    let profile = session.stop();
    let (lo, hi) = exe_code_range();
    let (mut libc_leaf, mut kept, mut lost) = (0u64, 0u64, Vec::new());
    for s in profile.samples.iter().filter(|s| s.label == label.index()) {
        let Some(&leaf) = s.stack.first() else {
            continue;
        };
        let leaf_name = symbolize(leaf);
        let in_libc =
            !(lo..hi).contains(&leaf) || leaf_name.as_deref().is_some_and(|n| !is_rust_name(n));
        if !in_libc {
            continue;
        }
        libc_leaf += s.count;
        let names: Vec<String> = s
            .stack
            .iter()
            .skip(1)
            .filter_map(|a| symbolize(a.saturating_sub(1)))
            .collect();
        if names
            .iter()
            .any(|n| n.contains("free_big_blocks") || n.contains("copy_big_buffer"))
        {
            kept += s.count;
        } else if lost.len() < 5 {
            lost.push((leaf_name, names));
        }
    }
    eprintln!(
        "FIGURE frameless leaves: {kept} of {libc_leaf} libc-leaf samples keep their Rust caller"
    );
    assert!(
        libc_leaf >= 50,
        "the workload ran in libc ({libc_leaf} samples with a libc leaf)"
    );
    assert!(
        kept * 100 >= libc_leaf * 95,
        "only {kept} of {libc_leaf} libc-leaf samples have the Rust caller; some without: {lost:#?}"
    );
}
