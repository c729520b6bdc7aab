//! The region that holds sampled small blocks: how every free learns, without reading memory, that its block
//! was not sampled.
//!
//! What it provides: one range of address space at a fixed address, `[BASE, BASE + SIZE)`, reserved on the
//! first sample (`PROT_NONE`, `MAP_FIXED_NOREPLACE`) and made writable a MiB at a time, from which the heap
//! sampler takes every sampled block smaller than [`super::LARGE`]. Because the range is a compile-time
//! constant, [`contains`] is a shift and a compare of the pointer: the test that every `dealloc` makes costs
//! no load, no multiply and no branch miss. Blocks come in power-of-two classes (16 B to 64 KiB), carved
//! from 64 KiB chunks that each serve one class, so a block is aligned to its class; its last two bytes (the
//! footer) hold its site number, so a free finds its site without a table. Freed blocks go on their class's
//! free list, linked through their first word, and are reused last-in first-out (the block a free just
//! touched is the next one handed out).
//!
//! What it never does: allocate, lock (the caller serialises every call: the sampler's site mutex), hand out
//! memory outside the range, or give memory back (a chunk keeps its class; freed blocks wait for reuse). If
//! the range cannot be reserved (already mapped, a kernel older than 4.17 that takes the address only as a
//! hint, an address-space limit) or is used up, [`Region::alloc`] says no and the sampler leaves the block to
//! the inner allocator, counted as untracked. A pointer in the range is trusted as the region's only while
//! [`reserved`] says the range is ours, so memory someone else mapped there is never mistaken for it.
use std::sync::atomic::{AtomicBool, Ordering};

/// The range's start: far below where Linux places mappings (the PIE image near `0x55..`, `mmap` downwards
/// from near `0x7f..`), aligned to [`SIZE`] so that [`contains`] is one shift and one compare.
pub const BASE: usize = 0x2b6c_0000_0000;
/// log2 of the range's size: 1 GiB of address space (only what sampled blocks use becomes memory).
const SIZE_LOG2: u32 = 30;
pub const SIZE: usize = 1 << SIZE_LOG2;
/// Smallest class: 16 B (the alignment every allocator gives).
const MIN_CLASS_LOG2: u32 = 4;
/// Largest class: 64 KiB, room for a block just under [`super::LARGE`] plus its footer.
const MAX_CLASS_LOG2: u32 = 16;
const CLASSES: usize = (MAX_CLASS_LOG2 - MIN_CLASS_LOG2 + 1) as usize;
/// A chunk serves one class; as large as the largest class, so every class is aligned within it.
const CHUNK: usize = 1 << MAX_CLASS_LOG2;
/// Made writable at a time (one `mprotect` per this many bytes of chunks).
const COMMIT: usize = 1 << 20;
/// Bytes at a block's end that hold its site number.
pub const FOOTER: usize = 2;

const _: () = assert!(BASE.trailing_zeros() >= SIZE_LOG2 && SIZE.is_multiple_of(COMMIT));
const _: () = assert!(COMMIT.is_multiple_of(CHUNK));
const _: () = assert!(super::LARGE - 1 + FOOTER <= 1 << MAX_CLASS_LOG2);

/// True once the range is reserved by this process (and from then on for the process's life).
static RESERVED: AtomicBool = AtomicBool::new(false);

/// Whether `ptr` lies in the range. A constant test: no memory is read.
#[inline(always)]
pub fn contains(ptr: usize) -> bool {
    ptr >> SIZE_LOG2 == BASE >> SIZE_LOG2
}

/// Whether the range is ours: only then is a pointer in it one of the region's blocks.
pub fn reserved() -> bool {
    RESERVED.load(Ordering::Acquire)
}

/// The class (log2 of the block size) of a block for `size` bytes at `align`, footer included; the same
/// answer at allocation and at free, since both see the same layout.
pub fn class_log2(size: usize, align: usize) -> u32 {
    let need = (size + FOOTER).max(align).max(1 << MIN_CLASS_LOG2);
    need.next_power_of_two().trailing_zeros()
}

/// Where a block's footer is.
fn footer(block: usize, class_log2: u32) -> usize {
    block + (1usize << class_log2) - FOOTER
}

/// The site number stored in the footer of the block at `ptr`, allocated for `size` at `align`.
///
/// # Safety
/// `ptr` is a live block of the region, allocated with this size and alignment.
pub unsafe fn site_of(ptr: usize, size: usize, align: usize) -> u16 {
    // SAFETY: the footer lies inside the block (its class has room for it), which is mapped and ours.
    unsafe { std::ptr::read_unaligned(footer(ptr, class_log2(size, align)) as *const u16) }
}

/// Where the range stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not asked for yet.
    Unreserved,
    /// Reserved at `BASE`.
    Reserved,
    /// Could not be reserved: sampled small blocks stay with the inner allocator.
    Unavailable,
}

/// The region's bookkeeping: one per process, kept behind the sampler's site mutex.
pub struct Region {
    /// Where this region's range starts: [`BASE`] for the sampler's (tests use a range of their own).
    base: usize,
    state: State,
    /// Per class: the head of its free list (0 = empty).
    free: [usize; CLASSES],
    /// Per class: the next never-used block of its current chunk, and that chunk's end.
    fresh: [(usize, usize); CLASSES],
    /// Offset of the first chunk not yet given to a class.
    next_chunk: usize,
    /// Offset up to which the range is writable.
    committed: usize,
}

impl Default for Region {
    fn default() -> Self {
        Self::new()
    }
}

impl Region {
    pub const fn new() -> Self {
        Region {
            base: BASE,
            state: State::Unreserved,
            free: [0; CLASSES],
            fresh: [(0, 0); CLASSES],
            next_chunk: 0,
            committed: 0,
        }
    }

    /// A block of class `class_log2` with `site` in its footer, or `None` (range unavailable or used up).
    pub fn alloc(&mut self, class_log2: u32, site: u16) -> Option<*mut u8> {
        if !(MIN_CLASS_LOG2..=MAX_CLASS_LOG2).contains(&class_log2) || !self.ensure_reserved() {
            return None;
        }
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        let block = if self.free[c] != 0 {
            let block = self.free[c];
            // SAFETY: a free block of ours holds the next free block's address in its first word.
            self.free[c] = unsafe { (block as *const usize).read() };
            block
        } else {
            let (next, end) = self.fresh[c];
            let next = if next < end {
                next
            } else {
                let chunk = self.take_chunk()?;
                self.fresh[c] = (chunk, chunk + CHUNK);
                chunk
            };
            self.fresh[c].0 = next + (1 << class_log2);
            next
        };
        // SAFETY: the block is ours, writable and at least 16 bytes; the footer lies inside it.
        unsafe { std::ptr::write_unaligned(footer(block, class_log2) as *mut u16, site) };
        Some(block as *mut u8)
    }

    /// Returns a block to its class's free list.
    ///
    /// # Safety
    /// `ptr` came from [`Region::alloc`] with `class_log2` and is not used after this call.
    pub unsafe fn free(&mut self, ptr: *mut u8, class_log2: u32) {
        let c = (class_log2 - MIN_CLASS_LOG2) as usize;
        // SAFETY: the block is ours and no longer in use; its first word links it into the list.
        unsafe { (ptr as *mut usize).write(self.free[c]) };
        self.free[c] = ptr as usize;
    }

    /// Bytes of the range in use by chunks (given to a class), for tests and figures.
    pub fn chunk_bytes(&self) -> usize {
        self.next_chunk
    }

    /// The next unused chunk, made writable if needed.
    fn take_chunk(&mut self) -> Option<usize> {
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
        let chunk = self.base + self.next_chunk;
        self.next_chunk += CHUNK;
        Some(chunk)
    }

    /// Reserves the range on first use; true while it is ours.
    fn ensure_reserved(&mut self) -> bool {
        if self.state == State::Unreserved {
            self.state = if reserve() {
                RESERVED.store(true, Ordering::Release);
                State::Reserved
            } else {
                State::Unavailable
            };
        }
        self.state == State::Reserved
    }
}

/// Asks for `[BASE, BASE + SIZE)` as inaccessible, unbacked address space; true when the kernel gave exactly
/// that range.
fn reserve() -> bool {
    // SAFETY: a new anonymous mapping that must not replace anything (MAP_FIXED_NOREPLACE); no memory of
    // ours is touched.
    let p = unsafe {
        libc::mmap(
            BASE as *mut libc::c_void,
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
        return false;
    }
    if p as usize != BASE {
        // A kernel that does not know MAP_FIXED_NOREPLACE took the address as a hint and put the mapping
        // elsewhere: give it back.
        // SAFETY: `p` is the mapping just made, of SIZE bytes, and nothing uses it.
        unsafe { libc::munmap(p, SIZE) };
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_is_exactly_the_range() {
        assert!(contains(BASE) && contains(BASE + SIZE - 1));
        assert!(!contains(BASE - 1) && !contains(BASE + SIZE));
        assert!(!contains(0) && !contains(usize::MAX));
    }

    #[test]
    fn classes_leave_room_for_the_footer_and_honour_alignment() {
        assert_eq!(class_log2(1, 1), 4);
        assert_eq!(class_log2(14, 8), 4);
        assert_eq!(class_log2(15, 8), 5, "15 + 2 footer bytes need 32");
        assert_eq!(class_log2(16, 16), 5);
        assert_eq!(class_log2(8, 4096), 12, "alignment sets the class");
        assert_eq!(class_log2(16 * 1024, 1), 15);
        assert_eq!(class_log2(super::super::LARGE - 1, 1), 16);
        let large = super::super::LARGE;
        assert!(
            class_log2(large - 1, large / 2) <= MAX_CLASS_LOG2,
            "every layout under LARGE has a class"
        );
        assert!(class_log2(large * 2, 1) > MAX_CLASS_LOG2);
    }

    /// A region over a range of the test's own (the sampler's range at BASE belongs to the process's
    /// sampler; two bookkeepers must never share it).
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
    fn blocks_are_aligned_footed_reused_and_inside_their_range() {
        let mut r = private_region();
        let range = r.base..r.base + SIZE;
        let inside = |p: *mut u8| range.contains(&(p as usize));
        let a = r.alloc(6, 7).unwrap();
        let b = r.alloc(6, 9).unwrap();
        assert!(inside(a) && inside(b));
        assert_eq!(a as usize % 64, 0);
        assert_eq!(
            b as usize,
            a as usize + 64,
            "fresh blocks of a class are contiguous"
        );
        // SAFETY: both are live blocks of class 6 (sizes up to 62 at align 1).
        unsafe {
            assert_eq!(site_of(a as usize, 40, 1), 7);
            assert_eq!(site_of(b as usize, 62, 1), 9);
            // The block is writable memory up to its footer.
            std::ptr::write_bytes(a, 0xab, 62);
            assert_eq!(site_of(a as usize, 40, 1), 7);
            r.free(a, 6);
        }
        let c = r.alloc(6, 11).unwrap();
        assert_eq!(c, a, "last freed, first reused");
        // SAFETY: c is live with class 6.
        assert_eq!(unsafe { site_of(c as usize, 33, 1) }, 11);
        let big = r.alloc(MAX_CLASS_LOG2, 1).unwrap();
        assert!(inside(big));
        assert_eq!(big as usize % CHUNK, 0);
        assert!(r.alloc(MAX_CLASS_LOG2 + 1, 1).is_none());
        assert_eq!(r.chunk_bytes(), 2 * CHUNK);
    }

    #[test]
    fn a_used_up_range_says_no_and_keeps_serving_its_free_lists() {
        let mut r = private_region();
        let mut last = None;
        while let Some(p) = r.alloc(MAX_CLASS_LOG2, 3) {
            last = Some(p);
        }
        assert_eq!(
            r.chunk_bytes(),
            SIZE,
            "every chunk was handed out before refusing"
        );
        assert!(r.alloc(4, 3).is_none(), "no chunk left for another class");
        let last = last.unwrap();
        // SAFETY: `last` is a live block of the largest class.
        unsafe { r.free(last, MAX_CLASS_LOG2) };
        assert_eq!(r.alloc(MAX_CLASS_LOG2, 5), Some(last));
    }

    #[test]
    fn the_samplers_range_is_reserved_at_base_or_reported_unavailable() {
        let mut r = Region::new();
        // The process's own sampler may have reserved BASE already (then this reservation must fail and
        // say so), or this call reserves it; either way nothing outside the range is handed out.
        match r.alloc(4, 1) {
            Some(p) => assert!(contains(p as usize) && reserved()),
            None => assert!(r.state == State::Unavailable),
        }
    }
}
