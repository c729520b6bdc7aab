//! The region: the one range of address space that holds every sampled block, so that a free learns from
//! its pointer alone whether its block was sampled.
//!
//! What it owns: one reservation of address space at an address the kernel chooses (`PROT_NONE`,
//! `MAP_NORESERVE`, no huge pages), made on the first sample, made writable a MiB or more at a time as
//! blocks reach further, and every block in it. Blocks come in power-of-two classes (32 B up to the whole
//! range), each aligned to its own size, carved from a frontier that only moves up (the gap an alignment
//! leaves is cut into aligned pieces for the free lists). A freed block waits for reuse, last in first out,
//! on its class's free list.
//!
//! Invariants:
//! - [`owns`] is `ptr - base < len` over two words written once: the test every `dealloc` makes reads one
//!   cache line that never changes, and no block outside the range is ever taken for a sampled one.
//! - A block starts with its header ([`header_len`]: 16 bytes, or the alignment if larger) holding its site
//!   number, its class, and one word: the link of its free list while free, the sampler's shadow while
//!   live; the caller's bytes follow, aligned as asked. The caller's pointer and the alignment find the
//!   header again.
//! - Freed blocks larger than a page keep their pages only up to [`KEEP_FREED`] bytes in all (so the
//!   common free-then-reuse of a class costs no system call and no page faults); past that a freed block
//!   gives all its pages back to the kernel (`MADV_DONTNEED`) and waits, by address, in the released
//!   table (`region/released.rs`, 32 a class), as do the gap pieces larger than a page that a carve
//!   leaves, never touched; only when that class's table is full does a freed block keep its header's
//!   page, to link it on the list. The region's resident bytes are then the live blocks (rounded to
//!   pages), at most [`KEEP_FREED`] of kept free blocks, and a page per freed block past the table;
//!   keeping every freed page instead cost an allocation-heavy service ~8 MiB, a header page per freed
//!   block ~0.2 MiB (benches/heap_rss.rs).
//! - It never allocates, locks (the caller serialises every call: the sampler's site mutex) or gives its
//!   address space back.
//!   When the range cannot be reserved, or a block does not fit in what is left, [`Region::alloc`] says no
//!   and the sampler leaves that allocation unsampled.
//! - Under an address-space limit (`RLIMIT_AS`) it takes the largest range the kernel grants within an
//!   eighth of the limit ([`AS_SHARE`]: the program's stacks and malloc arenas need the rest), down to
//!   16 MiB, and [`outcome`] tells what it got and the errno of the first refusal, so the sampler can say
//!   so outside the allocator (the heap profile's comment, one log line).
mod released;

use released::Released;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

/// Sizes of range asked for, largest first, until the kernel grants one (an address-space limit may
/// refuse the larger): 64 GiB, 8 GiB, 1 GiB, 256 MiB, 64 MiB, 16 MiB.
const RANGE_LOG2: [u32; 6] = [36, 33, 30, 28, 26, 24];
/// The range's start is aligned to this (1 GiB) or to its length if smaller, so a block aligned to its
/// class within the range is aligned as much in memory, up to that; a block asking for more is not placed.
const BASE_ALIGN_LOG2: u32 = 30;
/// Smallest class: 32 B (the header and up to 16 bytes of the caller's).
const MIN_CLASS_LOG2: u32 = 5;
/// Classes 32 B ..= the largest range.
const CLASSES: usize = (RANGE_LOG2[0] - MIN_CLASS_LOG2 + 1) as usize;
/// Least made writable at a time (one `mprotect` per this many bytes of frontier).
const COMMIT: usize = 1 << 20;
/// The smallest header: the site number (at 0), the class (at 2), and one word (at 8): the free-list link
/// while the block is free, the sampler's shadow pointer ([`set_shadow`]) while it is live.
const MIN_HEADER: usize = 16;
const CLASS_AT: usize = 2;
/// A freed block's flag (at 3): 1 when it kept its pages (counted in `Region::kept`).
const KEPT_AT: usize = 3;
/// Most bytes of freed blocks (larger than a page) that keep their pages for reuse: 256 KiB.
pub(crate) const KEEP_FREED: usize = 256 << 10;
const LINK_AT: usize = 8;
const SHADOW_AT: usize = LINK_AT;

/// Where the range starts and how long it is; both 0 until reserved (and for good if none could be).
/// Aligned so both words share one cache line.
#[repr(C, align(16))]
struct Published {
    base: AtomicUsize,
    len: AtomicUsize,
}

static RANGE: Published = Published {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};

/// Set once the first reservation has been tried (whatever it got).
static TRIED: AtomicBool = AtomicBool::new(false);
/// The errno with which the kernel refused the first (largest) range, 0 if it granted it.
static REFUSED_ERRNO: AtomicI32 = AtomicI32::new(0);

/// What the reservation got, for reports made outside the allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing sampled yet: no reservation tried.
    NotTried,
    /// The full range.
    Full,
    /// A smaller range than asked: `granted` bytes of `asked`, the larger refused with `errno`.
    Smaller {
        granted: usize,
        asked: usize,
        errno: i32,
    },
    /// No range at all (down to the smallest): nothing is sampled.
    Unavailable { asked: usize, errno: i32 },
}

/// What the first reservation got.
pub(crate) fn outcome() -> Outcome {
    if !TRIED.load(Ordering::Acquire) {
        return Outcome::NotTried;
    }
    let (asked, errno) = (
        1usize << RANGE_LOG2[0],
        REFUSED_ERRNO.load(Ordering::Relaxed),
    );
    match RANGE.len.load(Ordering::Acquire) {
        0 => Outcome::Unavailable { asked, errno },
        len if len == asked => Outcome::Full,
        granted => Outcome::Smaller {
            granted,
            asked,
            errno,
        },
    }
}

/// The smallest range tried.
pub(crate) const SMALLEST: usize = 1 << RANGE_LOG2[RANGE_LOG2.len() - 1];

/// Whether `ptr` lies in the range: then it is a sampled block's. Two loads of a line that never changes
/// once written, a subtraction and a compare.
#[inline(always)]
pub(crate) fn owns(ptr: usize) -> bool {
    // The length first (see `ensure_reserved`): a length without its base would own low addresses.
    let len = RANGE.len.load(Ordering::Acquire);
    ptr.wrapping_sub(RANGE.base.load(Ordering::Relaxed)) < len
}

/// Where the range starts and ends, once reserved.
pub(crate) fn range() -> Option<std::ops::Range<usize>> {
    let len = RANGE.len.load(Ordering::Acquire);
    let base = RANGE.base.load(Ordering::Relaxed);
    (len != 0).then(|| base..base + len)
}

/// Bytes before the caller's pointer: the alignment, at least [`MIN_HEADER`]. A block is aligned to its
/// class, which is at least the header, so the caller's pointer keeps the alignment asked for.
pub(crate) fn header_len(align: usize) -> usize {
    align.max(MIN_HEADER)
}

/// The class (log2 of the block size) for `size` bytes at `align`, header included; `None` past any range.
fn class_log2(size: usize, align: usize) -> Option<u32> {
    let bytes = size
        .checked_add(header_len(align))?
        .checked_next_power_of_two()?;
    Some(bytes.trailing_zeros().max(MIN_CLASS_LOG2))
}

/// The site number in the header of the block at `ptr`.
///
/// # Safety
/// `ptr` came from [`Region::alloc`] with `align`, and the block is live.
pub(crate) unsafe fn site_of(ptr: *mut u8, align: usize) -> u16 {
    // SAFETY: the caller's guarantee; the site is the header's first two bytes.
    unsafe { (block_of(ptr, align) as *const u16).read() }
}

/// The block whose caller's pointer is `ptr` for a block allocated at `align`.
#[inline(always)]
fn block_of(ptr: *mut u8, align: usize) -> usize {
    ptr as usize - header_len(align)
}

/// Writes `site` into the header of the block whose caller's pointer is `ptr`.
///
/// # Safety
/// `ptr` came from [`Region::alloc`] with `align`, and the block is live.
pub(crate) unsafe fn set_site(ptr: *mut u8, align: usize, site: u16) {
    // SAFETY: the caller's guarantee; the header is the block's first bytes, ours and writable.
    unsafe { (block_of(ptr, align) as *mut u16).write(site) }
}

/// Records `shadow` (any pointer-sized value of the caller's) in the header of the block at `ptr`.
///
/// # Safety
/// `ptr` came from [`Region::alloc`] with `align`, and the block is live.
pub(crate) unsafe fn set_shadow(ptr: *mut u8, align: usize, shadow: *mut u8) {
    // SAFETY: the caller's guarantee; the word is in the header, ours and writable.
    unsafe { ((block_of(ptr, align) + SHADOW_AT) as *mut *mut u8).write(shadow) }
}

/// The shadow recorded for the block at `ptr`: null unless [`set_shadow`] set one.
///
/// # Safety
/// `ptr` came from [`Region::alloc`] with `align`, and the block is live.
pub(crate) unsafe fn shadow_of(ptr: *mut u8, align: usize) -> *mut u8 {
    // SAFETY: the caller's guarantee.
    unsafe { ((block_of(ptr, align) + SHADOW_AT) as *const *mut u8).read() }
}

/// The bytes the block at `ptr` (allocated at `align`) has for its caller: its class less its header.
///
/// # Safety
/// `ptr` came from [`Region::alloc`] with `align`, and the block is live.
pub(crate) unsafe fn room(ptr: *mut u8, align: usize) -> usize {
    // SAFETY: the caller's guarantee; the class byte is in the header.
    let class_log2 = unsafe { ((block_of(ptr, align) + CLASS_AT) as *const u8).read() };
    (1usize << class_log2) - header_len(align)
}

/// Least bytes moved by remapping pages instead of copying them: below this a copy is cheaper than the
/// system call and the page-table work.
const REMAP_AT_LEAST: usize = 1 << 16;

/// Moves the first `len` bytes of the block at `from` into the block at `to` (both allocated at
/// `align`): large blocks by moving their pages (`mremap` with `MREMAP_DONTUNMAP`, no copy: `from` is
/// left zero past its header), others, or when the kernel refuses, by copying. Both headers are kept.
///
/// # Safety
/// `from` and `to` came from [`Region::alloc`] with `align`, are live, distinct, and each has room for
/// `len` bytes.
pub(crate) unsafe fn move_contents(from: *mut u8, to: *mut u8, align: usize, len: usize) {
    let (a, b) = (block_of(from, align), block_of(to, align));
    let page = page_size();
    let span = (header_len(align) + len).next_multiple_of(page);
    if len >= REMAP_AT_LEAST && a % page == 0 && b % page == 0 {
        let (mut head_a, mut head_b) = ([0u8; MIN_HEADER], [0u8; MIN_HEADER]);
        // SAFETY: both blocks are live and ours for `span` bytes (their classes, multiples of a page, hold
        // the header and `len` bytes); the pages move within our own reservation, so nothing else is
        // touched; the headers are put back where they were.
        unsafe {
            std::ptr::copy_nonoverlapping(a as *const u8, head_a.as_mut_ptr(), MIN_HEADER);
            std::ptr::copy_nonoverlapping(b as *const u8, head_b.as_mut_ptr(), MIN_HEADER);
            if remap_pages(a, b, span) {
                std::ptr::copy_nonoverlapping(head_a.as_ptr(), a as *mut u8, MIN_HEADER);
                std::ptr::copy_nonoverlapping(head_b.as_ptr(), b as *mut u8, MIN_HEADER);
                return;
            }
        }
    }
    // SAFETY: the caller's guarantee: both valid for `len` bytes, distinct blocks.
    unsafe { std::ptr::copy_nonoverlapping(from, to, len) };
}

/// Moves `span` bytes of pages from `a` to `b` without unmapping `a` (Linux's `mremap` with
/// `MREMAP_DONTUNMAP`); false when the kernel refuses, and always elsewhere (the caller copies).
///
/// # Safety
/// As [`move_contents`]: both page-aligned blocks are ours for `span` bytes.
#[cfg(target_os = "linux")]
unsafe fn remap_pages(a: usize, b: usize, span: usize) -> bool {
    // SAFETY: the caller's guarantee; the pages move within our own reservation.
    let moved = unsafe {
        libc::mremap(
            a as *mut libc::c_void,
            span,
            span,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            b as *mut libc::c_void,
        )
    };
    moved != libc::MAP_FAILED
}

#[cfg(not(target_os = "linux"))]
unsafe fn remap_pages(_a: usize, _b: usize, _span: usize) -> bool {
    false
}

/// Where the range stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unreserved,
    Reserved,
    /// No range could be reserved: nothing is placed.
    Unavailable,
}

/// The region's bookkeeping: one per process, kept behind the sampler's site mutex.
pub(crate) struct Region {
    base: usize,
    len: usize,
    state: State,
    /// Per class: the head of its free list (0 = empty).
    free: [usize; CLASSES],
    /// Offset of the first byte never handed out.
    frontier: usize,
    /// Offset up to which the range is writable.
    committed: usize,
    /// Bytes of the freed blocks that kept their pages (at most [`KEEP_FREED`]).
    kept: usize,
    /// Free blocks larger than a page with no page resident, by class (before the lists).
    released: Released<CLASSES>,
}

impl Region {
    pub(crate) const fn new() -> Self {
        Region {
            base: 0,
            len: 0,
            state: State::Unreserved,
            free: [0; CLASSES],
            frontier: 0,
            committed: 0,
            kept: 0,
            released: Released::new(),
        }
    }

    /// A block for `size` bytes at `align`, its bytes zero if `zeroed`: the caller's pointer, or `None`
    /// (range unavailable or used up, a block larger than any range, alignment over 1 GiB). Its header's
    /// site is set by [`set_site`].
    pub(crate) fn alloc(&mut self, size: usize, align: usize, zeroed: bool) -> Option<*mut u8> {
        let class_log2 = class_log2(size, align).filter(|&c| c <= RANGE_LOG2[0])?;
        if !self.ensure_reserved() || align > base_align(self.len) {
            return None;
        }
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        let reused = self.free[c];
        let class = 1usize << class_log2;
        let mut dirty_end = 0;
        // A released block went back whole (or was never touched): it reads as zeros.
        let released = if reused == 0 {
            self.released.pop(c)
        } else {
            None
        };
        let block = if let Some(released) = released {
            released
        } else if reused != 0 {
            // SAFETY: a free block of ours holds the next free block's address and its kept flag in its
            // header.
            unsafe {
                self.free[c] = ((reused + LINK_AT) as *const usize).read();
                let kept = class > page_size() && ((reused + KEPT_AT) as *const u8).read() == 1;
                if kept {
                    self.kept -= class;
                }
                // A released block is zero past its first page; a kept one may be dirty throughout.
                dirty_end = reused + if kept { class } else { class.min(page_size()) };
            }
            reused
        } else {
            self.carve(class_log2)?
        };
        let ptr = (block + header_len(align)) as *mut u8;
        // SAFETY: the block is ours, writable, and 1 << class_log2 bytes long; the header fits before `ptr`.
        unsafe {
            ((block + CLASS_AT) as *mut u8).write(class_log2 as u8);
            ((block + SHADOW_AT) as *mut usize).write(0);
            ((block + KEPT_AT) as *mut u8).write(0);
            if zeroed && dirty_end != 0 {
                // A fresh or released block reads as zeros.
                let len = (ptr as usize + size)
                    .min(dirty_end)
                    .saturating_sub(ptr as usize);
                std::ptr::write_bytes(ptr, 0, len);
            }
        }
        Some(ptr)
    }

    /// Returns the block whose caller's pointer is `ptr` (allocated at `align`) to its class's free list,
    /// every page but its first given back first; its site number.
    ///
    /// # Safety
    /// `ptr` came from [`Region::alloc`] on this region with `align`, is live, and is not used after this.
    pub(crate) unsafe fn free(&mut self, ptr: *mut u8, align: usize) -> u16 {
        let block = block_of(ptr, align);
        // SAFETY: the caller's guarantee: the header is ours, and so is the whole block from now on.
        unsafe {
            let site = (block as *const u16).read();
            let class_log2 = u32::from(((block + CLASS_AT) as *const u8).read());
            let (class, page) = (1usize << class_log2, page_size());
            let keep = class > page && self.kept + class <= KEEP_FREED;
            if keep {
                self.kept += class;
            } else if class > page
                && self
                    .released
                    .push((class_log2 - MIN_CLASS_LOG2) as usize, block)
            {
                // Listed by address: the header's page can go too.
                libc::madvise(block as *mut libc::c_void, class, libc::MADV_DONTNEED);
                return site;
            } else if class > page {
                // A block larger than a page starts on a page (it is aligned to its class).
                libc::madvise(
                    (block + page) as *mut libc::c_void,
                    class - page,
                    libc::MADV_DONTNEED,
                );
            }
            ((block + KEPT_AT) as *mut u8).write(u8::from(keep));
            self.push(block, class_log2);
            site
        }
    }

    /// Puts a block that is ours and writable on its class's free list.
    fn push(&mut self, block: usize, class_log2: u32) {
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        // SAFETY: the block's header is ours and writable.
        unsafe { ((block + LINK_AT) as *mut usize).write(self.free[c]) };
        self.free[c] = block;
    }

    /// A never-used block of `class_log2` at the frontier, aligned to its size; the gap the alignment
    /// skips goes to the free lists, as the largest aligned pieces that fill it.
    fn carve(&mut self, class_log2: u32) -> Option<usize> {
        let size = 1usize << class_log2;
        let start = self.frontier.next_multiple_of(size);
        let end = start.checked_add(size).filter(|&end| end <= self.len)?;
        self.commit(end)?;
        let mut at = self.frontier;
        while at < start {
            // The frontier is a multiple of the smallest class, so every piece is at least that.
            let piece_log2 = at.trailing_zeros().min((start - at).ilog2());
            let c = (piece_log2 - MIN_CLASS_LOG2) as usize;
            // A piece larger than a page is listed without touching it, while the table has room.
            if 1usize << piece_log2 <= page_size() || !self.released.push(c, self.base + at) {
                self.push(self.base + at, piece_log2);
            }
            at += 1 << piece_log2;
        }
        self.frontier = end;
        Some(self.base + start)
    }

    /// Makes the range writable up to offset `end`.
    fn commit(&mut self, end: usize) -> Option<()> {
        if end <= self.committed {
            return Some(());
        }
        let to = end.next_multiple_of(COMMIT).min(self.len);
        // SAFETY: [committed, to) is inside this region's reservation.
        let rc = unsafe {
            libc::mprotect(
                (self.base + self.committed) as *mut libc::c_void,
                to - self.committed,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return None;
        }
        self.committed = to;
        Some(())
    }

    /// Reserves the range now if it was not yet; true while it is ours.
    pub(crate) fn reserve(&mut self) -> bool {
        self.ensure_reserved()
    }

    /// Reserves the range on first use; true while it is ours.
    fn ensure_reserved(&mut self) -> bool {
        if self.state == State::Unreserved {
            // Under an address-space limit the region keeps to a share of it: the program's own
            // mappings (thread stacks, malloc arenas) need the rest.
            let share = address_space_limit().map_or(usize::MAX, |l| l / AS_SHARE);
            let granted = RANGE_LOG2.iter().find_map(|&log2| {
                let got = (1usize << log2 <= share)
                    .then(|| reserve(1 << log2))
                    .flatten();
                if got.is_none() && log2 == RANGE_LOG2[0] {
                    // Reading errno allocates nothing.
                    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                    REFUSED_ERRNO.store(errno, Ordering::Relaxed);
                }
                got.map(|base| (base, 1 << log2))
            });
            match granted {
                Some((base, len)) => {
                    (self.base, self.len, self.state) = (base, len, State::Reserved);
                    // The base first: a free that sees the length must see the base it goes with.
                    RANGE.base.store(base, Ordering::Relaxed);
                    RANGE.len.store(len, Ordering::Release);
                }
                None => self.state = State::Unavailable,
            }
            TRIED.store(true, Ordering::Release);
        }
        self.state == State::Reserved
    }
}

/// The share of a finite `RLIMIT_AS` the region may take: an eighth.
pub(crate) const AS_SHARE: usize = 8;

/// The soft address-space limit in bytes, None when unlimited (one `getrlimit`, no allocation).
pub(crate) fn address_space_limit() -> Option<usize> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY)
        .then(|| usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX))
}

/// The kernel's page size, asked once (`sysconf` allocates nothing); 4 KiB if it does not say.
fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf reads a constant of the process.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                .ok()
                .filter(|p| p.is_power_of_two())
                .unwrap_or(4096);
            PAGE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

/// How a range of `len` bytes is aligned: to 1 GiB, or to its own length when smaller.
fn base_align(len: usize) -> usize {
    len.min(1 << BASE_ALIGN_LOG2)
}

/// Reserves `len` bytes of inaccessible, unbacked address space without huge pages, aligned to
/// [`base_align`] (the slack around it is given back); its start.
fn reserve(len: usize) -> Option<usize> {
    let align = base_align(len);
    let asked = len.checked_add(align)?;
    // SAFETY: a new anonymous mapping at an address the kernel chooses; no memory of ours is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            asked,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let (start, base) = (p as usize, (p as usize).next_multiple_of(align));
    // SAFETY: both slices are parts of the mapping just made, page-aligned, used by no one.
    unsafe {
        if base > start {
            libc::munmap(p, base - start);
        }
        if start + asked > base + len {
            libc::munmap(
                (base + len) as *mut libc::c_void,
                start + asked - base - len,
            );
        }
        // A hint: a 2 MiB page would make one small sample cost 2 MiB of memory. A kernel without
        // transparent huge pages refuses it, which is as good.
        #[cfg(target_os = "linux")]
        libc::madvise(base as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE);
    }
    Some(base)
}

#[cfg(test)]
mod tests;
