//! The table of live sampled large blocks: which addresses outside the region the heap sampler is watching
//! for a free.
//!
//! What it provides: [`LiveTable`], a fixed-size open-addressing (linear probing) table of `AtomicU64` words,
//! each packing a block address (low 48 bits) and its site index (high 16 bits). Every `dealloc` of a large
//! block asks [`LiveTable::may_contain`]: one bit of a one-cache-line summary (one bit per word of the filter
//! below, set while that word is nonzero), so almost every such free stops there. Only on a hit does
//! [`LiveTable::contains`] look further, lock-free and allocation-free: one bit of a 4 KiB filter (one bit
//! per hash bucket, set while any live entry hashes there), then a seqlock read around a probe that an empty
//! slot ends. (Measured: with the 4 KiB filter as the first test, its random line was an L1 miss on most
//! frees of an allocation-heavy loop — about half of the sampler's cost on the free path.) Writers
//! ([`LiveTable::insert`], [`LiveTable::remove`]) are rare (sampled events only) and must be serialised by
//! the caller (the heap sampler's site mutex); a reader that overlaps a write simply probes again.
//!
//! What it never does: use tombstones (removal shifts the rest of the cluster back, so an empty slot always
//! ends a probe), grow, or allocate. When more than three quarters full it refuses inserts; the sampler
//! counts those blocks as allocated but cannot see their frees.
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

const ADDR_BITS: u32 = 48;
/// Filter buckets (bits): 32768 bits = 4 KiB.
const FILTER_LOG2: u32 = 15;
const FILTER_BITS: usize = 1 << FILTER_LOG2;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// Summary words: one bit per filter word, 512 bits = one cache line.
const SUMMARY_WORDS: usize = FILTER_BITS / 64 / 64;

/// The summary, aligned so it occupies exactly one cache line.
#[repr(align(64))]
struct Summary([AtomicU64; SUMMARY_WORDS]);

/// A fixed table of `N` slots (`N` a power of two).
pub struct LiveTable<const N: usize> {
    /// Bit w set while `filter[w]` is nonzero: the first (and usually only) test of every free.
    summary: Summary,
    slots: [AtomicU64; N],
    /// Seqlock: odd while a writer is changing slots.
    seq: AtomicU64,
    len: AtomicUsize,
    /// Bit b set while some held entry falls in bucket b (the top bits of the same hash that picks its home
    /// slot). A free whose bit is clear is certainly not tracked: its own entry, inserted before the block
    /// was handed out, would keep the bit set until the block's own removal.
    filter: [AtomicU64; FILTER_BITS / 64],
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
            summary: Summary([const { AtomicU64::new(0) }; SUMMARY_WORDS]),
            slots: [const { AtomicU64::new(0) }; N],
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            filter: [const { AtomicU64::new(0) }; FILTER_BITS / 64],
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
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fibonacci hashing of the address without its always-zero alignment bits: its top bits pick both
    /// the home slot and the filter bucket.
    #[inline(always)]
    fn hash(addr: u64) -> u64 {
        (addr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[inline(always)]
    fn home(addr: u64) -> usize {
        (Self::hash(addr) >> (64 - N.trailing_zeros())) as usize
    }

    #[inline(always)]
    fn bucket(addr: u64) -> usize {
        (Self::hash(addr) >> (64 - FILTER_LOG2)) as usize
    }

    #[inline(always)]
    fn filter_hit(&self, addr: u64) -> bool {
        let b = Self::bucket(addr);
        self.filter[b / 64].load(Ordering::Relaxed) & (1 << (b % 64)) != 0
    }

    /// Whether a held entry falls in bucket `b`. Bucket and home come from the same hash, so such entries
    /// have their home in a known range and (linear probing) sit in the run of occupied slots starting
    /// there: the scan reads the slots a removal has just touched, with no per-bucket counters to keep.
    /// Writers only.
    fn bucket_in_use(&self, b: usize) -> bool {
        let log_n = N.trailing_zeros();
        let homes = if log_n >= FILTER_LOG2 {
            let k = log_n - FILTER_LOG2;
            (b << k)..((b + 1) << k)
        } else {
            let h = b >> (FILTER_LOG2 - log_n);
            h..h + 1
        };
        for mut i in homes {
            // The table is never full (inserts stop at three quarters), so every run ends.
            loop {
                let word = self.slots[i].load(Ordering::Relaxed);
                if word == 0 {
                    break;
                }
                if Self::bucket(word & ADDR_MASK) == b {
                    return true;
                }
                i = (i + 1) & (N - 1);
            }
        }
        false
    }

    // Writers are serialised (the caller's mutex), so every word below has one writer at a time: a plain
    // load and store replace read-modify-write atomics (no locked instruction on the sampled path), and
    // "filter word became nonzero/zero" cannot interleave with another writer's summary update. Bits are
    // set before the entry is placed (a reader that can know the address sees them) and cleared only once
    // no entry of that bucket/word remains.
    fn mark(&self, addr: u64) {
        let b = Self::bucket(addr);
        let w = b / 64;
        let word = self.filter[w].load(Ordering::Relaxed);
        self.filter[w].store(word | 1 << (b % 64), Ordering::Relaxed);
        if word == 0 {
            let s = &self.summary.0[w / 64];
            s.store(s.load(Ordering::Relaxed) | 1 << (w % 64), Ordering::Relaxed);
        }
    }

    /// After `addr`'s entry is gone: clears its bucket's bit unless another entry still falls there.
    fn unmark(&self, addr: u64) {
        let b = Self::bucket(addr);
        if self.bucket_in_use(b) {
            return;
        }
        let w = b / 64;
        let word = self.filter[w].load(Ordering::Relaxed) & !(1 << (b % 64));
        self.filter[w].store(word, Ordering::Relaxed);
        if word == 0 {
            let s = &self.summary.0[w / 64];
            s.store(
                s.load(Ordering::Relaxed) & !(1 << (w % 64)),
                Ordering::Relaxed,
            );
        }
    }

    /// The test every free makes: false means `addr` is certainly not held. One bit of one hot cache line;
    /// a true answer needs [`LiveTable::contains`] to confirm.
    #[inline(always)]
    pub fn may_contain(&self, addr: usize) -> bool {
        let w = Self::bucket(addr as u64) / 64;
        self.summary.0[w / 64].load(Ordering::Relaxed) & (1 << (w % 64)) != 0
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

    /// True when `addr` is held. Lock-free; never allocates; safe on every free (the sampler asks
    /// [`LiveTable::may_contain`] first and calls this only on a hit).
    pub fn contains(&self, addr: usize) -> bool {
        let addr = addr as u64;
        if addr == 0
            || addr > ADDR_MASK
            || !self.may_contain(addr as usize)
            || !self.filter_hit(addr)
        {
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
        self.seq
            .store(self.seq.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    fn end_write(&self) {
        self.seq
            .store(self.seq.load(Ordering::Relaxed) + 1, Ordering::Release);
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
        self.mark(addr);
        self.begin_write();
        self.place(addr | (u64::from(site) << ADDR_BITS));
        self.len.store(self.len() + 1, Ordering::Relaxed);
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
        self.len.store(self.len() - 1, Ordering::Relaxed);
        self.end_write();
        self.unmark(addr);
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
        assert!(
            t.summary.0.iter().all(|w| w.load(Ordering::Relaxed) == 0),
            "summary bits cleared with the last entry"
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

    #[test]
    fn summary_never_hides_a_held_address_and_mostly_says_no() {
        let t: Box<LiveTable<1024>> = Box::default();
        let held: Vec<usize> = (1..=40).map(|i| 0x5555_0000 + i * 0x1230).collect();
        for a in &held {
            assert!(t.insert(*a, 1));
        }
        for a in &held {
            assert!(t.may_contain(*a) && t.contains(*a), "{a:#x}");
        }
        // 40 entries set at most 40 of 512 summary bits: most other addresses stop at the first test.
        let others = (0..10_000usize).map(|i| 0x7f00_0000_0000 + i * 48);
        let passed = others.filter(|a| t.may_contain(*a)).count();
        assert!(
            passed < 10_000 * 40 / 512 * 2,
            "{passed} of 10000 passed the summary"
        );
        // Removing entries that share a filter word keeps the word's summary bit while one remains.
        for a in &held[..39] {
            assert!(t.remove(*a).is_some());
        }
        assert!(t.may_contain(held[39]) && t.contains(held[39]));
        assert!(t.remove(held[39]).is_some());
        assert!(t.summary.0.iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn bucket_bit_stays_while_any_entry_of_the_bucket_remains() {
        // A table larger than the filter (several homes per bucket) and a small one (several buckets per
        // home): insert addresses until two share a bucket, remove one, the other must still be found.
        fn check<const N: usize>() {
            let t: Box<LiveTable<N>> = Box::default();
            let mut by_bucket = std::collections::HashMap::new();
            let mut pair = None;
            for i in 1..200_000usize {
                let a = i * 16;
                if let Some(prev) = by_bucket.insert(LiveTable::<N>::bucket(a as u64), a) {
                    pair = Some((prev, a));
                    break;
                }
            }
            let (a, b) = pair.expect("two addresses in one bucket");
            assert!(t.insert(a, 1) && t.insert(b, 2));
            assert_eq!(t.remove(a), Some(1));
            assert!(
                t.may_contain(b) && t.contains(b),
                "bucket bit cleared under a live entry"
            );
            assert_eq!(t.remove(b), Some(2));
            assert!(t.filter.iter().all(|w| w.load(Ordering::Relaxed) == 0));
            assert!(t.summary.0.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        }
        // The big table is built on the stack in debug builds: give it room.
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(|| {
                check::<{ 1 << 17 }>();
                check::<64>();
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
