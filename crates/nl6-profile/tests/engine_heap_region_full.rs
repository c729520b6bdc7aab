//! The heap sampler when its region cannot hold a block (used up, or an alignment past its own): the
//! allocation is left unsampled and counted (`lost_counts`), not crashed on, and blocks placed before stay
//! exact: their frees are all seen.
//!
//! Its own test binary: it installs the sampling allocator, samples every allocation (rate 1) and uses
//! up its region.

use nl6_profile::heap::{self, SamplingAllocator};
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

/// A block size whose class (header included) is 512 MiB.
const BIG: usize = (512 << 20) - 64;

#[test]
fn a_full_region_leaves_allocations_unsampled_and_counted() {
    heap::set_rate(1);
    drop(std::hint::black_box(vec![0u8; 64]));
    let range = heap::sampled_region().expect("a range of some size");
    let big = Layout::from_size_align(BIG, 8).unwrap();
    let (unplaced_before, _) = heap::lost_counts();

    // An alignment past the region's own (1 GiB): not placed, counted.
    let huge_align = Layout::from_size_align(64, 2 << 30).unwrap();
    // SAFETY: a nonzero layout; freed with the same layout if the inner allocator gave one.
    unsafe {
        let p = ALLOC.alloc(huge_align);
        assert!(!heap::sampled_region().is_some_and(|r| r.contains(&(p as usize))));
        if !p.is_null() {
            ALLOC.dealloc(p, huge_align);
        }
    }
    assert_eq!(heap::lost_counts().0, unplaced_before + 1);

    // A block larger than any range (1 TiB): not placed, counted; whatever the inner allocator says.
    let huge = Layout::from_size_align(1 << 40, 8).unwrap();
    // SAFETY: as above.
    unsafe {
        let p = ALLOC.alloc(huge);
        assert!(!heap::sampled_region().is_some_and(|r| r.contains(&(p as usize))));
        if !p.is_null() {
            ALLOC.dealloc(p, huge);
        }
    }
    assert_eq!(heap::lost_counts().0, unplaced_before + 2);

    // Use the range up with 512 MiB blocks (address space only: each touches its header's page).
    let mut placed = Vec::new();
    let mut outside = None;
    for _ in 0..range.len() / (512 << 20) + 1 {
        // SAFETY: a nonzero layout; every block is freed below with it.
        let p = unsafe { ALLOC.alloc(big) };
        if p.is_null() || !heap::sampled_region().is_some_and(|r| r.contains(&(p as usize))) {
            outside = Some(p);
            break;
        }
        // SAFETY: the block is BIG bytes long.
        unsafe { (p.write(1), p.add(BIG - 1).write(2)) };
        placed.push(p);
    }
    assert!(
        outside.is_some(),
        "{} blocks of 512 MiB filled {} bytes",
        placed.len(),
        range.len()
    );
    let (unplaced, _) = heap::lost_counts();
    assert!(
        unplaced > unplaced_before + 2,
        "the block that did not fit was counted"
    );
    let sizes = |s: usize| {
        heap::snapshot()
            .records
            .iter()
            .filter(|r| r.size == s as u64)
            .fold((0, 0), |(a, f), r| {
                (a + r.alloc_objects, f + r.free_objects)
            })
    };
    assert_eq!(
        sizes(BIG),
        (placed.len() as u64, 0),
        "only placed blocks are recorded"
    );

    // Small allocations still work while the region is full (from its free lists, or unsampled).
    let small: Vec<Vec<u8>> = (0..100).map(|i| vec![i as u8; 100]).collect();
    assert!(small
        .iter()
        .enumerate()
        .all(|(i, v)| v.iter().all(|&b| b == i as u8)));
    drop(small);

    // SAFETY: each block came from ALLOC with `big`, once.
    unsafe {
        if let Some(p) = outside.filter(|p| !p.is_null()) {
            ALLOC.dealloc(p, big);
        }
        for &p in &placed {
            assert_eq!((p.read(), p.add(BIG - 1).read()), (1, 2));
            ALLOC.dealloc(p, big);
        }
    }
    heap::set_rate(heap::DEFAULT_RATE);
    assert_eq!(
        sizes(BIG),
        (placed.len() as u64, placed.len() as u64),
        "every free seen"
    );
}
