//! Recorded depth: a thread 100 frames deep in one recursion keeps every one of those frames — and its
//! thread root — in a CPU profile, in the goroutine dump and in a heap sample, as `go tool pprof -traces`
//! reads them; and the two signal handlers' deepest use of the thread's real sigaltstack (the one
//! `spawn_labelled` gave it, queried with `sigaltstack`) leaves a margin even for a wider kernel frame.
//!
//! How the alt stack is measured: the thread fills its own alternate signal stack with a pattern before
//! the signals can reach it (it is not on it then), takes SIGPROF and the stack-capture signal while deep
//! in the recursion, and afterwards finds the lowest byte that changed: everything above it is what the
//! kernel's signal frame and our handler used. Print it with `-- --nocapture`.
//!
//! Its own test binary: it installs the sampling allocator and changes the process-wide heap rate.
#[path = "support/go_pprof.rs"]
mod go_pprof_support;
mod support;

use nl6_profile::encode::{self, HeapView};
use nl6_profile::heap::{self, SamplingAllocator};
use nl6_profile::labels::LabelSet;
use nl6_profile::{cpu, threads};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

/// Frames of the recursion: `engine_depth_recurse(DEPTH - 1)` down to `engine_depth_recurse(0)`.
const DEPTH: usize = 100;

/// Bytes the handlers must leave unused at the far end of the alt stack: room for a libc that needs more
/// than ours, a build that inlines less.
const ALT_MARGIN: usize = 2048;

/// How much larger the kernel's signal frame is on an x86_64 machine with AVX-512 than without: the
/// XSAVE state of the opmask (64 B), upper-ZMM (512 B) and high-16 ZMM (1 024 B) registers. The same
/// binary meets both; a stack sized from the running kernel's `AT_MINSIGSTKSZ` grows with it, a fixed
/// 8 KiB one does not. (aarch64's SVE frames are covered the same way, by `AT_MINSIGSTKSZ`.)
const WIDER_FRAME: usize = if cfg!(target_arch = "x86_64") {
    1600
} else {
    0
};

/// The byte the alt stack is filled with before the signals arrive.
const PATTERN: u8 = 0xA5;

/// One level of the recursion; the addition after the call keeps it from becoming a tail call.
#[inline(never)]
fn engine_depth_recurse(n: usize, bottom: &mut dyn FnMut()) -> usize {
    if n == 0 {
        bottom();
        return 0;
    }
    black_box(engine_depth_recurse(black_box(n - 1), bottom)) + 1
}

/// The CPU the samples land in: a loop that calls nothing.
#[inline(never)]
fn engine_depth_spin(iterations: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// The allocation the heap profile must keep with its whole stack.
#[inline(never)]
fn engine_depth_alloc() -> Vec<u8> {
    black_box(vec![1u8; 1 << 20])
}

/// The calling thread's alternate signal stack `(base, size)`; panics when it has none (std gives every
/// thread it starts one).
fn current_alt_stack() -> (usize, usize) {
    // SAFETY: a query into a zeroed struct we own.
    let ss = unsafe {
        let mut ss: libc::stack_t = std::mem::zeroed();
        assert_eq!(libc::sigaltstack(std::ptr::null(), &mut ss), 0);
        ss
    };
    assert!(
        ss.ss_flags & libc::SS_DISABLE == 0 && ss.ss_size > 0,
        "this thread has no sigaltstack"
    );
    (ss.ss_sp as usize, ss.ss_size)
}

/// Bytes of the alt stack in use at some point since [`fill_alt_stack`]: from the lowest changed byte
/// to the top (stacks grow down).
fn alt_stack_used((base, size): (usize, usize)) -> usize {
    // SAFETY: the thread's own alt stack, mapped read-write by std; no handler runs on it while we read
    // (we are not in one), and volatile reads see what the handlers wrote.
    let changed =
        (0..size).find(|i| unsafe { ((base + i) as *const u8).read_volatile() } != PATTERN);
    changed.map_or(0, |i| size - i)
}

fn fill_alt_stack((base, size): (usize, usize)) {
    // SAFETY: as in `alt_stack_used`; this thread is not running a handler, so nothing lives there.
    unsafe { std::ptr::write_bytes(base as *mut u8, PATTERN, size) };
}

/// The deep thread's steps, as the main thread sees them.
const RUNNING: u8 = 0;
const AT_BOTTOM: u8 = 1;
const DUMPED: u8 = 2;

/// What the deep thread reports: its alt stack's size and the bytes the handlers used of it.
struct AltUse {
    size: usize,
    used: usize,
}

/// Runs the recursion on a thread spawned by the engine: at the bottom it burns `cpu` of its own CPU time
/// and allocates one sampled block, and waits (spinning) until the main thread has taken a goroutine
/// dump. Returns the alt-stack use and the block (kept alive so the heap profile still holds it).
fn deep_thread(cpu: Duration, step: Arc<AtomicU8>) -> (AltUse, Vec<u8>) {
    let alt = current_alt_stack();
    fill_alt_stack(alt);
    let mut block = Vec::new();
    let mut bottom = || {
        let start = support::thread_cpu();
        let wall_limit = Instant::now() + Duration::from_secs(30);
        heap::set_rate(1);
        block = engine_depth_alloc();
        heap::set_rate(heap::DEFAULT_RATE);
        step.store(AT_BOTTOM, Ordering::Release);
        while (support::thread_cpu() - start < cpu || step.load(Ordering::Acquire) != DUMPED)
            && Instant::now() < wall_limit
        {
            black_box(engine_depth_spin(black_box(200_000)));
        }
    };
    black_box(engine_depth_recurse(DEPTH - 1, &mut bottom));
    let used = alt_stack_used(alt);
    let size = alt.1;
    (AltUse { size, used }, block)
}

fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nl6-engine-depth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `go tool pprof -traces` of `path`: each trace's lines (frames, leaf first, after the value line).
fn traces(path: &Path) -> Vec<Vec<String>> {
    let work = path.parent().unwrap();
    let text =
        go_pprof_support::go_pprof_ok(&[Path::new("-traces"), path].map(|p| p.as_os_str()), work);
    text.split("-----------+-------------------------------------------------------")
        .map(|t| {
            t.lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .collect()
}

/// The trace through `leaf` with the most recursion frames, checked whole: all `DEPTH` frames, no stop
/// frame (a stack cut short or deeper than recorded says so in one), a thread root at its end.
fn assert_whole_trace(what: &str, path: &Path, leaf: &str) {
    let all = traces(path);
    let best = all
        .iter()
        .filter(|t| t.iter().any(|l| l.contains(leaf)))
        .max_by_key(|t| {
            t.iter()
                .filter(|l| l.contains("engine_depth_recurse"))
                .count()
        })
        .unwrap_or_else(|| panic!("{what}: no trace through {leaf} in {all:#?}"));
    let levels = best
        .iter()
        .filter(|l| l.contains("engine_depth_recurse"))
        .count();
    assert_eq!(
        levels,
        DEPTH,
        "{what}: recursion frames recorded:\n{}",
        best.join("\n")
    );
    assert!(
        !best.iter().any(|l| l.contains("[unwind:")),
        "{what}: a stop frame:\n{}",
        best.join("\n")
    );
    let root = best.last().unwrap();
    assert!(
        root.contains("clone") || root.contains("start_thread") || root.contains("thread_start"),
        "{what}: the trace does not end at the thread's root:\n{}",
        best.join("\n")
    );
}

#[test]
fn a_stack_100_frames_deep_is_whole_in_cpu_goroutine_and_heap_profiles_and_the_alt_stack_keeps_a_margin(
) {
    let session = cpu::start(cpu::DEFAULT_HZ).expect("start the sampler");
    let step = Arc::new(AtomicU8::new(RUNNING));
    let theirs = step.clone();
    let t = threads::spawn_labelled(LabelSet::new([("role", "deep")]), "deep", move || {
        deep_thread(Duration::from_millis(1500), theirs)
    })
    .unwrap();
    let limit = Instant::now() + Duration::from_secs(30);
    while step.load(Ordering::Acquire) != AT_BOTTOM && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        step.load(Ordering::Acquire),
        AT_BOTTOM,
        "the thread never reached the bottom"
    );
    let dump = threads::capture_all(Duration::from_secs(5));
    let heap_snap = heap::snapshot();
    step.store(DUMPED, Ordering::Release);
    let (alt, block) = t.join().unwrap();
    let profile = session.stop();
    eprintln!(
        "sigaltstack: {} of {} bytes used by the kernel's signal frame and the handlers ({} left)",
        alt.used,
        alt.size,
        alt.size - alt.used
    );

    assert_whole_trace(
        "cpu",
        &write_temp("cpu.pb.gz", &encode::cpu(&profile)),
        "engine_depth_spin",
    );
    assert_whole_trace(
        "goroutine",
        &write_temp("goroutine.pb.gz", &encode::goroutine(&dump)),
        // The dump may find the thread reading its clock between two spins.
        "engine_depth_recurse",
    );
    let heap_pb = encode::heap(&heap_snap, HeapView::Heap);
    assert_whole_trace(
        "heap",
        &write_temp("heap.pb.gz", &heap_pb),
        "engine_depth_alloc",
    );
    drop(block);

    assert!(
        alt.used > 0,
        "no signal ran on the alt stack: the measure measured nothing"
    );
    assert!(
        alt.used + WIDER_FRAME + ALT_MARGIN <= alt.size,
        "the kernel's frame and the handlers used {} of the {}-byte sigaltstack: less than \
         {ALT_MARGIN} bytes to spare with a {WIDER_FRAME}-byte wider frame",
        alt.used,
        alt.size
    );
}
