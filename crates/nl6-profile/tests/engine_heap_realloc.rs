//! A sampled block that grows stays in the sampler's region and is grown in place when its block has room,
//! or has its pages moved, never leaving the region (which would copy it): a `Vec` doubling from 1 MiB to
//! 64 MiB keeps its contents and its counters balance; a growth that fits is the same pointer; a growth the
//! countdown does not sample stays in the region, uncounted, and its free is still seen.
//!
//! Its own test binary (one test: the phases change the process-wide rate).

use nl6_profile::heap::{self, SamplingAllocator};
use std::hint::black_box;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn in_region<T>(v: &[T]) -> bool {
    heap::sampled_region().is_some_and(|r| r.contains(&(v.as_ptr() as usize)))
}

/// Bytes still in use at sites of `size` bytes (unscaled), over every site.
fn inuse_of_size(size: usize) -> i64 {
    heap::snapshot()
        .records
        .iter()
        .filter(|r| r.size == size as u64)
        .map(|r| r.alloc_bytes as i64 - r.free_bytes as i64)
        .sum()
}

#[test]
fn a_growing_sampled_block_stays_in_the_region_in_place_or_moved() {
    heap::set_rate(1);
    let (unplaced_before, _) = heap::lost_counts();

    // Doubling: every step sampled (rate 1), every step in the region, contents kept.
    let mut v: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut filled = 0usize;
    while v.capacity() < 64 << 20 {
        while v.len() < v.capacity() {
            v.push((filled % 251) as u8);
            filled += 1;
        }
        v.reserve(1);
        assert!(
            in_region(&v),
            "a sampled {}-byte Vec left the region",
            v.capacity()
        );
    }
    assert!(
        v.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
        "contents kept across growths"
    );
    let cap = v.capacity();
    assert_eq!(
        inuse_of_size(cap),
        cap as i64,
        "the live block is counted once at its size"
    );
    drop(black_box(v));
    assert_eq!(inuse_of_size(cap), 0, "its free is seen");

    // A growth that fits the block's class is in place: 3 MiB lives in a 4 MiB block.
    let mut big: Vec<u8> = Vec::with_capacity(3 << 20);
    big.resize(3 << 20, 9);
    let at = big.as_ptr();
    big.reserve_exact((3 << 20) + (512 << 10) - big.len());
    assert_eq!(big.as_ptr(), at, "grown in place");
    assert!(big.iter().all(|&b| b == 9));
    let small_at = {
        let mut s: Vec<u8> = Vec::with_capacity(90);
        s.extend_from_slice(&[3; 90]);
        let at = s.as_ptr();
        s.reserve_exact(100 - 90);
        assert!(s.iter().all(|&b| b == 3));
        (at, s.as_ptr())
    };
    assert_eq!(
        small_at.0, small_at.1,
        "a 90-byte block grown to 100 stays in its 128-byte block"
    );
    drop(big);

    // The countdown does not sample the growth: the block stays in the region, counted nowhere, and its
    // free is still recognised.
    let mut kept: Vec<u8> = Vec::with_capacity(2 << 20);
    kept.resize(2 << 20, 5);
    assert!(in_region(&kept));
    heap::set_rate(1 << 40);
    kept.reserve_exact(16 << 20);
    assert!(
        in_region(&kept),
        "an unsampled growth of a sampled block stays in the region"
    );
    assert!(kept.iter().all(|&b| b == 5));
    assert_eq!(inuse_of_size(2 << 20), 0, "the old block's free is counted");
    assert_eq!(
        inuse_of_size(kept.capacity()),
        0,
        "the unsampled growth is not counted"
    );
    drop(kept);

    heap::set_rate(heap::DEFAULT_RATE);
    assert_eq!(
        heap::lost_counts().0,
        unplaced_before,
        "every sampled growth was placed"
    );
}
