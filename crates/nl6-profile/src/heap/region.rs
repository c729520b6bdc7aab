//! The region that holds sampled small blocks: how every free learns, without reading memory, that its block
//! was not sampled.
//!
//! What it provides: one 1 GiB range of address space inside a window at a fixed address, `[WINDOW,
//! WINDOW + 8 GiB)`, reserved on the first sample (or at startup, through `heap::reserve_region`) with
//! `PROT_NONE` and `MAP_FIXED_NOREPLACE` (the first of the window's eight candidate ranges the kernel
//! grants) and made writable a MiB at a time; the heap sampler takes every sampled block smaller than
//! [`super::LARGE`] from it. Because the window is a compile-time constant, [`contains`] is a shift and a
//! compare of the pointer: the test that every `dealloc` makes costs no load, no multiply and no branch miss.
//! Only a pointer that passes it is checked against the range actually reserved ([`owns`], out of line).
//!
//! Blocks come in power-of-two classes (32 B to 128 KiB), carved from 128 KiB chunks that each serve one
//! class, so a block is aligned to its class and a free finds the block from the pointer and its chunk's
//! class, whatever layout the caller passes. A block starts with a header (16 bytes, or the alignment if
//! larger) that holds its site number and, while the block is free, the link of its class's free list; the
//! caller's bytes follow. So the line a free reads to find its site is the one the block's owner wrote
//! first, and the one a reuse writes is the one its new owner is about to touch: a sample costs no extra
//! cache line for the block (a footer at the block's end did: on large classes a line of its own, missed at
//! allocation and again at the free). Freed blocks are reused last-in first-out.
//!
//! What it never does: allocate, lock (the caller serialises every call: the sampler's site mutex), hand out
//! memory outside its range, back the range with huge pages (`MADV_NOHUGEPAGE`: a 2 MiB page would make
//! one small sample cost 2 MiB of RSS), or give memory back (a chunk keeps its class; freed blocks wait for
//! reuse). If no candidate range can be reserved (all mapped, a kernel older than 4.17 that takes the
//! address only as a hint, an address-space limit) or the range is used up, [`Region::alloc`] says no and
//! the sampler leaves the block to the inner allocator, counted as untracked.
use std::sync::atomic::{AtomicUsize, Ordering};

/// The window's start: far below where Linux places mappings (the PIE image near `0x55..`, `mmap`
/// downwards from near `0x7f..`), aligned to the window's size so that [`contains`] is one shift and one
/// compare.
pub const WINDOW: usize = 0x2b6c_0000_0000;
/// log2 of the window's size: 8 GiB, eight candidate ranges.
const WINDOW_LOG2: u32 = 33;
/// log2 of the range's size: 1 GiB of address space (only what sampled blocks use becomes memory).
const SIZE_LOG2: u32 = 30;
pub const SIZE: usize = 1 << SIZE_LOG2;
/// Smallest class: 32 B (the header and up to 16 bytes of the caller's).
const MIN_CLASS_LOG2: u32 = 5;
/// Largest class: 128 KiB, room for a block just under [`super::LARGE`] plus its header.
const MAX_CLASS_LOG2: u32 = 17;
const CLASSES: usize = (MAX_CLASS_LOG2 - MIN_CLASS_LOG2 + 1) as usize;
/// A chunk serves one class; as large as the largest class, so every class is aligned within it.
const CHUNK: usize = 1 << MAX_CLASS_LOG2;
const CHUNKS: usize = SIZE / CHUNK;
/// Made writable at a time (one `mprotect` per this many bytes of chunks).
const COMMIT: usize = 1 << 20;
/// The smallest header: the site number, and the free-list link while the block is free.
const MIN_HEADER: usize = 16;
/// Where the free-list link is in a free block's header (the site number is at 0).
const LINK_AT: usize = 8;

const _: () = assert!(WINDOW.trailing_zeros() >= WINDOW_LOG2 && SIZE.is_multiple_of(COMMIT));
const _: () = assert!(COMMIT.is_multiple_of(CHUNK));
// The largest layout under LARGE: size LARGE - 1 with alignment LARGE / 2 (its header).
const _: () = assert!(super::LARGE - 1 + super::LARGE / 2 <= 1 << MAX_CLASS_LOG2);

/// Where the sampler's range starts once reserved (0 before, and for good if none could be).
static BASE: AtomicUsize = AtomicUsize::new(0);

/// Whether `ptr` lies in the window. A constant test: no memory is read. True for every region block;
/// [`owns`] tells the rest of the window apart.
#[inline(always)]
pub fn contains(ptr: usize) -> bool {
    ptr >> WINDOW_LOG2 == WINDOW >> WINDOW_LOG2
}

/// Whether `ptr` lies in the range this process reserved: only then is it one of the region's blocks.
pub fn owns(ptr: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    base != 0 && ptr.wrapping_sub(base) < SIZE
}

/// Where the sampler's range starts, once reserved.
pub fn base() -> Option<usize> {
    Some(BASE.load(Ordering::Acquire)).filter(|&b| b != 0)
}

/// Bytes before the caller's pointer: the alignment, at least [`MIN_HEADER`]. A block is aligned to its
/// class, which is at least the header, so the caller's pointer keeps the alignment asked for.
fn header_len(align: usize) -> usize {
    align.max(MIN_HEADER)
}

/// The class (log2 of the block size) for `size` bytes at `align`, header included.
fn class_log2(size: usize, align: usize) -> u32 {
    (size + header_len(align))
        .next_power_of_two()
        .trailing_zeros()
        .max(MIN_CLASS_LOG2)
}

/// Where the range stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not asked for yet.
    Unreserved,
    /// Reserved at `base`.
    Reserved,
    /// Could not be reserved: sampled small blocks stay with the inner allocator.
    Unavailable,
}

/// The region's bookkeeping: one per process, kept behind the sampler's site mutex.
pub(crate) struct Region {
    /// Where this region's range starts (the sampler's is in the window; tests use a range of their own).
    base: usize,
    state: State,
    /// Per class: the head of its free list (0 = empty).
    free: [usize; CLASSES],
    /// Per class: the next never-used block of its current chunk, and that chunk's end.
    fresh: [(usize, usize); CLASSES],
    /// Per chunk: the class (log2) it serves, 0 while unused.
    chunk_class: [u8; CHUNKS],
    /// Offset of the first chunk not yet given to a class.
    next_chunk: usize,
    /// Offset up to which the range is writable.
    committed: usize,
}

impl Region {
    pub(crate) const fn new() -> Self {
        Region {
            base: 0,
            state: State::Unreserved,
            free: [0; CLASSES],
            fresh: [(0, 0); CLASSES],
            chunk_class: [0; CHUNKS],
            next_chunk: 0,
            committed: 0,
        }
    }

    /// A block for `size` bytes at `align` with `site` in its header: the caller's pointer, or `None`
    /// (no class that large, range unavailable or used up).
    pub(crate) fn alloc(&mut self, size: usize, align: usize, site: u16) -> Option<*mut u8> {
        let class_log2 = class_log2(size, align);
        if class_log2 > MAX_CLASS_LOG2 || !self.ensure_reserved() {
            return None;
        }
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        let block = if self.free[c] != 0 {
            let block = self.free[c];
            // SAFETY: a free block of ours holds the next free block's address in its header.
            self.free[c] = unsafe { ((block + LINK_AT) as *const usize).read() };
            block
        } else {
            let (next, end) = self.fresh[c];
            let next = if next < end {
                next
            } else {
                let chunk = self.take_chunk(class_log2)?;
                self.fresh[c] = (chunk, chunk + CHUNK);
                chunk
            };
            self.fresh[c].0 = next + (1 << class_log2);
            next
        };
        // SAFETY: the block is ours and writable; its header is at least 16 bytes.
        unsafe { (block as *mut u16).write(site) };
        Some((block + header_len(align)) as *mut u8)
    }

    /// The block that holds the caller's pointer `ptr`, and its class (from its chunk, not from a layout).
    ///
    /// # Safety
    /// `ptr` came from [`Region::alloc`] on this region.
    unsafe fn block_of(&self, ptr: *mut u8) -> (usize, u32) {
        let class_log2 = u32::from(self.chunk_class[(ptr as usize - self.base) / CHUNK]);
        // Blocks are aligned to their class and the header is smaller than the class.
        (ptr as usize & !((1usize << class_log2) - 1), class_log2)
    }

    /// The site number in the header of the block whose caller's pointer is `ptr`.
    ///
    /// # Safety
    /// `ptr` is a live block of this region.
    #[cfg(test)]
    unsafe fn site_of(&self, ptr: *mut u8) -> u16 {
        // SAFETY: the caller's guarantee; the header is inside the block, which is mapped and ours.
        unsafe { (self.block_of(ptr).0 as *const u16).read() }
    }

    /// Returns the block whose caller's pointer is `ptr` to its class's free list; its site number.
    ///
    /// # Safety
    /// `ptr` is a live block of this region, not used after this call.
    pub(crate) unsafe fn free(&mut self, ptr: *mut u8) -> u16 {
        // SAFETY: the caller's guarantee.
        let (block, class_log2) = unsafe { self.block_of(ptr) };
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        // SAFETY: the block is ours and no longer in use; its header holds the site and takes the link.
        unsafe {
            let site = (block as *const u16).read();
            ((block + LINK_AT) as *mut usize).write(self.free[c]);
            self.free[c] = block;
            site
        }
    }

    /// Bytes of the range in use by chunks (given to a class).
    #[cfg(test)]
    fn chunk_bytes(&self) -> usize {
        self.next_chunk
    }

    /// The next unused chunk, made writable if needed, given to `class_log2`.
    fn take_chunk(&mut self, class_log2: u32) -> Option<usize> {
        if self.next_chunk + CHUNK > SIZE {
            return None;
        }
        if self.next_chunk + CHUNK > self.committed {
            // SAFETY: [committed, committed + COMMIT) is inside this region's reservation.
            let rc = unsafe {
                libc::mprotect(
                    (self.base + self.committed) as *mut libc::c_void,
                    COMMIT,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if rc != 0 {
                return None;
            }
            self.committed += COMMIT;
        }
        self.chunk_class[self.next_chunk / CHUNK] = class_log2 as u8;
        let chunk = self.base + self.next_chunk;
        self.next_chunk += CHUNK;
        Some(chunk)
    }

    /// Reserves the sampler's range on first use; true while it is ours.
    pub(crate) fn ensure_reserved(&mut self) -> bool {
        if self.state == State::Unreserved {
            match reserve() {
                Some(base) => {
                    self.base = base;
                    self.state = State::Reserved;
                    BASE.store(base, Ordering::Release);
                }
                None => self.state = State::Unavailable,
            }
        }
        self.state == State::Reserved
    }
}

/// Reserves the first candidate range of the window the kernel grants, as inaccessible, unbacked address
/// space without huge pages; its start.
fn reserve() -> Option<usize> {
    (0..1usize << (WINDOW_LOG2 - SIZE_LOG2)).find_map(|i| reserve_at(WINDOW + i * SIZE))
}

/// Reserves `[at, at + SIZE)`; `Some(at)` when the kernel gave exactly that range.
fn reserve_at(at: usize) -> Option<usize> {
    // SAFETY: a new anonymous mapping that must not replace anything (MAP_FIXED_NOREPLACE); no memory of
    // ours is touched.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            SIZE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    if p as usize != at {
        // A kernel that does not know MAP_FIXED_NOREPLACE took the address as a hint and put the mapping
        // elsewhere: give it back.
        // SAFETY: `p` is the mapping just made, of SIZE bytes, and nothing uses it.
        unsafe { libc::munmap(p, SIZE) };
        return None;
    }
    // A hint; a kernel without transparent huge pages refuses it, which is as good.
    // SAFETY: advice on our own fresh mapping.
    unsafe { libc::madvise(p, SIZE, libc::MADV_NOHUGEPAGE) };
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_is_exactly_the_window() {
        let end = WINDOW + (1 << WINDOW_LOG2);
        assert!(contains(WINDOW) && contains(end - 1));
        assert!(!contains(WINDOW - 1) && !contains(end));
        assert!(!contains(0) && !contains(usize::MAX));
    }

    #[test]
    fn classes_leave_room_for_the_header_and_honour_alignment() {
        assert_eq!(class_log2(1, 1), 5, "16 header bytes + 1 need 32");
        assert_eq!(class_log2(16, 8), 5);
        assert_eq!(class_log2(17, 16), 6);
        assert_eq!(
            class_log2(8, 4096),
            13,
            "a 4096-byte header for 4096 alignment"
        );
        assert_eq!(class_log2(16 * 1024, 1), 15);
        assert_eq!(class_log2(32 * 1024, 1), 16);
        let large = super::super::LARGE;
        assert!(
            class_log2(large - 1, large / 2) <= MAX_CLASS_LOG2,
            "every layout under LARGE has a class"
        );
        assert!(class_log2(1 << MAX_CLASS_LOG2, 1) > MAX_CLASS_LOG2);
    }

    /// A region over a range of the test's own (the sampler's range belongs to the process's sampler; two
    /// bookkeepers must never share it).
    fn private_region() -> Region {
        // SAFETY: a fresh anonymous PROT_NONE mapping, one chunk larger than SIZE so it can be aligned.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE + CHUNK,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let mut r = Region::new();
        r.base = (p as usize).next_multiple_of(CHUNK);
        r.state = State::Reserved;
        r
    }

    #[test]
    fn blocks_are_aligned_headed_reused_and_inside_their_range() {
        let mut r = private_region();
        let range = r.base..r.base + SIZE;
        let inside = |p: *mut u8| range.contains(&(p as usize));
        let a = r.alloc(40, 8, 7).unwrap();
        let b = r.alloc(48, 8, 9).unwrap();
        assert!(inside(a) && inside(b));
        assert_eq!(
            a as usize % 64,
            16,
            "a 64-byte block, the caller's bytes after 16 header bytes"
        );
        assert_eq!(
            b as usize,
            a as usize + 64,
            "fresh blocks of a class are contiguous"
        );
        // SAFETY: a and b are live blocks of `r`, writable for their sizes.
        unsafe {
            assert_eq!((r.site_of(a), r.site_of(b)), (7, 9));
            // The caller's bytes do not reach the next block's header.
            std::ptr::write_bytes(a, 0xab, 40);
            assert_eq!(r.site_of(b), 9);
            assert_eq!(r.free(a), 7, "free returns the block's site");
        }
        let c = r.alloc(33, 1, 11).unwrap();
        assert_eq!(c, a, "last freed, first reused");
        // SAFETY: c is live.
        assert_eq!(unsafe { r.site_of(c) }, 11);
        let aligned = r.alloc(100, 4096, 3).unwrap();
        assert_eq!(aligned as usize % 4096, 0, "alignment kept past the header");
        // SAFETY: live.
        assert_eq!(unsafe { r.site_of(aligned) }, 3);
        let big = r.alloc(30_000, 1, 1).unwrap();
        assert!(inside(big));
        assert!(
            r.alloc(1 << MAX_CLASS_LOG2, 1, 1).is_none(),
            "no class that large"
        );
        assert_eq!(r.chunk_bytes(), 3 * CHUNK, "one chunk for each class used");
        // A free goes to the class of the block's chunk, whatever its size was: the next block of that
        // class is the one just freed, and other classes are untouched.
        // SAFETY: live blocks, not used again.
        unsafe {
            assert_eq!(r.free(aligned), 3);
            assert_eq!(r.free(big), 1);
        }
        let block = aligned as usize - 4096;
        assert_eq!(r.alloc(5000, 1, 4).map(|p| p as usize), Some(block + 16));
        assert_eq!(r.alloc(20_000, 8, 5), Some(big));
    }

    #[test]
    fn a_used_up_range_says_no_and_keeps_serving_its_free_lists() {
        let mut r = private_region();
        let mut last = None;
        while let Some(p) = r.alloc(30_000, 1, 3) {
            last = Some(p);
        }
        assert_eq!(
            r.chunk_bytes(),
            SIZE,
            "every chunk was handed out before refusing"
        );
        assert!(
            r.alloc(1, 1, 3).is_none(),
            "no chunk left for another class"
        );
        let last = last.unwrap();
        // SAFETY: `last` is a live block of `r`.
        unsafe { r.free(last) };
        assert_eq!(r.alloc(30_000, 1, 5), Some(last));
    }

    #[test]
    fn the_samplers_range_is_reserved_in_the_window_or_reported_unavailable() {
        // This test binary has no sampling allocator, so this is the only region that reserves.
        let mut r = Region::new();
        match r.alloc(4, 1, 1) {
            Some(p) => {
                assert!(contains(p as usize) && owns(p as usize));
                assert_eq!(base(), Some(r.base));
                assert!(!owns(r.base + SIZE) && !owns(r.base - 1));
            }
            None => assert!(r.state == State::Unavailable && base().is_none()),
        }
    }
}
