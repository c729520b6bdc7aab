//! The sampling global allocator: Go's heap profiler for a Rust process.
//!
//! What it provides: [`SamplingAllocator`], a `GlobalAlloc` over any allocator (System by default) that
//! samples allocations the way Go's runtime does. Each thread counts down the bytes it allocates; when the
//! countdown runs out the allocation is sampled and a new gap is drawn from an exponential distribution with
//! mean [`rate`] bytes (Go's `fastexprand`). Sampling is on from process start (rate 524288, as Go's
//! `MemProfileRate`); [`set_rate`] changes it, 0 turns it off. A sampled allocation records its stack
//! (frame pointers, through the engine's one walker, `unwind::current_stack`) and size into a site table keyed by (stack, size), like Go's buckets; frees of sampled
//! blocks are matched through [`LiveTable`]. [`snapshot`] returns raw counters; unbiasing is the encoder's.
//!
//! Cost on the path every allocation takes: one read-modify-write of a `const` thread-local (`%fs`-relative,
//! no `__tls_get_addr`), decided before the inner allocator is called so that call stays a tail call; the
//! rate is folded into that countdown when it is drawn, so no global is read (a rate change reaches other
//! threads at their next sample, see [`set_rate`]). On every free: one bit of a one-cache-line summary of
//! the live table; only when it is set (out of line) a bit of its 4 KiB filter and then a seqlock read
//! around a short probe of a fixed, lock-free table. Only sampled allocations and frees of sampled blocks
//! take the site-table mutex.
//!
//! What it never does: sample an allocation made while recording a sample (a per-thread guard sends those
//! straight to the inner allocator, so recording never recurses), sample once the thread's pthread-key
//! destructors have run (one of them marks the thread as exiting; on glibc Rust's own TLS destructors run
//! before that, and allocations they make may still be sampled, which is harmless: the sampled path uses
//! only `const` thread-locals and the site mutex), or use a thread-local with a destructor on the
//! allocation path (its thread-locals are `const`-initialised `Cell`s, valid during thread teardown).
use super::{unwind, Stack};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

mod live;
pub use live::LiveTable;

/// Go's default `MemProfileRate`.
pub const DEFAULT_RATE: usize = 512 * 1024;

/// Frames kept per sampled stack (the shared unwinder's depth).
pub const MAX_DEPTH: usize = unwind::MAX_DEPTH;

/// Distinct (stack, size) sites the table holds: a site number fits [`LiveTable`]'s 16-bit tag, and site
/// number + 1 fits the 16 low bits of a site-index slot.
pub const MAX_SITES: usize = 65_535;

static RATE: AtomicUsize = AtomicUsize::new(DEFAULT_RATE);

/// Sampled allocations recorded but not tracked for their free (live table full) or dropped (site table
/// full). Exposed through [`HeapSnapshot`] for honesty about accuracy.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Bytes left before this thread's next call into the slow path: the next sample, or (rate 0) the next
    /// look at the rate. The only thing the unsampled allocation path reads.
    static NEXT_SAMPLE: Cell<usize> = const { Cell::new(0) };
    /// True until this thread has drawn a gap at the rate in force (new thread, [`set_rate`] on this
    /// thread, or sampling off): the slow path then draws one and samples only if this allocation
    /// exhausts it, so a fresh countdown never biases the first allocation into a sample.
    static FRESH: Cell<bool> = const { Cell::new(true) };
    /// xorshift64* state; 0 = not seeded yet.
    static RNG: Cell<u64> = const { Cell::new(0) };
    /// Set while this thread records a sample (or is exiting): allocations go straight through.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// Set by the pthread-key destructor when the thread's exit has begun.
    static EXITING: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread registered its exit marker.
    static EXIT_MARKED: Cell<bool> = const { Cell::new(false) };
}

/// A `GlobalAlloc` that samples allocations (Go's formula) and passes everything to `A`.
pub struct SamplingAllocator<A = System> {
    inner: A,
}

impl SamplingAllocator<System> {
    pub const fn system() -> Self {
        SamplingAllocator { inner: System }
    }
}

impl<A> SamplingAllocator<A> {
    pub const fn new(inner: A) -> Self {
        SamplingAllocator { inner }
    }
}

/// Bytes a thread allocates between looks at the rate while sampling is off: turning sampling back on
/// reaches every thread within this much of its own allocation (one slow-path call per MiB otherwise).
const OFF_RECHECK_BYTES: usize = 1 << 20;

/// Counts `size` bytes against the thread's countdown, before the block is allocated (as Go decides in
/// `mallocgc`), so the unsampled path ends in a tail call to the inner allocator. True when the countdown
/// ran out: the slow path then samples, or only refreshes the countdown. One thread-local
/// read-modify-write and no global load: the rate is folded into the countdown when it is drawn.
#[inline(always)]
fn countdown(size: usize) -> bool {
    NEXT_SAMPLE.with(|next| {
        let left = next.get();
        if size < left {
            next.set(left - size);
            return false;
        }
        true
    })
}

/// How a sampled block is obtained from the inner allocator.
#[derive(Clone, Copy)]
enum Obtain {
    Alloc,
    Zeroed,
    Realloc(*mut u8, Layout),
}

impl<A: GlobalAlloc> SamplingAllocator<A> {
    /// The sampled path: obtains the block, then records it.
    ///
    /// # Safety
    /// The arguments satisfy the `GlobalAlloc` method that `how` stands for.
    #[cold]
    #[inline(never)]
    unsafe fn obtain_sampled(&self, how: Obtain, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's GlobalAlloc contract.
        let p = unsafe {
            match how {
                Obtain::Alloc => self.inner.alloc(layout),
                Obtain::Zeroed => self.inner.alloc_zeroed(layout),
                Obtain::Realloc(old, old_layout) => {
                    self.inner.realloc(old, old_layout, layout.size())
                }
            }
        };
        if !p.is_null() {
            sample_slow(p, layout.size());
        }
        p
    }

    /// A free whose address passed the live table's one-line summary: the full (lock-free) check, the
    /// record if the block was sampled, then the free. Out of line so the common free stays a few
    /// instructions and a tail call.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::dealloc` arguments.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_watched(&self, ptr: *mut u8, layout: Layout) {
        // The entry must go before the block does: once freed, another thread may get this address back.
        if LIVE.contains(ptr as usize) {
            record_free(ptr as usize);
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}

/// The sampled path: draws the next gap and records the allocation. Never inlined, so the fast path stays
/// small and the frame-pointer walk starts from a known frame.
#[inline(never)]
#[cold]
fn sample_slow(ptr: *mut u8, size: usize) {
    if BUSY.with(Cell::get) || EXITING.with(Cell::get) {
        return;
    }
    let rate = RATE.load(Ordering::Relaxed);
    if rate == 0 {
        // Off: look again after OFF_RECHECK_BYTES, then draw afresh.
        NEXT_SAMPLE.with(|c| c.set(OFF_RECHECK_BYTES));
        FRESH.with(|f| f.set(true));
        return;
    }
    BUSY.with(|b| b.set(true));
    LIVE.prefetch_for_insert(ptr as usize);
    let first = FRESH.with(|f| f.replace(false));
    let gap = next_gap(rate);
    if first {
        // No countdown at this rate yet: draw it now and only sample if this allocation exhausts it.
        if size < gap {
            NEXT_SAMPLE.with(|c| c.set(gap - size));
            BUSY.with(|b| b.set(false));
            return;
        }
        NEXT_SAMPLE.with(|c| c.set(next_gap(rate)));
    } else {
        NEXT_SAMPLE.with(|c| c.set(gap));
    }
    mark_thread_exit();
    let mut frames = [0u64; MAX_DEPTH];
    // The shared walker; its first frame is the return into this function (an allocator frame the encoder
    // trims by name). Its first call on a thread asks libc for the stack bounds, which may allocate: BUSY
    // sends those allocations straight through.
    let n = unwind::current_stack(0, &mut frames);
    record_alloc(ptr as usize, size, &frames[..n]);
    BUSY.with(|b| b.set(false));
}

// SAFETY: every method forwards to the inner allocator with the caller's arguments unchanged; sampling only
// reads the returned pointer value and never touches the block's memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for SamplingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if countdown(layout.size()) {
            // SAFETY: the caller's layout, for an alloc.
            return unsafe { self.obtain_sampled(Obtain::Alloc, layout) };
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { self.inner.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if countdown(layout.size()) {
            // SAFETY: the caller's layout, for an alloc_zeroed.
            return unsafe { self.obtain_sampled(Obtain::Zeroed, layout) };
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if LIVE.may_contain(ptr as usize) {
            // SAFETY: the caller's dealloc arguments.
            return unsafe { self.dealloc_watched(ptr, layout) };
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if LIVE.may_contain(ptr as usize) && LIVE.contains(ptr as usize) {
            // A sampled block: free + alloc, so its counters stay exact.
            // SAFETY: the caller guarantees `new_size` with `layout.align()` forms a valid layout.
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: new_layout has a nonzero size (GlobalAlloc::realloc's contract).
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                // SAFETY: both blocks are valid for the smaller size and do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
                // SAFETY: ptr was allocated by this allocator with `layout`.
                unsafe { self.dealloc(ptr, layout) };
            }
            return new;
        }
        if countdown(new_size) {
            // SAFETY: the caller guarantees `new_size` with `layout.align()` forms a valid layout.
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: the caller's realloc arguments.
            return unsafe { self.obtain_sampled(Obtain::Realloc(ptr, layout), new_layout) };
        }
        // SAFETY: forwarded with the caller's arguments.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}

/// Sets the sampling rate in bytes (0 = off). The calling thread uses it from its next allocation; every
/// other thread at its next sample (or, while sampling was off, within [`OFF_RECHECK_BYTES`] of its own
/// allocation). Go reads its rate on every allocation; folding it into the per-thread countdown instead
/// keeps a global load off the path every allocation takes.
pub fn set_rate(bytes: usize) {
    RATE.store(bytes, Ordering::Relaxed);
    NEXT_SAMPLE.with(|c| c.set(0));
    FRESH.with(|f| f.set(true));
}

/// The sampling rate in force.
pub fn rate() -> usize {
    RATE.load(Ordering::Relaxed)
}

/// Raw (unscaled) counters of one sampled allocation site: one (stack, size) pair, as Go's buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapRecord {
    pub stack: Stack,
    /// The size in bytes of every block counted here (Go's `blockSize`).
    pub size: u64,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub free_objects: u64,
    pub free_bytes: u64,
}

/// Every sampled site since process start, and the rate they were sampled at.
#[derive(Debug, Clone)]
pub struct HeapSnapshot {
    pub rate: usize,
    pub records: Vec<HeapRecord>,
}

/// Reads the sampled sites. Allocations made while copying are never sampled.
pub fn snapshot() -> HeapSnapshot {
    let prev = BUSY.with(|b| b.replace(true));
    let records = {
        let sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
        sites.records.clone()
    };
    BUSY.with(|b| b.set(prev));
    HeapSnapshot {
        rate: rate(),
        records,
    }
}

/// Sampled allocations whose frees cannot be matched (live table full) and samples dropped because the
/// site table was full, since process start.
pub fn lost_counts() -> (u64, u64) {
    (
        UNTRACKED.load(Ordering::Relaxed),
        DROPPED.load(Ordering::Relaxed),
    )
}

// ---------------------------------------------------------------------------------------------------------
// Site table (behind a mutex: sampled path only).

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
}

static SITES: Mutex<Sites> = Mutex::new(Sites {
    index: Vec::new(),
    records: Vec::new(),
});

static LIVE: LiveTable<{ 1 << 16 }> = LiveTable::new();

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

/// Records a sampled allocation. The caller has set `BUSY`, so allocations in here go straight through.
fn record_alloc(ptr: usize, size: usize, stack: &[u64]) {
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(site) = sites.site(stack, size as u64) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let r = &mut sites.records[site as usize];
    r.alloc_objects += 1;
    r.alloc_bytes += size as u64;
    // Inserted under the site mutex: the live table's writers are serialised by it.
    if !LIVE.insert(ptr, site) {
        UNTRACKED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records the free of a block [`LIVE`] holds. Runs on whatever thread frees; it does not allocate.
#[cold]
#[inline(never)]
fn record_free(ptr: usize) {
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(site) = LIVE.remove(ptr) {
        if let Some(r) = sites.records.get_mut(site as usize) {
            r.free_objects += 1;
            r.free_bytes += r.size;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Gaps: Go's fastexprand.

/// The next gap in bytes: exponentially distributed with mean `rate` (Go's `fastexprand`: a uniform
/// q in 1..=2^26, log2(q) − 26 clamped to ≤ 0, times −ln 2 × mean, plus 1). Rate 1 samples every byte.
fn next_gap(rate: usize) -> usize {
    if rate <= 1 {
        return 0;
    }
    gap_from_uniform(next_random(), rate)
}

/// The gap for a 64-bit uniform random value (split out for tests).
pub fn gap_from_uniform(random: u64, rate: usize) -> usize {
    const RANDOM_BITS: u32 = 26;
    let q = (random >> (64 - RANDOM_BITS)) + 1;
    let qlog = ((q as f64).log2() - f64::from(RANDOM_BITS)).min(0.0);
    (qlog * (-std::f64::consts::LN_2 * rate as f64)) as usize + 1
}

/// xorshift64* on per-thread state, seeded from the time-stamp counter and the thread-local's address.
fn next_random() -> u64 {
    let mut x = RNG.with(Cell::get);
    if x == 0 {
        x = seed();
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    RNG.with(|c| c.set(x));
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let local = RNG.with(|c| c as *const Cell<u64> as u64);
    let z = super::mix64(
        local ^ COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ timestamp(),
    );
    if z == 0 {
        1
    } else {
        z
    }
}

#[cfg(target_arch = "x86_64")]
fn timestamp() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn timestamp() -> u64 {
    0
}

// ---------------------------------------------------------------------------------------------------------
// Thread exit marker.

static EXIT_KEY: std::sync::OnceLock<libc::pthread_key_t> = std::sync::OnceLock::new();

extern "C" fn thread_exiting(_value: *mut libc::c_void) {
    EXITING.with(|e| e.set(true));
}

/// Registers (once per thread) a pthread-key value whose destructor flags the thread as exiting, so
/// allocations made by later destructors and by the C library's thread teardown are never sampled.
fn mark_thread_exit() {
    if EXIT_MARKED.with(Cell::get) {
        return;
    }
    EXIT_MARKED.with(|m| m.set(true));
    let key = *EXIT_KEY.get_or_init(|| {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is a valid out-pointer; the destructor is a plain extern "C" fn.
        unsafe { libc::pthread_key_create(&mut key, Some(thread_exiting)) };
        key
    });
    // SAFETY: the key was created above; a non-null value makes the destructor run at thread exit.
    unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's scale for one record, by hand: 1 / (1 - exp(-avg/rate)).
    #[test]
    fn gap_mean_is_rate() {
        let rate = 4096usize;
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let n = 200_000u64;
        let mut sum = 0u128;
        for _ in 0..n {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            sum += gap_from_uniform(x.wrapping_mul(0x2545_f491_4f6c_dd1d), rate) as u128;
        }
        let mean = sum as f64 / n as f64;
        // Standard error of an exponential's mean is rate/sqrt(n) ≈ 9 bytes here; allow 2 %.
        assert!(
            (mean - rate as f64).abs() < rate as f64 * 0.02,
            "mean gap {mean} vs rate {rate}"
        );
    }

    #[test]
    fn gap_extremes() {
        assert_eq!(
            gap_from_uniform(u64::MAX, 1000),
            1,
            "q = 2^26 gives log 0 -> gap 1"
        );
        let big = gap_from_uniform(0, 1000);
        // q = 1: log2(1) - 26 = -26 -> 26 * ln2 * 1000 + 1 ≈ 18022.
        assert_eq!(big, 18022);
        assert_eq!(next_gap(1), 0);
    }

    #[test]
    fn sites_are_keyed_by_stack_and_size_even_on_hash_collisions() {
        let mut sites = Sites {
            index: Vec::new(),
            records: Vec::new(),
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
