//! The sampled allocation sites: one [`HeapRecord`] per (stack, size), as Go's buckets, and the
//! [`Region`] that holds the sampled blocks, both behind one mutex.
//!
//! Everything here runs on sampled events only (one allocation in hundreds at the default rate, and the
//! frees of those blocks). It never runs on the path of an unsampled allocation or free, and never samples
//! its own allocations (callers set the thread's `BUSY` flag first, so what the table allocates goes
//! straight to the inner allocator).
use super::region::{self, Region};
use super::{HeapRecord, MAX_SITES};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Allocations that would have been sampled but were left unsampled: no room in the region (or no region),
/// or (`DROPPED`) no room in the site table. Exposed through `lost_counts` for honesty about accuracy.
pub(super) static UNPLACED: AtomicU64 = AtomicU64::new(0);
pub(super) static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A site's fingerprint: two independent mixes of (stack, size), word at a time. The table takes 112 bits
/// of it (all of the first word, the high 48 of the second) as the site's identity instead of comparing
/// stacks: a lookup then reads one line of the index and no record. (Sampled allocations land on cold
/// caches, so the lines a lookup touches are its cost; reading the record to compare it was half the
/// lookup's time in the glibc bench.) Two distinct sites share a fingerprint with probability about
/// n²/2^113: for the most sites the table holds (65535), about 4·10⁻²⁵.
fn fingerprint(stack: &[u64], size: u64) -> [u64; 2] {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let (mut a, mut b) = (size.wrapping_mul(K1) ^ stack.len() as u64, size ^ K2);
    for &w in stack {
        a = (a ^ w).wrapping_mul(K1).rotate_left(29);
        b = (b ^ w).wrapping_mul(K2).rotate_left(31);
    }
    [
        super::super::mix64(a),
        super::super::mix64(b ^ a.rotate_left(17)),
    ]
}

/// The site index's smallest size (slots); it doubles to stay at most half full.
const MIN_INDEX_SLOTS: usize = 1024;
/// Low bits of an index slot's second word: site number + 1 (0 = empty slot). Its high bits hold the
/// fingerprint's second word's.
const SITE_BITS: u64 = 0xffff;

/// One slot of the site index: the fingerprint, the site number, and the site's allocation count, so that
/// finding a site and counting a sample touch one cache line (a separate count array cost a second miss
/// per sample in the glibc bench).
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Slot {
    /// The fingerprint's first word.
    first: u64,
    /// The fingerprint's second word's high 48 bits, and the site number + 1 (0 = empty slot).
    second: u64,
    /// Sampled allocations counted at this site (`alloc_objects`).
    allocs: u64,
}

/// What a site stands for: read by snapshots only. Its stack is `Sites::frames[start..start + depth]`.
struct SiteKey {
    start: usize,
    depth: usize,
    size: u64,
}

struct Sites {
    /// Open addressing (linear probing) over the fingerprint. One flat array of 32-byte slots.
    index: Vec<Slot>,
    keys: Vec<SiteKey>,
    /// Every site's stack, end to end: one block that doubles, not a block per site. Sites live for the
    /// process, and thousands of small long-lived blocks strewn through the inner allocator's heap made
    /// its own allocations slower (cachegrind: +20 % L1 misses in glibc's `_int_malloc`).
    frames: Vec<u64>,
    /// Per site: `free_objects` (a free knows its site number, not its slot). Bytes are always objects ×
    /// the site's size.
    frees: Vec<u64>,
    /// Where sampled blocks live (its bookkeeping shares this mutex).
    region: Region,
}

static SITES: Mutex<Sites> = Mutex::new(Sites::new());

impl Sites {
    const fn new() -> Self {
        Sites {
            index: Vec::new(),
            keys: Vec::new(),
            frames: Vec::new(),
            frees: Vec::new(),
            region: Region::new(),
        }
    }

    /// The site of (stack, size) and its slot, created on first use; `None` when the table is full. The
    /// slot stays valid until the next call (which may grow the index).
    fn site(&mut self, stack: &[u64], size: u64) -> Option<(u16, usize)> {
        let f = fingerprint(stack, size);
        if self.index.is_empty() {
            self.index = vec![Slot::default(); MIN_INDEX_SLOTS];
        }
        let mask = self.index.len() - 1;
        let mut i = f[0] as usize & mask;
        loop {
            let slot = &self.index[i];
            if slot.second == 0 {
                break;
            }
            if slot.first == f[0] && slot.second & !SITE_BITS == f[1] & !SITE_BITS {
                return Some((((slot.second & SITE_BITS) - 1) as u16, i));
            }
            i = (i + 1) & mask;
        }
        if self.keys.len() >= MAX_SITES {
            return None;
        }
        let new = self.keys.len();
        self.keys.push(SiteKey {
            start: self.frames.len(),
            depth: stack.len(),
            size,
        });
        self.frames.extend_from_slice(stack);
        self.frees.push(0);
        self.index[i] = Slot {
            first: f[0],
            second: (f[1] & !SITE_BITS) | (new as u64 + 1),
            allocs: 0,
        };
        if self.keys.len() * 2 > self.index.len() {
            i = self.grow(new);
        }
        Some((new as u16, i))
    }

    /// Doubles the index and re-places every slot (rare: log2(MAX_SITES) times at most); returns where
    /// `site`'s slot went.
    fn grow(&mut self, site: usize) -> usize {
        let mut index = vec![Slot::default(); self.index.len() * 2];
        let mask = index.len() - 1;
        let mut moved = 0;
        for slot in self.index.iter().filter(|s| s.second != 0) {
            let mut i = slot.first as usize & mask;
            while index[i].second != 0 {
                i = (i + 1) & mask;
            }
            index[i] = *slot;
            if (slot.second & SITE_BITS) as usize == site + 1 {
                moved = i;
            }
        }
        self.index = index;
        moved
    }

    /// Counts the free of one sampled block of `site`.
    fn count_free(&mut self, site: u16) {
        if let Some(n) = self.frees.get_mut(site as usize) {
            *n += 1;
        }
    }
}

fn lock() -> MutexGuard<'static, Sites> {
    SITES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every site's record. The caller has set `BUSY`.
pub(super) fn records() -> Vec<HeapRecord> {
    let sites = lock();
    let mut allocs = vec![0; sites.keys.len()];
    for slot in sites.index.iter().filter(|s| s.second != 0) {
        allocs[(slot.second & SITE_BITS) as usize - 1] = slot.allocs;
    }
    sites
        .keys
        .iter()
        .zip(allocs)
        .zip(&sites.frees)
        .map(|((k, allocs), &frees)| HeapRecord {
            stack: sites.frames[k.start..k.start + k.depth].to_vec(),
            size: k.size,
            alloc_objects: allocs,
            alloc_bytes: allocs * k.size,
            free_objects: frees,
            free_bytes: frees * k.size,
        })
        .collect()
}

/// Reserves the region now if no sample has yet (see `heap::reserve_region`).
pub(super) fn reserve_region() {
    lock().region.reserve();
}

/// Places a sampled block of `size` bytes at `align` (zero if `zeroed`) in the region and counts it at
/// the site of (`stack`, `size`): the caller's pointer. `None` leaves the allocation unsampled (counted in
/// [`UNPLACED`] or [`DROPPED`]); the caller then takes it from the inner allocator.
pub(super) fn place(stack: &[u64], size: usize, align: usize, zeroed: bool) -> Option<*mut u8> {
    let mut sites = lock();
    let Some(ptr) = sites.region.alloc(size, align, zeroed) else {
        UNPLACED.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let Some((site, slot)) = sites.site(stack, size as u64) else {
        // SAFETY: the block was just handed out at `align` and is not used again.
        unsafe { sites.region.free(ptr, align) };
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    // SAFETY: a live block of the region, allocated at `align`.
    unsafe { region::set_site(ptr, align, site) };
    sites.index[slot].allocs += 1;
    Some(ptr)
}

/// Records the free of a sampled block and returns it to the region. Runs on whatever thread frees; it
/// does not allocate.
///
/// # Safety
/// `ptr` is a live block [`place`] returned for `align`; it is not used after this call.
pub(super) unsafe fn free(ptr: *mut u8, align: usize) {
    let mut sites = lock();
    // SAFETY: the caller's guarantee.
    let site = unsafe { sites.region.free(ptr, align) };
    sites.count_free(site);
}

/// The site number of a region block no site counts: a sampled block's `realloc` the countdown did not
/// sample stays in the region (moving it out would copy it), uncounted; its free counts nothing. No real
/// site has it ([`MAX_SITES`] numbers are 0..65534).
pub(super) const UNRECORDED: u16 = u16::MAX;

/// A `realloc` of the sampled block at `ptr` (allocated at `align`) to `size` bytes, kept in the region:
/// the old block's free is counted, and the new one is counted at the site of (`stack`, `size`) when the
/// countdown sampled it (`stack` is `Some`), else left [`UNRECORDED`]. In place when the block has room,
/// else a new region block gets the contents (its pages moved, see `region::move_contents`) and the old
/// one is freed. `None` (no room in the region) changes nothing: the caller reallocates the old way.
///
/// # Safety
/// `ptr` is a live block [`place`] (or this function) returned for `align`, valid for `old_size` bytes;
/// on `Some` it is not used again unless it is the pointer returned.
pub(super) unsafe fn replace(
    ptr: *mut u8,
    align: usize,
    old_size: usize,
    size: usize,
    stack: Option<&[u64]>,
) -> Option<*mut u8> {
    let mut sites = lock();
    // SAFETY: the caller's guarantee: a live block of the region at `align`.
    let room = unsafe { region::room(ptr, align) };
    // In place unless it would leave most of the block unused (a shrink moves to a smaller class).
    let fits = size <= room && size >= room / 4;
    let to = if fits {
        ptr
    } else {
        let Some(to) = sites.region.alloc(size, align, false) else {
            UNPLACED.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        to
    };
    let site = match stack.map(|stack| sites.site(stack, size as u64)) {
        Some(Some((site, slot))) => {
            sites.index[slot].allocs += 1;
            site
        }
        Some(None) => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            UNRECORDED
        }
        None => UNRECORDED,
    };
    // SAFETY: `ptr` is live (the caller's guarantee) and `to` is live, ours, with room for `size` bytes;
    // the old block is given back only after its contents moved, and its site read from its own header.
    unsafe {
        if fits {
            sites.count_free(region::site_of(ptr, align));
        } else {
            region::move_contents(ptr, to, align, old_size.min(size));
            let old_site = sites.region.free(ptr, align);
            sites.count_free(old_site);
        }
        region::set_site(to, align, site);
    }
    Some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_keyed_by_stack_and_size_and_a_partial_match_is_not_a_match() {
        let mut sites = Sites::new();
        let mut site = |stack: &[u64], size| sites.site(stack, size).map(|(s, _)| s);
        let a = site(&[1, 2, 3], 64).unwrap();
        assert_eq!(site(&[1, 2, 3], 64), Some(a));
        let b = site(&[1, 2, 3], 128).unwrap();
        let c = site(&[1, 2], 64).unwrap();
        let d = site(&[3, 2, 1], 64).unwrap();
        assert_eq!([a, b, c, d], [0, 1, 2, 3], "four distinct sites");
        // Plant slots that match [9]'s fingerprint in one word only, where its probe starts: neither may
        // be taken for [9]'s site.
        let f = fingerprint(&[9], 8);
        let mask = sites.index.len() - 1;
        let home = f[0] as usize & mask;
        sites.index[home] = Slot {
            first: f[0],
            second: (!f[1] & !SITE_BITS) | (a as u64 + 1),
            allocs: 0,
        };
        sites.index[(home + 1) & mask] = Slot {
            first: !f[0],
            second: (f[1] & !SITE_BITS) | (b as u64 + 1),
            allocs: 0,
        };
        let mut site = |stack: &[u64], size| sites.site(stack, size).map(|(s, _)| s);
        let e = site(&[9], 8).unwrap();
        assert_eq!(e, 4, "a new site, not an alias of a or b");
        assert_eq!(site(&[9], 8), Some(e));
        assert_eq!(site(&[1, 2, 3], 64), Some(a));
        let k = &sites.keys[e as usize];
        assert_eq!(&sites.frames[k.start..k.start + k.depth], &[9]);
    }

    #[test]
    fn site_index_grows_and_keeps_every_site() {
        let mut sites = Sites::new();
        let n = 5 * MIN_INDEX_SLOTS as u64;
        // Count each site's allocation through the slot `site` returns, also when that call grew the
        // index: the counts must survive every growth.
        let ids: Vec<u16> = (0..n)
            .map(|i| {
                let (site, slot) = sites.site(&[i, 7], i % 13).unwrap();
                sites.index[slot].allocs += i + 1;
                site
            })
            .collect();
        assert!(sites.index.len() >= 2 * n as usize);
        for i in 0..n {
            let (site, slot) = sites.site(&[i, 7], i % 13).unwrap();
            assert_eq!(site, ids[i as usize]);
            assert_eq!(sites.index[slot].allocs, i + 1, "site {site}'s count");
        }
        assert_eq!(sites.keys.len(), n as usize);
    }

    #[test]
    fn frees_are_per_site_and_an_unknown_site_is_ignored() {
        let mut sites = Sites::new();
        let (s, _) = sites.site(&[5, 6], 48).unwrap();
        sites.count_free(s);
        sites.count_free(u16::MAX); // an unknown site is ignored, not a panic
        assert_eq!(sites.frees, vec![1]);
    }

    #[test]
    fn fingerprints_differ_by_every_part_of_the_key() {
        let base = fingerprint(&[1, 2, 3], 64);
        for other in [
            fingerprint(&[1, 2, 4], 64),
            fingerprint(&[2, 1, 3], 64),
            fingerprint(&[1, 2, 3, 0], 64),
            fingerprint(&[1, 2, 3], 65),
        ] {
            assert_ne!(base[0], other[0]);
            assert_ne!(base[1] >> 16, other[1] >> 16);
        }
    }
}
