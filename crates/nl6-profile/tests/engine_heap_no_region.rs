//! The heap sampler when its address range cannot be had (another mapping holds the whole window):
//! `reserve_region` says so (nl6 logs it at startup), sampled small blocks still come from the inner
//! allocator and are counted as allocated and untracked, a pointer in the window that is not the sampler's
//! goes back to the inner allocator, and large blocks are still matched exactly.
//!
//! Its own test binary: it installs the sampling allocator, occupies the window before the first sample,
//! and changes the process-wide rate.

use nl6_profile::heap::{self, region, SamplingAllocator, LARGE};
use std::sync::atomic::{AtomicU32, Ordering};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

/// Candidate ranges of the window this process mapped before `main` (one bit each).
static TAKEN: AtomicU32 = AtomicU32::new(0);

/// Maps every candidate range of the window, as some other part of a process might, before `main`: the
/// test harness allocates before a test runs, and one of those allocations may be sampled and reserve the
/// range. Runs from `.init_array`, before Rust's runtime allocates; it makes system calls only.
extern "C" fn occupy_window() {
    for i in 0..8 {
        let at = region::WINDOW + i * region::SIZE;
        // SAFETY: a new mapping that must not replace anything; nothing of ours is there.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                region::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_NORESERVE
                    | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p as usize == at {
            TAKEN.fetch_or(1 << i, Ordering::Relaxed);
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static OCCUPY_WINDOW: extern "C" fn() = occupy_window;

#[test]
fn without_its_range_the_sampler_counts_small_samples_as_untracked_and_frees_stay_safe() {
    assert_eq!(
        TAKEN.load(Ordering::Relaxed),
        0xff,
        "every candidate range of the window was free at startup and is now taken"
    );
    assert!(region::base().is_none());
    let taken: Vec<usize> = (0..8).map(|i| region::WINDOW + i * region::SIZE).collect();
    assert!(!heap::reserve_region(), "every candidate is taken");
    heap::set_rate(1);
    let (untracked_before, _) = heap::lost_counts();

    // Small samples: from the inner allocator, counted, untracked.
    let small: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; 100]).collect();
    assert!(small.iter().all(|v| !region::owns(v.as_ptr() as usize)));
    let (untracked, _) = heap::lost_counts();
    assert!(
        untracked >= untracked_before + 50,
        "{untracked} untracked after 50 small samples (was {untracked_before})"
    );
    drop(small);

    // The window's other mappings are not the sampler's: a free there would go to the inner allocator.
    assert!(taken
        .iter()
        .all(|&at| region::contains(at) && !region::owns(at)));

    // Large samples are still watched: the free of this one is seen, exactly once.
    let frees_of = |size: usize| {
        heap::snapshot()
            .records
            .iter()
            .filter(|r| r.size == size as u64)
            .map(|r| (r.alloc_objects, r.free_objects))
            .fold((0, 0), |(a, f), (x, y)| (a + x, f + y))
    };
    let size = LARGE * 2 + 24;
    let (allocs_before, frees_before) = frees_of(size);
    drop(std::hint::black_box(vec![7u8; size]));
    let (allocs_after, frees_after) = frees_of(size);
    heap::set_rate(heap::DEFAULT_RATE);
    assert_eq!(
        (allocs_after - allocs_before, frees_after - frees_before),
        (1, 1),
        "the large block's allocation and free were both counted"
    );
}
