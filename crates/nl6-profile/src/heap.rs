//! The sampling global allocator: Go's heap profiler for a Rust process.
//!
//! What it provides: [`SamplingAllocator`], a `GlobalAlloc` over any allocator (System by default) that
//! samples allocations the way Go's runtime does. Each thread counts down the bytes it allocates; when the
//! countdown runs out the allocation is sampled and a new gap is drawn from an exponential distribution with
//! mean [`rate`] bytes (Go's `fastexprand`). Sampling is on from process start (rate 524288, as Go's
//! `MemProfileRate`); [`set_rate`] changes it, 0 turns it off. A sampled allocation records its stack
//! (frame pointers, through the engine's one walker, `unwind::current_stack`) and size into a site table
//! keyed by (stack, size), like Go's buckets. [`snapshot`] returns raw counters; unbiasing is the encoder's.
//!
//! Where a sampled block lives decides how its free is found: a block under [`LARGE`] (nearly every
//! sampled block) is placed in the [`region`], a range of address space in a window at a fixed address,
//! with its site number in the block's header; a larger one stays where the inner allocator puts it and
//! is entered in [`LiveTable`]. So the region holds only sampled blocks, and the inner allocator never
//! sees them.
//!
//! Cost on the path every allocation takes: one read-modify-write of a `const` thread-local (`%fs`-relative,
//! no `__tls_get_addr`), decided before the inner allocator is called so that call stays a tail call; the
//! rate is folded into that countdown when it is drawn, so no global is read (a rate change reaches other
//! threads at their next sample, see [`set_rate`]). On every free: a compare of the pointer with the
//! region's constant window and of the size with [`LARGE`]; no memory is read. Only a free of a large
//! block then tests one bit of the live table's one-line summary (out of line on a hit: its filter and a
//! seqlock read of the table). Only sampled allocations and frees of sampled blocks take the site mutex.
//! (Measured on the glibc bench: this free test took the sampler's cost at rate 0 from +2.0–2.4 % with the
//! summary test on every free to +0.7–2.3 % (median +1.2 %); placing small samples in the region halved the cost of a
//! sample; in all, +4.2 % became +1.7–1.9 %.)
//!
//! What it never does: sample an allocation made while recording a sample (a per-thread guard sends those
//! straight to the inner allocator, so recording never recurses), sample once the thread's pthread-key
//! destructors have run (one of them marks the thread as exiting; on glibc Rust's own TLS destructors run
//! before that, and allocations they make may still be sampled, which is harmless: the sampled path uses
//! only `const` thread-locals and the site mutex), or use a thread-local with a destructor on the
//! allocation path (its thread-locals are `const`-initialised `Cell`s, valid during thread teardown).
use super::{unwind, Stack};
use sites::{Placed, LIVE};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

mod live;
pub mod region;
mod sites;
pub(crate) use live::LiveTable;

/// Go's default `MemProfileRate`.
pub const DEFAULT_RATE: usize = 512 * 1024;

/// Frames kept per sampled stack (the shared unwinder's depth).
pub const MAX_DEPTH: usize = unwind::MAX_DEPTH;

/// Distinct (stack, size) sites the table holds: a site number fits [`LiveTable`]'s 16-bit tag, and site
/// number + 1 fits the 16 low bits of a site-index slot.
pub const MAX_SITES: usize = 65_535;

/// Sampled blocks whose size or alignment reaches this stay with the inner allocator and are watched by
/// [`LiveTable`]; smaller ones are placed in the [`region`]. A power of two, so `(size | align) >= LARGE`
/// is exactly "either reaches it". 64 KiB, but 32 KiB on musl: a region sample costs less than a watched
/// one (glibc, mixed-size bench: +1.3 % with 32 KiB blocks in the region, +2.8 % with them watched), but
/// taking a share of one size class away from musl's allocator changes how it caches that class: with
/// sampled 32 KiB blocks moved to the region the same bench ran 14 % slower on musl (16 KiB: no change).
pub const LARGE: usize = if cfg!(target_env = "musl") {
    1 << 15
} else {
    1 << 16
};

static RATE: AtomicUsize = AtomicUsize::new(DEFAULT_RATE);

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

/// How a sampled block is obtained.
#[derive(Clone, Copy)]
enum Obtain {
    Alloc,
    Zeroed,
    Realloc(*mut u8, Layout),
}

/// Whether a sampled block of this layout is large: kept by the inner allocator, watched by [`LIVE`].
#[inline(always)]
fn is_large(layout: Layout) -> bool {
    layout.size() | layout.align() >= LARGE
}

impl<A: GlobalAlloc> SamplingAllocator<A> {
    /// The block `how` asks for, from the inner allocator.
    ///
    /// # Safety
    /// The arguments satisfy the `GlobalAlloc` method that `how` stands for.
    #[inline(always)]
    unsafe fn obtain(&self, how: Obtain, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's GlobalAlloc contract.
        unsafe {
            match how {
                Obtain::Alloc => self.inner.alloc(layout),
                Obtain::Zeroed => self.inner.alloc_zeroed(layout),
                Obtain::Realloc(old, old_layout) => {
                    self.inner.realloc(old, old_layout, layout.size())
                }
            }
        }
    }

    /// The path taken when the countdown ran out: draws the next gap and, if this allocation is sampled,
    /// records it and places it (a small block in the region, a large one wherever the inner allocator
    /// puts it). Never inlined, so the unsampled path stays small and the stack walk starts in a known
    /// (allocator) frame.
    ///
    /// # Safety
    /// The arguments satisfy the `GlobalAlloc` method that `how` stands for.
    #[cold]
    #[inline(never)]
    unsafe fn obtain_sampled(&self, how: Obtain, layout: Layout) -> *mut u8 {
        let mut frames = [0u64; MAX_DEPTH];
        let Some(depth) = begin_sample(layout.size(), &mut frames) else {
            // SAFETY: the caller's contract.
            return unsafe { self.obtain(how, layout) };
        };
        // SAFETY: the caller's contract.
        let p = unsafe { self.place_sampled(how, layout, &frames[..depth]) };
        BUSY.with(|b| b.set(false));
        p
    }

    /// Obtains and records a sampled block. `BUSY` is set.
    ///
    /// # Safety
    /// The arguments satisfy the `GlobalAlloc` method that `how` stands for.
    unsafe fn place_sampled(&self, how: Obtain, layout: Layout, stack: &[u64]) -> *mut u8 {
        let size = layout.size();
        if is_large(layout) {
            // SAFETY: the caller's contract.
            let p = unsafe { self.obtain(how, layout) };
            if !p.is_null() {
                sites::record_large(p as usize, size, stack);
            }
            return p;
        }
        match sites::record_small(stack, size, layout.align()) {
            Placed::Region(p) => {
                // SAFETY: `p` is a fresh region block with room for `size` bytes; a realloc's old block
                // is valid for its own size, unsampled (realloc checked), so it goes back to the inner
                // allocator.
                unsafe {
                    match how {
                        Obtain::Alloc => {}
                        Obtain::Zeroed => std::ptr::write_bytes(p, 0, size),
                        Obtain::Realloc(old, old_layout) => {
                            std::ptr::copy_nonoverlapping(old, p, old_layout.size().min(size));
                            self.inner.dealloc(old, old_layout);
                        }
                    }
                }
                p
            }
            Placed::Elsewhere { site } => {
                // SAFETY: the caller's contract.
                let p = unsafe { self.obtain(how, layout) };
                if site && !p.is_null() {
                    sites::record_untracked(stack, size);
                }
                p
            }
        }
    }

    /// A free of a pointer inside the region's window: a sampled small block if it is in the range this
    /// process reserved (recorded, then returned to the region); otherwise memory of the inner
    /// allocator's. Out of line so the common free stays a few instructions and a tail call.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::dealloc` arguments.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_in_region(&self, ptr: *mut u8, layout: Layout) {
        if region::owns(ptr as usize) {
            // SAFETY: the range is ours, so `ptr` is a region block.
            unsafe { sites::free_small(ptr) };
        } else {
            // SAFETY: forwarded with the caller's pointer and layout.
            unsafe { self.dealloc_outside(ptr, layout) };
        }
    }

    /// A free of a block outside the region: watched (a sampled large block) or not.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::dealloc` arguments.
    #[inline(always)]
    unsafe fn dealloc_outside(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout) && LIVE.may_contain(ptr as usize) {
            // SAFETY: the caller's dealloc arguments.
            return unsafe { self.dealloc_watched(ptr, layout) };
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    /// A large free whose address passed the live table's one-line summary: the full (lock-free) check,
    /// the record if the block was sampled, then the free.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::dealloc` arguments.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_watched(&self, ptr: *mut u8, layout: Layout) {
        // The entry must go before the block does: once freed, another thread may get this address back.
        if LIVE.contains(ptr as usize) {
            sites::record_large_free(ptr as usize);
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    /// Whether the block at `ptr` (of `layout`) was sampled and is being watched for its free.
    fn is_watched(ptr: *mut u8, layout: Layout) -> bool {
        if region::contains(ptr as usize) && region::owns(ptr as usize) {
            return true;
        }
        is_large(layout) && LIVE.may_contain(ptr as usize) && LIVE.contains(ptr as usize)
    }
}

/// Decides whether this allocation (the countdown ran out) is sampled, drawing the next gap; if it is, sets
/// `BUSY` and writes the stack into `frames`, returning its depth.
#[inline(always)]
fn begin_sample(size: usize, frames: &mut [u64; MAX_DEPTH]) -> Option<usize> {
    if BUSY.with(Cell::get) || EXITING.with(Cell::get) {
        return None;
    }
    let rate = RATE.load(Ordering::Relaxed);
    if rate == 0 {
        // Off: look again after OFF_RECHECK_BYTES, then draw afresh.
        NEXT_SAMPLE.with(|c| c.set(OFF_RECHECK_BYTES));
        FRESH.with(|f| f.set(true));
        return None;
    }
    let first = FRESH.with(|f| f.replace(false));
    let gap = next_gap(rate);
    if first {
        // No countdown at this rate yet: draw it now and only sample if this allocation exhausts it.
        if size < gap {
            NEXT_SAMPLE.with(|c| c.set(gap - size));
            return None;
        }
        NEXT_SAMPLE.with(|c| c.set(next_gap(rate)));
    } else {
        NEXT_SAMPLE.with(|c| c.set(gap));
    }
    // From here on, allocations of this thread (the exit marker's key, the stack bounds asked of libc on a
    // thread's first walk, the site table) go straight to the inner allocator.
    BUSY.with(|b| b.set(true));
    mark_thread_exit();
    // The shared walker; its first frame is the return into the sampler (an allocator frame the encoder
    // trims by name).
    Some(unwind::current_stack(0, frames))
}

// SAFETY: every method either forwards to the inner allocator with the caller's arguments unchanged, or
// (sampled small blocks) hands out and takes back blocks of the region, which no one else uses; sampling
// reads no block's memory but a region block's own header.
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
        // The test every free makes: a constant range, no memory read.
        if region::contains(ptr as usize) {
            // SAFETY: the caller's dealloc arguments.
            return unsafe { self.dealloc_in_region(ptr, layout) };
        }
        // SAFETY: the caller's dealloc arguments.
        unsafe { self.dealloc_outside(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if Self::is_watched(ptr, layout) {
            // A sampled block: free + alloc, so its counters stay exact (and a region block never reaches
            // the inner allocator).
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

/// Reserves the address range for sampled small blocks now instead of at the first sample, so that a
/// program can say at startup when it cannot: then sampled blocks under [`LARGE`] are still counted as
/// allocated, but their frees are not seen ([`lost_counts`]). True when the range is ours.
pub fn reserve_region() -> bool {
    let prev = BUSY.with(|b| b.replace(true));
    let ours = sites::reserve_region();
    BUSY.with(|b| b.set(prev));
    ours
}

/// Runs `f` with the calling thread's allocations unsampled (they go straight to the inner allocator), as
/// the profiler's own bookkeeping does: the symbolizer's tables are nl6's, not the program's.
pub fn unsampled<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUSY.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUSY.with(|b| b.replace(true)));
    f()
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
    let records = sites::records();
    BUSY.with(|b| b.set(prev));
    HeapSnapshot {
        rate: rate(),
        records,
    }
}

/// Sampled allocations whose frees cannot be matched (live table full, region unavailable or used up) and
/// samples dropped because the site table was full, since process start.
pub fn lost_counts() -> (u64, u64) {
    (
        sites::UNTRACKED.load(Ordering::Relaxed),
        sites::DROPPED.load(Ordering::Relaxed),
    )
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

/// The key whose destructor marks a thread as exiting; None when `pthread_key_create` failed (then no
/// thread is marked, and allocations during thread teardown may be sampled).
static EXIT_KEY: std::sync::OnceLock<Option<libc::pthread_key_t>> = std::sync::OnceLock::new();

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
        let rc = unsafe { libc::pthread_key_create(&mut key, Some(thread_exiting)) };
        // On failure `key` holds nothing of ours (0 may be another library's key): never use it.
        (rc == 0).then_some(key)
    });
    if let Some(key) = key {
        // SAFETY: the key was created above; a non-null value makes the destructor run at thread exit.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
    }
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
}
