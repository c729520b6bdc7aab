//! Label costs, side by side in one run: `cargo bench -p nl6-profile --bench labels`.
//!
//! - `labels::with` around a trivial closure, entering one of two prebuilt sets (the scope that
//!   existed before sets had several keys was this same code path);
//! - `LabelSet::enter` and the guard's drop;
//! - a [`Labelled`] future's poll (a ready future, polled by hand) against the bare future's poll;
//! - building a set that is already in the table (`LabelSet::new` of two pairs: lock + lookup), which
//!   a service pays when it builds per request instead of once.
//!
//! Each line gives ns per operation (minus the loop alone) and the heap allocations counted by this
//! binary's global allocator over the whole loop (target for entering: ≤ 10 ns and 0 allocations). Go's
//! `pprof.Do` for comparison: `cd benches/go && go test -bench . -benchmem`.
use nl6_profile::labels::{self, LabelSet, LabelledFuture};
use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to System with the caller's arguments; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Times `n` calls of `f(i)`; returns (elapsed, allocations).
fn run(n: u64, mut f: impl FnMut(u64) -> u64) -> (Duration, u64) {
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let mut acc = 0u64;
    for i in 0..n {
        acc = acc.wrapping_add(f(i));
    }
    let d = t0.elapsed();
    black_box(acc);
    (d, ALLOCS.load(Ordering::Relaxed) - a0)
}

fn report(what: &str, n: u64, (d, allocs): (Duration, u64), bare: Duration) -> f64 {
    let ns = (d.as_nanos() as f64 - bare.as_nanos() as f64) / n as f64;
    println!(
        "  {what}: {ns:.2} ns per op (loop alone {:.2} ns), {allocs} allocations in {n}",
        bare.as_nanos() as f64 / n as f64
    );
    ns
}

fn main() {
    let sets = [
        LabelSet::new([("tenant", "acme"), ("route", "/orders")]),
        LabelSet::new([("tenant", "globex"), ("route", "/users")]),
    ];
    let pick = |i: u64| sets[(i & 1) as usize];
    let n = 20_000_000u64;
    println!("labels (best of 3 runs each):");
    let best = |f: &mut dyn FnMut() -> (Duration, u64)| (0..3).map(|_| f()).min().unwrap();
    let (bare, _) = best(&mut || run(n, |i| black_box(pick(black_box(i))).index() as u64));
    let with = best(&mut || run(n, |i| labels::with(black_box(pick(i)), || black_box(i))));
    let with_ns = report("labels::with enter+exit, prebuilt set", n, with, bare);
    let enter = best(&mut || {
        run(n, |i| {
            let _g = black_box(pick(i)).enter();
            black_box(i)
        })
    });
    report("LabelSet::enter + guard drop", n, enter, bare);

    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let poll_bare = best(&mut || {
        run(n, |i| {
            let f = pin!(std::future::ready(black_box(i)));
            match f.poll(&mut cx) {
                Poll::Ready(v) => v,
                Poll::Pending => 0,
            }
        })
    });
    let mut cx = Context::from_waker(waker);
    let poll_labelled = best(&mut || {
        run(n, |i| {
            let f = pin!(std::future::ready(black_box(i)).with_labels(pick(i)));
            match f.poll(&mut cx) {
                Poll::Ready(v) => v,
                Poll::Pending => 0,
            }
        })
    });
    report(
        "Labelled poll, over a bare poll",
        n,
        poll_labelled,
        poll_bare.0,
    );

    let m = 2_000_000u64;
    let (bare_m, _) = best(&mut || run(m, black_box));
    let build = best(&mut || {
        run(m, |i| {
            let v = if i & 1 == 0 { "/orders" } else { "/users" };
            let t = if i & 1 == 0 { "acme" } else { "globex" };
            LabelSet::new([("tenant", black_box(t)), ("route", black_box(v))]).index() as u64
        })
    });
    report(
        "LabelSet::new of a set already held (2 pairs)",
        m,
        build,
        bare_m,
    );
    if with.1 != 0 || enter.1 != 0 || poll_labelled.1 != 0 {
        eprintln!("labels: FAIL entering a prebuilt set allocated");
        std::process::exit(1);
    }
    if with_ns > 10.0 {
        eprintln!("labels: FAIL labels::with took {with_ns:.2} ns (target 10 ns)");
        std::process::exit(1);
    }
}
