//! The sampling global allocator: Go's heap profiler for a Rust process.
//!
//! What it owns: [`SamplingAllocator`], a `GlobalAlloc` over any allocator (System by default) that
//! samples allocations the way Go's runtime does. Each thread counts down the bytes it allocates; when the
//! countdown runs out the allocation is sampled and a new gap is drawn from an exponential distribution with
//! mean [`rate`] bytes (Go's `fastexprand`). Sampling is on from process start (rate 524288, as Go's
//! `MemProfileRate`); [`set_rate`] changes it, 0 turns it off. A sampled allocation records its stack
//! (frame pointers, through the engine's one walker, `unwind::current_stack`) and size into a site table
//! keyed by (stack, size), like Go's buckets. [`snapshot`] returns raw counters; unbiasing is the encoder's.
//!
//! Invariants:
//! - Every sampled block, whatever its size or alignment, lives in the `region` with its site number in
//!   its header, and the only other blocks there are the unsampled `realloc`s of sampled blocks (kept in
//!   the region so a growing buffer is never copied out of it; their header says no site): a free is a
//!   region block's exactly when `region::owns` its pointer, and a sampled block never reaches the inner allocator (on musl one under [`SHADOW_BELOW`] leaves
//!   an untouched shadow there, freed with it). When the region cannot hold a block the allocation is simply
//!   not sampled (counted in [`lost_counts`]), so every recorded allocation's free is seen and `inuse` is
//!   never overstated.
//! - The path every allocation takes: one read-modify-write of a `const` thread-local (`%fs`-relative, no
//!   `__tls_get_addr`), decided before the inner allocator is called so that call stays a tail call; the
//!   rate is folded into that countdown when it is drawn, so no global is read (a rate change reaches other
//!   threads at their next sample, see [`set_rate`]). Every free: `region::owns`, a load of one line
//!   that never changes and a compare. Only sampled allocations and frees of sampled blocks take the site
//!   mutex.
//! - It never samples an allocation made while recording a sample (a per-thread guard sends those straight
//!   to the inner allocator, so recording never recurses), nor once the thread's pthread-key destructors
//!   have run (one of them marks the thread as exiting; on glibc Rust's own TLS destructors run before
//!   that, and allocations they make may still be sampled, which is harmless: the sampled path uses only
//!   `const` thread-locals and the site mutex), and never uses a thread-local with a destructor on the
//!   allocation path (its thread-locals are `const`-initialised `Cell`s, valid during thread teardown).
use super::{unwind, Stack};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

mod gap;
use gap::next_gap;
mod region;
mod sites;

/// The region's address range, once reserved (reserved, unbacked address space; see the module doc).
pub fn sampled_region() -> Option<std::ops::Range<usize>> {
    region::range()
}

/// Go's default `MemProfileRate`.
pub const DEFAULT_RATE: usize = 512 * 1024;

/// Frames kept per sampled stack (the shared unwinder's depth).
pub const MAX_DEPTH: usize = unwind::MAX_DEPTH;

/// Distinct (stack, size) sites the table holds: a site number fits a block header's 16 bits, and site
/// number + 1 fits the 16 low bits of a site-index slot.
pub const MAX_SITES: usize = 65_535;

/// On musl, a sampled block under this size also takes a *shadow* of its layout from the
/// inner allocator, never touched and freed with it, so that allocator sees the requests it would see
/// without sampling: musl's mallocng sizes its groups by how many blocks of a class are live
/// (ARCHITECTURE.md has the measurement); above this size (its mmap threshold) blocks are mapped one by one.
pub const SHADOW_BELOW: usize = 128 << 10;

/// Whether sampled blocks take shadows: musl only. glibc's bins do not size themselves by use, so there a
/// shadow would only add back the inner allocator's cost.
pub(crate) const SHADOWS: bool = cfg!(target_env = "musl");

static RATE: AtomicUsize = AtomicUsize::new(DEFAULT_RATE);

thread_local! {
    /// Bytes left before this thread's next call into the slow path: the next sample, or (rate 0) the next
    /// look at the rate. The only thing the unsampled allocation path reads.
    static NEXT_SAMPLE: Cell<usize> = const { Cell::new(0) };
    /// True until this thread has drawn a gap at the rate in force (new thread, [`set_rate`] on this
    /// thread, or sampling off): the slow path then draws one and samples only if this allocation
    /// exhausts it, so a fresh countdown never biases the first allocation into a sample.
    static FRESH: Cell<bool> = const { Cell::new(true) };
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

impl<A> std::fmt::Debug for SamplingAllocator<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplingAllocator")
            .field("rate", &rate())
            .finish_non_exhaustive()
    }
}

impl SamplingAllocator<System> {
    /// The sampler around the system allocator (`std::alloc::System`).
    pub const fn system() -> Self {
        SamplingAllocator { inner: System }
    }
}

impl<A> SamplingAllocator<A> {
    /// The sampler around `inner`, any `GlobalAlloc`, which serves every allocation.
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
    /// records it and places it in the region. Never inlined, so the unsampled path stays small and the
    /// stack walk starts in a known (allocator) frame.
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

    /// Obtains and records a sampled block: in the region, or (no room there) from the inner allocator,
    /// unsampled. `BUSY` is set.
    ///
    /// # Safety
    /// The arguments satisfy the `GlobalAlloc` method that `how` stands for.
    unsafe fn place_sampled(&self, how: Obtain, layout: Layout, stack: &[u64]) -> *mut u8 {
        let (size, zeroed) = (layout.size(), matches!(how, Obtain::Zeroed));
        let Some(p) = sites::place(stack, size, layout.align(), zeroed) else {
            // SAFETY: the caller's contract.
            return unsafe { self.obtain(how, layout) };
        };
        if let Obtain::Realloc(old, old_layout) = how {
            // SAFETY: `p` is a fresh region block with room for `size` bytes; a realloc's old block is
            // valid for its own size and unsampled (realloc checked), so it goes back to the inner allocator.
            unsafe {
                std::ptr::copy_nonoverlapping(old, p, old_layout.size().min(size));
                self.inner.dealloc(old, old_layout);
            }
        }
        if SHADOWS && size < SHADOW_BELOW {
            // SAFETY: the caller's layout, valid for an alloc; the shadow is never read or written. A
            // null shadow (the inner allocator said no) is simply not freed.
            unsafe { region::set_shadow(p, layout.align(), self.inner.alloc(layout)) };
        }
        p
    }

    /// The free of a sampled block: recorded, then returned to the region. Out of line so the common free
    /// stays a few instructions and a tail call.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::dealloc` arguments, for a block the region owns.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_sampled(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the region owns `ptr`, so it is a live sampled block placed at `layout.align()`; its
        // shadow, if any, came from the inner allocator with this layout, and goes back once the block is
        // recorded (outside the site mutex).
        unsafe {
            let shadow = region::shadow_of(ptr, layout.align());
            sites::free(ptr, layout.align());
            if !shadow.is_null() {
                self.inner.dealloc(shadow, layout);
            }
        }
    }
}

impl<A: GlobalAlloc> SamplingAllocator<A> {
    /// The `realloc` of a sampled block: counted as its free plus a new allocation (sampled by the
    /// countdown, as any other), and kept in the region either way, so a growing buffer is grown in place
    /// or has its pages moved, never copied (`sites::replace`; a block the countdown did not sample stays
    /// uncounted there). Only when the region has no room does the new block come from the inner allocator,
    /// by copy.
    ///
    /// # Safety
    /// The caller's `GlobalAlloc::realloc` arguments, for a block the region owns.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_sampled(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: the caller guarantees `new_size` with `align` forms a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
        let mut frames = [0u64; MAX_DEPTH];
        let depth = match countdown(new_size) {
            true => begin_sample(new_size, &mut frames),
            false => None,
        };
        // SAFETY: the region owns `ptr`, a live block at `align` valid for `layout.size()` bytes; its
        // shadow, if any, came from the inner allocator with `layout` and goes back once the block has
        // moved; the new block gets a shadow of its own layout (or none).
        let moved = unsafe {
            let old_shadow = region::shadow_of(ptr, align);
            let moved = sites::replace(
                ptr,
                align,
                layout.size(),
                new_size,
                depth.map(|d| &frames[..d]),
            );
            if let Some(p) = moved {
                if !old_shadow.is_null() {
                    self.inner.dealloc(old_shadow, layout);
                }
                let shadow = match SHADOWS && new_size < SHADOW_BELOW {
                    true => self.inner.alloc(new_layout),
                    false => std::ptr::null_mut(),
                };
                region::set_shadow(p, align, shadow);
            }
            moved
        };
        if depth.is_some() {
            BUSY.with(|b| b.set(false));
        }
        if let Some(p) = moved {
            return p;
        }
        // No room in the region (counted as unplaced): the new block from the inner allocator, by copy.
        // SAFETY: new_layout has a nonzero size (GlobalAlloc::realloc's contract).
        let new = unsafe { self.inner.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap; `ptr` was allocated
            // by this allocator with `layout`.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
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
// (sampled blocks) hands out and takes back blocks of the region, which no one else uses, with their
// shadows (the inner allocator's, same layout, freed once); sampling reads no block's memory but a region
// block's own header.
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
        // The test every free makes.
        if region::owns(ptr as usize) {
            // SAFETY: the caller's dealloc arguments.
            return unsafe { self.dealloc_sampled(ptr, layout) };
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if region::owns(ptr as usize) {
            // SAFETY: the caller's realloc arguments, for a block the region owns.
            return unsafe { self.realloc_sampled(ptr, layout, new_size) };
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
/// other thread at its next sample (or, while sampling was off, within 1 MiB of its own
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
    /// Return addresses of the allocating call, leaf first.
    pub stack: Stack,
    /// The size in bytes of every block counted here (Go's `blockSize`).
    pub size: u64,
    /// Sampled allocations at this site (unscaled).
    pub alloc_objects: u64,
    /// Bytes of the sampled allocations (unscaled).
    pub alloc_bytes: u64,
    /// Sampled allocations since freed (unscaled).
    pub free_objects: u64,
    /// Bytes of the sampled allocations since freed (unscaled).
    pub free_bytes: u64,
}

/// Every sampled site since process start, and the rate they were sampled at.
#[derive(Debug, Clone)]
pub struct HeapSnapshot {
    /// The sampling rate in bytes when the sites were read (0 = off; see [`set_rate`]).
    pub rate: usize,
    /// One record per sampled (stack, size) pair.
    pub records: Vec<HeapRecord>,
    /// What the sampler could not reserve, when it got less than its region ([`region_note`]).
    pub note: Option<String>,
}

/// Reads the sampled sites. Allocations made while copying are never sampled.
pub fn snapshot() -> HeapSnapshot {
    let prev = BUSY.with(|b| b.replace(true));
    let records = sites::records();
    BUSY.with(|b| b.set(prev));
    HeapSnapshot {
        rate: rate(),
        records,
        note: region_note(),
    }
}

/// Set once the region's shortfall has been logged.
static REGION_LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the heap sampler could not reserve, as the heap profile's comment says it (None when it got its
/// whole region, or has not sampled yet). The first call that finds a shortfall also logs it (one line,
/// through [`crate::notes`]): the allocator where it happened cannot.
pub fn region_note() -> Option<String> {
    let gib = |b: usize| match b.is_multiple_of(1 << 30) {
        true => format!("{} GiB", b >> 30),
        false => format!("{} MiB", b >> 20),
    };
    let (text, errno) = match region::outcome() {
        region::Outcome::NotTried | region::Outcome::Full => return None,
        region::Outcome::Smaller {
            granted,
            asked,
            errno,
        } => (
            format!(
                "could not reserve its {} address-space region, only {}: sampled blocks beyond that are not sampled (counted as unplaced)",
                gib(asked),
                gib(granted)
            ),
            errno,
        ),
        region::Outcome::Unavailable { asked, errno } => (
            format!(
                "could not reserve any address-space region ({} down to {} refused): no allocation is sampled",
                gib(asked),
                gib(region::SMALLEST)
            ),
            errno,
        ),
    };
    let why = match region::address_space_limit() {
        Some(limit) => format!(
            "RLIMIT_AS (`ulimit -v`) is {}: the region keeps to 1/{} of it",
            gib(limit),
            region::AS_SHARE
        ),
        None => format!("mmap: {}", std::io::Error::from_raw_os_error(errno)),
    };
    let note = format!("heap sampler: {text} ({why})");
    if !REGION_LOGGED.swap(true, Ordering::Relaxed) {
        crate::notes::log(&note);
    }
    Some(note)
}

/// Reserves the sampled-block region now (otherwise the first sample does) and returns
/// [`region_note`]: lets a program report a shortfall at startup rather than at the first profile. A
/// no-op returning None when sampling is off.
pub fn reserve_region() -> Option<String> {
    if rate() == 0 {
        return None;
    }
    let prev = BUSY.with(|b| b.replace(true));
    sites::reserve_region();
    BUSY.with(|b| b.set(prev));
    region_note()
}

/// Allocations left unsampled, since process start: those the region had no room for (or no region could
/// be reserved), and those the full site table could not take. Their frees are not looked for either, so
/// `inuse` stays exact; the estimate of what they stand for is lost.
pub fn lost_counts() -> (u64, u64) {
    (
        sites::UNPLACED.load(Ordering::Relaxed),
        sites::DROPPED.load(Ordering::Relaxed),
    )
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
