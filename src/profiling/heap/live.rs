//! The table of live sampled blocks: which addresses the heap sampler is watching for a free.
//!
//! What it provides: [`LiveTable`], a fixed-size open-addressing (linear probing) table of `AtomicU64`
//! words, each packing a block address (low 48 bits) and its site index (high 16 bits). Every `dealloc`
//! asks [`LiveTable::contains`], so lookups are lock-free and allocation-free: first one bit of a 4 KiB
//! filter (one bit per hash bucket, set while any live entry hashes there, so it stays in cache and almost
//! every free stops there), then, on a hit, a seqlock read around a probe that an empty slot ends. Writers ([`LiveTable::insert`], [`LiveTable::remove`]) are rare (sampled
//! events only) and must be serialised by the caller (the heap sampler's site mutex); a reader that overlaps
//! a write simply probes again.
//!
//! What it never does: use tombstones (removal shifts the rest of the cluster back, so an empty slot always
//! ends a probe), grow, or allocate. When more than three quarters full it refuses inserts; the sampler
//! counts those blocks as allocated but cannot see their frees.
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

const ADDR_BITS: u32 = 48;
/// Filter buckets (bits): 32768 bits = 4 KiB.
const FILTER_LOG2: u32 = 15;
const FILTER_BITS: usize = 1 << FILTER_LOG2;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// A fixed table of `N` slots (`N` a power of two).
pub struct LiveTable<const N: usize> {
    slots: [AtomicU64; N],
    /// Seqlock: odd while a writer is changing slots.
    seq: AtomicU64,
    len: AtomicUsize,
    /// Bit b set while `counts[b] > 0`. A free whose bit is clear is certainly not tracked: its own entry,
    /// inserted before the block was handed out, would keep the bit set until the block's own removal.
    filter: [AtomicU64; FILTER_BITS / 64],
    /// Live entries per filter bucket; written by (serialised) writers only.
    counts: [AtomicU32; FILTER_BITS],
}

impl<const N: usize> Default for LiveTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LiveTable<N> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        assert!(N.is_power_of_two() && N >= 4);
        LiveTable {
            slots: [const { AtomicU64::new(0) }; N],
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            filter: [const { AtomicU64::new(0) }; FILTER_BITS / 64],
            counts: [const { AtomicU32::new(0) }; FILTER_BITS],
        }
    }

    /// Most entries the table accepts.
    pub const fn capacity() -> usize {
        N / 4 * 3
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline(always)]
    fn home(addr: u64) -> usize {
        // Fibonacci hashing of the address without its always-zero alignment bits.
        ((addr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - N.trailing_zeros())) as usize
    }

    #[inline(always)]
    fn bucket(addr: u64) -> usize {
        ((addr >> 4).wrapping_mul(0xc2b2_ae3d_27d4_eb4f) >> (64 - FILTER_LOG2)) as usize
    }

    #[inline(always)]
    fn filter_hit(&self, addr: u64) -> bool {
        let b = Self::bucket(addr);
        self.filter[b / 64].load(Ordering::Relaxed) & (1 << (b % 64)) != 0
    }

    fn count_up(&self, addr: u64) {
        let b = Self::bucket(addr);
        if self.counts[b].fetch_add(1, Ordering::Relaxed) == 0 {
            self.filter[b / 64].fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
    }

    fn count_down(&self, addr: u64) {
        let b = Self::bucket(addr);
        if self.counts[b].fetch_sub(1, Ordering::Relaxed) == 1 {
            self.filter[b / 64].fetch_and(!(1 << (b % 64)), Ordering::Relaxed);
        }
    }

    /// Finds the slot holding `addr`. Callers must either hold the writer lock or validate with the seqlock.
    #[inline(always)]
    fn find(&self, addr: u64) -> Option<(usize, u16)> {
        let mut i = Self::home(addr);
        for _ in 0..N {
            let word = self.slots[i].load(Ordering::Relaxed);
            if word == 0 {
                return None;
            }
            if word & ADDR_MASK == addr {
                return Some((i, (word >> ADDR_BITS) as u16));
            }
            i = (i + 1) & (N - 1);
        }
        None
    }

    /// True when `addr` is held. Lock-free; never allocates; safe on every free.
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        let addr = addr as u64;
        if addr == 0 || addr > ADDR_MASK || !self.filter_hit(addr) {
            return false;
        }
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let found = self.find(addr).is_some();
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return found;
            }
        }
    }

    fn begin_write(&self) {
        self.seq.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    fn end_write(&self) {
        self.seq.fetch_add(1, Ordering::Release);
    }

    fn place(&self, word: u64) {
        let mut i = Self::home(word & ADDR_MASK);
        while self.slots[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & (N - 1);
        }
        self.slots[i].store(word, Ordering::Relaxed);
    }

    /// Adds `addr` with its site. Writers must be serialised by the caller. Returns false when the table is
    /// full or the address does not fit 48 bits.
    pub fn insert(&self, addr: usize, site: u16) -> bool {
        let addr = addr as u64;
        if addr == 0 || addr > ADDR_MASK || self.len() >= Self::capacity() {
            return false;
        }
        self.count_up(addr);
        self.begin_write();
        self.place(addr | (u64::from(site) << ADDR_BITS));
        self.len.fetch_add(1, Ordering::Relaxed);
        self.end_write();
        true
    }

    /// Removes `addr`, returning its site. Writers must be serialised by the caller.
    pub fn remove(&self, addr: usize) -> Option<u16> {
        let addr = addr as u64;
        let (slot, site) = self.find(addr)?;
        self.begin_write();
        self.slots[slot].store(0, Ordering::Relaxed);
        // Re-place the rest of the cluster so no entry sits behind the new hole.
        let mut i = (slot + 1) & (N - 1);
        loop {
            let word = self.slots[i].load(Ordering::Relaxed);
            if word == 0 {
                break;
            }
            self.slots[i].store(0, Ordering::Relaxed);
            self.place(word);
            i = (i + 1) & (N - 1);
        }
        self.len.fetch_sub(1, Ordering::Relaxed);
        self.end_write();
        self.count_down(addr);
        Some(site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_remove() {
        let t: LiveTable<64> = LiveTable::new();
        assert!(!t.contains(0x1000));
        assert!(t.insert(0x1000, 7));
        assert!(t.insert(0x2000, 9));
        assert!(t.contains(0x1000) && t.contains(0x2000));
        assert!(!t.contains(0x3000));
        assert_eq!(t.remove(0x1000), Some(7));
        assert!(!t.contains(0x1000));
        assert_eq!(t.remove(0x1000), None);
        assert_eq!(t.remove(0x2000), Some(9));
        assert!(t.is_empty());
    }

    #[test]
    fn colliding_entries_survive_removal_of_their_neighbours() {
        let t: LiveTable<16> = LiveTable::new();
        // Many addresses in a small table: clusters are certain. Remove every other one and check the rest.
        let addrs: Vec<usize> = (1..=12).map(|i| i * 0x40).collect();
        for (i, a) in addrs.iter().enumerate() {
            assert!(t.insert(*a, i as u16));
        }
        for a in addrs.iter().step_by(2) {
            assert!(t.remove(*a).is_some());
        }
        for (i, a) in addrs.iter().enumerate() {
            assert_eq!(t.contains(*a), i % 2 == 1, "addr {a:#x}");
        }
        for (i, a) in addrs.iter().enumerate().skip(1).step_by(2) {
            assert_eq!(t.remove(*a), Some(i as u16));
        }
        assert!(t.is_empty());
        assert!(t.slots.iter().all(|s| s.load(Ordering::Relaxed) == 0));
        assert!(
            t.filter.iter().all(|w| w.load(Ordering::Relaxed) == 0),
            "filter bits cleared with the last entry"
        );
    }

    #[test]
    fn full_table_refuses_and_recovers() {
        let t: LiveTable<16> = LiveTable::new();
        let cap = LiveTable::<16>::capacity();
        assert_eq!(cap, 12);
        for i in 0..cap {
            assert!(t.insert((i + 1) * 16, 1));
        }
        assert!(!t.insert(0x9990, 1), "over capacity");
        assert!(!t.contains(0x9990));
        // A miss in a nearly full table still terminates (probes stop at an empty slot).
        assert!(!t.contains(0x123450));
        assert_eq!(t.remove(16), Some(1));
        assert!(t.insert(0x9990, 2));
        assert!(t.contains(0x9990));
    }

    #[test]
    fn refuses_addresses_over_48_bits_and_null() {
        let t: LiveTable<16> = LiveTable::new();
        assert!(!t.insert(0, 1));
        assert!(!t.insert(1 << 50, 1));
        assert!(!t.contains(1 << 50));
    }

    #[test]
    fn site_index_round_trips_all_16_bits() {
        let t: LiveTable<16> = LiveTable::new();
        assert!(t.insert(0x7fff_ffff_fff0, u16::MAX));
        assert_eq!(t.remove(0x7fff_ffff_fff0), Some(u16::MAX));
    }
}
