//! Where the heap sampler keeps a sampled block, and that every way of freeing or moving one is seen:
//! sampled small blocks live in the region (so an ordinary free is told apart by a constant range test),
//! sampled large ones stay with the inner allocator and are watched by the live table; realloc moves blocks
//! between the two with their contents; alloc_zeroed zeroes a reused region block; and the site counters
//! match what the code really allocated and freed.
//!
//! Its own test binary: it installs the sampling allocator and samples every allocation (rate 1).

use nl6_profile::heap::{self, region, SamplingAllocator, LARGE};
use nl6_profile::symbols::Symbolizer;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn in_region<T>(v: &[T]) -> bool {
    let p = v.as_ptr() as usize;
    region::contains(p) && region::owns(p)
}

/// Allocates `n` blocks of 200 bytes from one call site and keeps every other one.
#[inline(never)]
fn keep_every_other(n: usize) -> Vec<Vec<u8>> {
    let mut kept = Vec::with_capacity(n / 2);
    for i in 0..n {
        let block = std::hint::black_box(vec![i as u8; 200]);
        if i % 2 == 0 {
            kept.push(block);
        }
    }
    kept
}

/// (alloc_objects, free_objects) of the sites whose stack passes through `function`.
fn counts_in(function: &str) -> (u64, u64) {
    let sym = Symbolizer::global().expect("symbol table of the test binary");
    heap::snapshot()
        .records
        .iter()
        .filter(|r| {
            r.stack.iter().any(|&a| {
                sym.function_name(a - 1)
                    .is_some_and(|n| n.ends_with(function))
            })
        })
        .fold((0, 0), |(a, f), r| {
            (a + r.alloc_objects, f + r.free_objects)
        })
}

#[test]
fn sampled_blocks_are_placed_moved_zeroed_and_counted() {
    heap::set_rate(1);
    let (untracked_before, _) = heap::lost_counts();

    // Small: in the region (on Linux the fixed range is free in a test process).
    let small = std::hint::black_box(vec![7u8; 100]);
    assert!(
        region::base().is_some(),
        "no range of the window at {:#x} could be reserved",
        region::WINDOW
    );
    assert!(
        in_region(&small),
        "a sampled 100-byte block is a region block"
    );
    // Large: with the inner allocator.
    let large = std::hint::black_box(vec![1u8; LARGE]);
    assert!(!in_region(&large), "a sampled large block stays outside");

    // realloc from the region to the inner allocator and back keeps the contents.
    let mut grown = small.clone();
    assert!(in_region(&grown));
    grown.reserve_exact(2 * LARGE);
    assert!(!in_region(&grown));
    assert!(grown.iter().all(|&b| b == 7) && grown.len() == 100);
    let mut shrunk = large.clone();
    shrunk.truncate(50);
    shrunk.shrink_to_fit();
    assert!(
        in_region(&shrunk),
        "shrunk under LARGE: moved into the region"
    );
    assert!(shrunk.iter().all(|&b| b == 1) && shrunk.len() == 50);

    // A freed region block is reused for the next block of its class; alloc_zeroed must clear it.
    for _ in 0..100 {
        let dirty = std::hint::black_box(vec![0xffu8; 1000]);
        drop(dirty);
        let zeroed = std::hint::black_box(vec![0u8; 1000]);
        assert!(in_region(&zeroed));
        assert!(
            zeroed.iter().all(|&b| b == 0),
            "alloc_zeroed handed out a dirty block"
        );
    }

    // Counters: 400 blocks allocated at one site, 200 freed inside it, the other 200 freed here.
    let kept = keep_every_other(400);
    let (allocs, frees) = counts_in("engine_heap_region::keep_every_other");
    assert_eq!(allocs, 400 + 1, "400 blocks and the Vec that keeps them");
    assert_eq!(frees, 200, "the blocks dropped inside the function");
    assert!(kept.iter().all(|v| in_region(v)));
    drop(kept);
    let (allocs, frees) = counts_in("engine_heap_region::keep_every_other");
    assert_eq!(
        (allocs, frees),
        (401, 401),
        "every free seen, region and all"
    );

    // A block freed on another thread is seen too.
    let (_, frees_before) = counts_in("engine_heap_region::keep_every_other");
    let moved = keep_every_other(2);
    std::thread::spawn(move || drop(moved)).join().unwrap();
    assert_eq!(
        counts_in("engine_heap_region::keep_every_other").1,
        frees_before + 3
    );

    let (untracked_after, _) = heap::lost_counts();
    heap::set_rate(heap::DEFAULT_RATE);
    assert_eq!(
        untracked_after, untracked_before,
        "no sampled block went unwatched"
    );
}
