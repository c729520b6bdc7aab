//! Where the heap sampler keeps a sampled block, and that every way of freeing or moving one is seen: every
//! sampled block, a few bytes or several MiB, at any alignment up to 1 GiB, lives in the region (so an
//! ordinary free is told apart by a range test); realloc moves blocks into and out of it with their
//! contents; alloc_zeroed zeroes a reused block, large ones included; and the site counters match what the
//! code really allocated and freed, on any thread.
//!
//! Its own test binary: it installs the sampling allocator and samples every allocation (rate 1).

use nl6_profile::heap::{self, SamplingAllocator};
use nl6_profile::symbols::symbolize;
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn in_region<T>(v: &[T]) -> bool {
    heap::sampled_region().is_some_and(|r| r.contains(&(v.as_ptr() as usize)))
}

/// Allocates `n` blocks of `size` bytes from one call site and keeps every other one.
#[inline(never)]
fn keep_every_other(n: usize, size: usize) -> Vec<Vec<u8>> {
    let mut kept = Vec::with_capacity(n / 2);
    for i in 0..n {
        let block = std::hint::black_box(vec![i as u8; size]);
        if i % 2 == 0 {
            kept.push(block);
        }
    }
    kept
}

/// (alloc_objects, free_objects) of the sites whose stack passes through `function`, of `size` bytes.
fn counts_in(function: &str, size: usize) -> (u64, u64) {
    heap::snapshot()
        .records
        .iter()
        .filter(|r| r.size == size as u64)
        .filter(|r| {
            r.stack
                .iter()
                .any(|&a| symbolize(a - 1).is_some_and(|n| n.ends_with(function)))
        })
        .fold((0, 0), |(a, f), r| {
            (a + r.alloc_objects, f + r.free_objects)
        })
}

#[test]
fn sampled_blocks_are_placed_moved_zeroed_and_counted() {
    heap::set_rate(1);
    let (unplaced_before, dropped_before) = heap::lost_counts();

    // Small and large alike: in the region.
    let small = std::hint::black_box(vec![7u8; 100]);
    assert!(
        heap::sampled_region().is_some(),
        "no range could be reserved"
    );
    assert!(
        in_region(&small),
        "a sampled 100-byte block is a region block"
    );
    let large = std::hint::black_box(vec![1u8; 3 << 20]);
    assert!(in_region(&large), "a sampled 3 MiB block is a region block");
    assert!(large.iter().all(|&b| b == 1));

    // realloc within the region, small to large and back, keeps the contents.
    let mut grown = small.clone();
    grown.reserve_exact(5 << 20);
    assert!(in_region(&grown));
    assert!(grown.iter().all(|&b| b == 7) && grown.len() == 100);
    let mut shrunk = large.clone();
    shrunk.truncate(50);
    shrunk.shrink_to_fit();
    assert!(in_region(&shrunk));
    assert!(shrunk.iter().all(|&b| b == 1) && shrunk.len() == 50);
    drop((large, grown, shrunk));

    // A freed block is reused for the next block of its class; alloc_zeroed must clear it, also a large
    // one whose pages were given back.
    for size in [1000, 2 << 20] {
        for _ in 0..20 {
            drop(std::hint::black_box(vec![0xffu8; size]));
            let zeroed = std::hint::black_box(vec![0u8; size]);
            assert!(in_region(&zeroed));
            assert!(
                zeroed.iter().all(|&b| b == 0),
                "alloc_zeroed handed out a dirty block of {size}"
            );
        }
    }

    // Alignment up to a page and beyond is kept.
    for align in [8, 4096, 1 << 16, 2 << 20] {
        let layout = Layout::from_size_align(300, align).unwrap();
        // SAFETY: a nonzero layout; the block is written within its size and freed with the same layout.
        unsafe {
            let p = ALLOC.alloc(layout);
            assert!(
                !p.is_null() && heap::sampled_region().is_some_and(|r| r.contains(&(p as usize)))
            );
            assert_eq!(p as usize % align, 0, "alignment {align}");
            std::ptr::write_bytes(p, 0x11, 300);
            ALLOC.dealloc(p, layout);
        }
    }

    // Counters: blocks allocated at one site, half freed inside it, the rest freed here.
    for size in [200, 1 << 20] {
        let kept = keep_every_other(40, size);
        let (allocs, frees) = counts_in("engine_heap_region::keep_every_other", size);
        assert_eq!(
            (allocs, frees),
            (40, 20),
            "{size}-byte blocks: 40 allocated, 20 dropped inside"
        );
        assert!(kept.iter().all(|v| in_region(v)));
        drop(kept);
        let (allocs, frees) = counts_in("engine_heap_region::keep_every_other", size);
        assert_eq!(
            (allocs, frees),
            (40, 40),
            "every free of {size}-byte blocks seen"
        );
    }

    // A block freed on another thread is seen too.
    let (_, frees_before) = counts_in("engine_heap_region::keep_every_other", 200);
    let moved = keep_every_other(2, 200);
    std::thread::spawn(move || drop(moved)).join().unwrap();
    assert_eq!(
        counts_in("engine_heap_region::keep_every_other", 200).1,
        frees_before + 2
    );

    let lost = heap::lost_counts();
    heap::set_rate(heap::DEFAULT_RATE);
    assert_eq!(
        lost,
        (unplaced_before, dropped_before),
        "no sampled allocation was left out"
    );
}
