//! A label scope around pure computation is really in force while it runs: `labels::with` around an
//! arithmetic closure that never touches the label, inside an `#[inline(never)]` function, read back from
//! CPU samples whose leaf is that function.
//!
//! What it guards: the label lives in a thread-local that only the signal handler reads, so at -O the
//! compiler may delete the scope's two stores (nothing it can see reads the value in between). The
//! stores are fenced against that (`labels::store_label`). The deletion only happens in optimised
//! code: `scripts/test.sh` also runs this test with `--release`, where it fails without the fences.
use nl6_profile::labels::{self, LabelSet};
use nl6_profile::symbols::symbolize;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

/// A label scope around pure arithmetic, inlined into this function: between the scope's two stores
/// the compiler sees no memory access at all.
#[inline(never)]
fn scoped_spin(label: LabelSet, x: u64, rounds: u64) -> u64 {
    labels::with(label, || {
        let mut x = x;
        for _ in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x
    })
}

#[test]
fn a_scope_around_a_pure_closure_labels_its_samples() {
    let label = label("pure-scope-test");
    let session = nl6_profile::cpu::start(250).expect("CPU profiler");
    let worker = nl6_profile::threads::spawn_recorded("pure-scope", move || {
        let end = Instant::now() + Duration::from_millis(3000);
        let mut x = 1u64;
        while Instant::now() < end {
            x = scoped_spin(label, x, black_box(2_000_000));
        }
        black_box(x)
    })
    .unwrap();
    worker.join().unwrap();
    let profile = session.stop();
    let (mut inside, mut labelled) = (0u64, 0u64);
    for s in &profile.samples {
        let in_spin = s
            .stack
            .first()
            .and_then(|a| symbolize(*a))
            .is_some_and(|n| n.contains("scoped_spin"));
        if in_spin {
            inside += s.count;
            labelled += u64::from(s.label == label.index()) * s.count;
        }
    }
    let total: u64 = profile.samples.iter().map(|s| s.count).sum();
    eprintln!("FIGURE pure scope: {labelled} of {inside} samples in scoped_spin carry the scope's label ({total} in all)");
    assert!(inside >= 20, "scoped_spin was sampled ({inside} samples)");
    assert!(
        labelled * 100 >= inside * 95,
        "only {labelled} of {inside} samples inside the scope carry its label"
    );
}
