//! The sampled allocation sites, and where each sampled block is watched until its free.
//!
//! What it provides: the site table (one [`HeapRecord`] per (stack, size), as Go's buckets) and the two
//! ways a sampled block is found again at its free. A sampled block smaller than [`LARGE`] is placed in the
//! [`region`](super::region) with its site number in its footer; a larger one stays where the inner
//! allocator put it and is entered in [`LIVE`]. Everything here runs on sampled events only (one allocation
//! in hundreds at the default rate, and the frees of those blocks), under one mutex.
//!
//! What it never does: run on the path of an unsampled allocation or free, or sample its own allocations
//! (callers set the thread's `BUSY` flag first, so what the table allocates goes straight to the inner
//! allocator and never into the region).
use super::region::{self, Region};
use super::{HeapRecord, LiveTable, LARGE, MAX_SITES};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Sampled allocations recorded but not tracked for their free (live table full, region unavailable or
/// used up) or dropped (site table full). Exposed through `lost_counts` for honesty about accuracy.
pub(super) static UNTRACKED: AtomicU64 = AtomicU64::new(0);
pub(super) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A mixed hash of one (stack, size) site, word at a time.
fn site_hash(stack: &[u64], size: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = size.wrapping_mul(K) ^ stack.len() as u64;
    for &w in stack {
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    h ^= h >> 32;
    h.wrapping_mul(K)
}

/// The site index's smallest size (slots); it doubles to stay at most half full.
const MIN_INDEX_SLOTS: usize = 1024;
/// Low bits of an index slot: site number + 1 (0 = empty slot). The high bits hold the site hash's.
const SITE_BITS: u64 = 0xffff;

struct Sites {
    /// Open addressing (linear probing) over `site_hash`: each slot packs the hash's high 48 bits and the
    /// site number + 1. One flat array, so a lookup touches one line of it before the record itself (a
    /// general-purpose map touched two: control bytes, then the bucket); sampled allocations land on
    /// cold caches, so the lines touched are the cost.
    index: Vec<u64>,
    records: Vec<HeapRecord>,
    /// Where sampled small blocks live (its bookkeeping shares this mutex).
    region: Region,
}

static SITES: Mutex<Sites> = Mutex::new(Sites {
    index: Vec::new(),
    records: Vec::new(),
    region: Region::new(),
});

/// The sampled large blocks awaiting their free (small ones are found through the region instead).
pub(super) static LIVE: LiveTable<{ 1 << 16 }> = LiveTable::new();

impl Sites {
    /// The site of (stack, size), created on first use; `None` when the table is full.
    fn site(&mut self, stack: &[u64], size: u64) -> Option<u16> {
        let h = site_hash(stack, size);
        if self.index.is_empty() {
            self.index = vec![0; MIN_INDEX_SLOTS];
        }
        let mask = self.index.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = self.index[i];
            if slot == 0 {
                break;
            }
            if slot & !SITE_BITS == h & !SITE_BITS {
                let site = (slot & SITE_BITS) as usize - 1;
                let r = &self.records[site];
                if r.size == size && r.stack == stack {
                    return Some(site as u16);
                }
            }
            i = (i + 1) & mask;
        }
        if self.records.len() >= MAX_SITES {
            return None;
        }
        let new = self.records.len();
        self.records.push(HeapRecord {
            stack: stack.to_vec(),
            size,
            alloc_objects: 0,
            alloc_bytes: 0,
            free_objects: 0,
            free_bytes: 0,
        });
        self.index[i] = (h & !SITE_BITS) | (new as u64 + 1);
        if self.records.len() * 2 > self.index.len() {
            self.grow();
        }
        Some(new as u16)
    }

    /// Doubles the index and re-places every site (rare: log2(MAX_SITES) times at most).
    fn grow(&mut self) {
        let mut index = vec![0u64; self.index.len() * 2];
        let mask = index.len() - 1;
        for (site, r) in self.records.iter().enumerate() {
            let h = site_hash(&r.stack, r.size);
            let mut i = h as usize & mask;
            while index[i] != 0 {
                i = (i + 1) & mask;
            }
            index[i] = (h & !SITE_BITS) | (site as u64 + 1);
        }
        self.index = index;
    }
}

fn lock() -> MutexGuard<'static, Sites> {
    SITES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy of every site's record. The caller has set `BUSY`.
pub(super) fn records() -> Vec<HeapRecord> {
    lock().records.clone()
}

/// Where a sampled small block was put.
pub(super) enum Placed {
    /// In the region, recorded; its frees are matched through its footer.
    Region(*mut u8),
    /// To be taken from the inner allocator; once it is, [`record_untracked`] counts it under this site
    /// (`None`: the site table is full, the sample is dropped).
    Elsewhere(Option<u16>),
}

/// Records a sampled block of `size` bytes at `align` (`(size | align) < LARGE`) allocated from `stack`,
/// and gives it a place in the region.
pub(super) fn record_small(stack: &[u64], size: usize, align: usize) -> Placed {
    debug_assert!(size | align < LARGE);
    let mut sites = lock();
    let Some(site) = sites.site(stack, size as u64) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return Placed::Elsewhere(None);
    };
    let Some(block) = sites.region.alloc(region::class_log2(size, align), site) else {
        return Placed::Elsewhere(Some(site));
    };
    count_alloc(&mut sites.records[site as usize]);
    Placed::Region(block)
}

/// Counts a sampled block that the inner allocator holds and nothing watches: its free will not be seen.
pub(super) fn record_untracked(site: u16) {
    let mut sites = lock();
    count_alloc(&mut sites.records[site as usize]);
    UNTRACKED.fetch_add(1, Ordering::Relaxed);
}

/// Records a sampled large block the inner allocator returned at `ptr`, and watches it in [`LIVE`].
pub(super) fn record_large(ptr: usize, size: usize, stack: &[u64]) {
    let mut sites = lock();
    let Some(site) = sites.site(stack, size as u64) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    count_alloc(&mut sites.records[site as usize]);
    // Inserted under the site mutex: the live table's writers are serialised by it.
    if !LIVE.insert(ptr, site) {
        UNTRACKED.fetch_add(1, Ordering::Relaxed);
    }
}

fn count_alloc(r: &mut HeapRecord) {
    r.alloc_objects += 1;
    r.alloc_bytes += r.size;
}

fn count_free(r: &mut HeapRecord) {
    r.free_objects += 1;
    r.free_bytes += r.size;
}

/// Records the free of a large block [`LIVE`] holds. Runs on whatever thread frees; it does not allocate.
pub(super) fn record_large_free(ptr: usize) {
    let mut sites = lock();
    if let Some(site) = LIVE.remove(ptr) {
        if let Some(r) = sites.records.get_mut(site as usize) {
            count_free(r);
        }
    }
}

/// Records the free of a region block and returns it to the region. Runs on whatever thread frees; it
/// does not allocate.
///
/// # Safety
/// `ptr` is a live region block allocated with `size` and `align`; it is not used after this call.
pub(super) unsafe fn free_small(ptr: *mut u8, size: usize, align: usize) {
    // SAFETY: the caller's guarantee; the block is still ours to read.
    let site = unsafe { region::site_of(ptr as usize, size, align) };
    let mut sites = lock();
    if let Some(r) = sites.records.get_mut(site as usize) {
        count_free(r);
    }
    // SAFETY: the caller's guarantee, with the class the block was allocated at.
    unsafe { sites.region.free(ptr, region::class_log2(size, align)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_keyed_by_stack_and_size_even_on_hash_collisions() {
        let mut sites = Sites {
            index: Vec::new(),
            records: Vec::new(),
            region: Region::new(),
        };
        let a = sites.site(&[1, 2, 3], 64).unwrap();
        assert_eq!(sites.site(&[1, 2, 3], 64), Some(a));
        let b = sites.site(&[1, 2, 3], 128).unwrap();
        let c = sites.site(&[1, 2], 64).unwrap();
        assert!(a != b && b != c && a != c);
        // Force a collision: put an unrelated site under [9]'s full hash tag, where its probe starts.
        let h = site_hash(&[9], 8);
        let mask = sites.index.len() - 1;
        sites.index[h as usize & mask] = (h & !SITE_BITS) | (a as u64 + 1);
        let d = sites.site(&[9], 8).unwrap();
        assert_ne!(d, a, "a colliding hash must not alias a different stack");
        assert_eq!(sites.site(&[9], 8), Some(d));
        assert_eq!(sites.site(&[1, 2, 3], 64), Some(a));
        assert_eq!(sites.records[d as usize].stack, vec![9]);
    }

    #[test]
    fn site_index_grows_and_keeps_every_site() {
        let mut sites = Sites {
            index: Vec::new(),
            records: Vec::new(),
            region: Region::new(),
        };
        let n = 5 * MIN_INDEX_SLOTS as u64;
        let ids: Vec<u16> = (0..n)
            .map(|i| sites.site(&[i, 7], i % 13).unwrap())
            .collect();
        assert!(sites.index.len() >= 2 * n as usize);
        for i in 0..n {
            assert_eq!(sites.site(&[i, 7], i % 13), Some(ids[i as usize]));
        }
        assert_eq!(sites.records.len(), n as usize);
    }
}
