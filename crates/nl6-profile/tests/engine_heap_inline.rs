//! Heap and allocs sites of a program built with debug info: the allocator's frames are trimmed also
//! where they are inlined into the caller's function, so the leaf is the allocation site itself and no
//! frame of the sampler or the allocation path remains (checked with the decoded profile and with
//! `go tool pprof -top`/`-traces`).
//!
//! The inlining that matters happens only in an optimised build that keeps DWARF; the workspace's
//! `debuginfo` profile is the release profile with full debug info:
//!   cargo test --profile debuginfo -p nl6-profile --test engine_heap_inline
//! The test also runs (and must pass) in the plain debug and release builds.
//!
//! Its own test binary: it changes the process-wide rate.
#[path = "support/go_pprof.rs"]
mod go_pprof_support;
mod support;

use nl6_profile::encode::{self, HeapView};
use nl6_profile::heap::{self, SamplingAllocator};
use std::alloc::Layout;
use support::proto;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

/// Blocks this test allocates from each probe.
const BLOCKS: usize = 64;
const BLOCK: usize = 4096;

/// The allocation site the profile must name as the leaf: a direct call of the global allocator.
#[inline(never)]
fn direct_allocation_site(out: &mut [usize; BLOCKS]) {
    for slot in out.iter_mut() {
        // SAFETY: a valid non-zero layout; the block is freed by `free_direct`.
        let p = unsafe { std::alloc::alloc(Layout::from_size_align(BLOCK, 8).unwrap()) };
        assert!(!p.is_null());
        *slot = std::hint::black_box(p) as usize;
    }
}

/// A site that allocates through a `Vec` (the standard library's allocation path inlined into it: a
/// build without DWARF names this function as the leaf, and so must one with it).
#[inline(never)]
fn vec_allocation_site(out: &mut Vec<Vec<u8>>) {
    for _ in 0..BLOCKS {
        out.push(std::hint::black_box(Vec::with_capacity(BLOCK + 1)));
    }
}

fn free_direct(blocks: &[usize]) {
    for &p in blocks {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { std::alloc::dealloc(p as *mut u8, Layout::from_size_align(BLOCK, 8).unwrap()) };
    }
}

/// Whether a function name belongs to the sampler or the allocation path.
fn allocator_name(name: &str) -> bool {
    // The allocation path as Rust's std and the sampler name it (`Vec::with_capacity` is the caller's).
    const ALLOCATION_PATH: [&str; 10] = [
        "__rustc::",
        "__rust_",
        "__rg_",
        "__rdl_",
        "alloc::alloc::",
        "<alloc::alloc::Global",
        "alloc::raw_vec::",
        "<alloc::raw_vec::",
        "nl6_profile::heap::",
        "<nl6_profile::heap::",
    ];
    ALLOCATION_PATH.iter().any(|p| name.starts_with(p))
        || name.contains("SamplingAllocator")
        || name.contains("heap::")
}

#[test]
fn inlined_allocator_frames_are_trimmed_from_heap_and_allocs_sites() {
    heap::set_rate(1);
    let mut direct = [0; BLOCKS];
    let mut vecs = Vec::with_capacity(BLOCKS);
    direct_allocation_site(&mut direct);
    vec_allocation_site(&mut vecs);
    let snap = heap::snapshot();
    heap::set_rate(heap::DEFAULT_RATE);

    let work = std::env::temp_dir().join(format!("nl6-heap-inline-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    for view in [HeapView::Heap, HeapView::Allocs] {
        let bytes = encode::heap(&snap, view);
        let p = proto::decode(&bytes).expect("the heap profile decodes");
        let stacks: Vec<(Vec<String>, i64)> = support::sample_names(&p)
            .into_iter()
            .map(|(names, values)| (names, values[1]))
            .collect();
        for probe in ["direct_allocation_site", "vec_allocation_site"] {
            let mine: Vec<&(Vec<String>, i64)> = stacks
                .iter()
                .filter(|(names, _)| names.iter().any(|n| n.ends_with(probe)))
                .collect();
            let bytes: i64 = mine.iter().map(|(_, b)| b).sum();
            assert!(
                bytes >= (BLOCKS * BLOCK) as i64 / 2,
                "{view:?}: {probe}'s samples hold {bytes} bytes: {stacks:#?}"
            );
            for (names, _) in &mine {
                let at = names.iter().position(|n| n.ends_with(probe)).unwrap();
                assert!(
                    !names[..at].iter().any(|n| allocator_name(n)),
                    "{view:?}: an allocator frame above {probe}: {names:#?}"
                );
                // Unoptimised, `Vec::with_capacity` is a function of its own (not inlined): it is the
                // leaf with DWARF as without.
                if probe == "direct_allocation_site" || !cfg!(debug_assertions) {
                    assert_eq!(at, 0, "{view:?}: {probe} is not the leaf: {names:#?}");
                }
            }
        }
        // pprof reads the same: the direct site holds its bytes flat, and no allocator frame is in the top.
        let path = work.join(format!("{view:?}.pb.gz"));
        std::fs::write(&path, &bytes).unwrap();
        let top = go_pprof_support::go_pprof_ok(
            &[
                "-top",
                "-nodecount=200",
                "-sample_index=alloc_space",
                path.to_str().unwrap(),
            ],
            &work,
        );
        let row = top
            .lines()
            .find(|l| l.ends_with("direct_allocation_site"))
            .unwrap_or_else(|| panic!("{view:?}: no row for the direct site:\n{top}"));
        let flat: f64 = row
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches(char::is_alphabetic)
            .parse()
            .unwrap_or(0.0);
        assert!(
            flat > 0.0,
            "{view:?}: the direct site has no flat bytes:\n{top}"
        );
        assert!(
            !top.contains("SamplingAllocator"),
            "{view:?}: the sampler is in pprof's top:\n{top}"
        );
        let traces = go_pprof_support::go_pprof_ok(&["-traces", path.to_str().unwrap()], &work);
        assert!(
            !traces.contains("SamplingAllocator") && !traces.contains("__rust_alloc"),
            "{view:?}: an allocator frame in pprof's traces:\n{traces}"
        );
    }
    // The legacy text profile (`heap?debug=1`) trims the same frames.
    let text = encode::heap_text(&snap);
    assert!(
        !text.contains("SamplingAllocator"),
        "the sampler in heap?debug=1:\n{text}"
    );
    free_direct(&direct);
    drop(vecs);
    let _ = std::fs::remove_dir_all(&work);
}
