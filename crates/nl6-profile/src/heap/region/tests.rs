use super::*;

#[test]
fn classes_leave_room_for_the_header_and_honour_alignment() {
    assert_eq!(class_log2(1, 1), Some(5), "16 header bytes + 1 need 32");
    assert_eq!(class_log2(16, 8), Some(5));
    assert_eq!(class_log2(17, 16), Some(6));
    assert_eq!(
        class_log2(8, 4096),
        Some(13),
        "a 4096-byte header for 4096 alignment"
    );
    assert_eq!(class_log2(32 * 1024, 1), Some(16));
    assert_eq!(class_log2(usize::MAX - 8, 1), None);
}

/// A region over a range of the test's own (the process's range belongs to its sampler; two
/// bookkeepers must never share it).
fn private_region(len: usize) -> Region {
    let mut r = Region::new();
    (r.base, r.len, r.state) = (reserve(len).expect("address space"), len, State::Reserved);
    r
}

#[test]
fn blocks_are_aligned_headed_reused_and_inside_their_range() {
    let mut r = private_region(1 << 30);
    let range = r.base..r.base + r.len;
    let inside = |p: *mut u8| range.contains(&(p as usize));
    let site_of = |p: *mut u8, align: usize| {
        // SAFETY: a live block of `r`; its header is readable.
        unsafe { (block_of(p, align) as *const u16).read() }
    };
    let a = r.alloc(40, 8, false).unwrap();
    let b = r.alloc(48, 8, false).unwrap();
    // SAFETY: live blocks of `r`.
    unsafe { (set_site(a, 8, 7), set_site(b, 8, 9)) };
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
    assert_eq!((site_of(a, 8), site_of(b, 8)), (7, 9));
    // SAFETY: a is live and writable for 40 bytes; then freed and not used again.
    unsafe {
        std::ptr::write_bytes(a, 0xab, 40);
        assert_eq!(
            site_of(b, 8),
            9,
            "the caller's bytes do not reach the next header"
        );
        assert_eq!(r.free(a, 8), 7, "free returns the block's site");
    }
    let c = r.alloc(33, 1, true).unwrap();
    assert_eq!(c, a, "last freed, first reused");
    // SAFETY: c is live for 33 bytes.
    assert!(
        unsafe { std::slice::from_raw_parts(c, 33) }
            .iter()
            .all(|&x| x == 0),
        "zeroed on reuse"
    );
    for align in [4096, 1 << 16, 1 << 21] {
        let p = r.alloc(100, align, false).unwrap();
        assert_eq!(
            p as usize % align,
            0,
            "alignment {align} kept past the header"
        );
        assert!(inside(p));
        // SAFETY: live; freed once.
        unsafe { (set_site(p, align, 3), assert_eq!(r.free(p, align), 3)) };
    }
    assert!(
        r.alloc(1, 1 << 31, false).is_none(),
        "alignment past the range's own"
    );
    assert!(
        r.alloc(1 << 40, 8, false).is_none(),
        "larger than any range"
    );
}

#[test]
fn the_gap_an_alignment_skips_serves_smaller_classes() {
    let mut r = private_region(1 << 30);
    let small = r.alloc(10, 1, false).unwrap();
    let big = r.alloc(100_000, 1, false).unwrap();
    assert_eq!(
        big as usize - 16,
        r.base + (1 << 17),
        "a 128 KiB block at the next 128 KiB"
    );
    // The 32 bytes after `small` up to 128 KiB went to the free lists: the next small blocks come
    // from there, not from past `big`.
    let next = r.alloc(10, 1, false).unwrap();
    assert!((next as usize) < big as usize && next != small);
    assert_eq!(r.frontier, 1 << 18);
}

#[test]
fn large_blocks_give_their_pages_back_and_come_back_zeroed() {
    let mut r = private_region(1 << 30);
    let size = 3 << 20;
    let p = r.alloc(size, 8, false).unwrap();
    // SAFETY: live for `size` bytes; then freed, and the next block is checked before use.
    unsafe {
        std::ptr::write_bytes(p, 0x5a, size);
        r.free(p, 8);
    }
    let q = r.alloc(size, 8, true).unwrap();
    assert_eq!(q, p, "the class's freed block is reused");
    // SAFETY: live for `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(q, size) };
    assert!(
        bytes.iter().all(|&x| x == 0),
        "a reused large block, zeroed"
    );
}

/// Resident pages of `[start, start + len)` (`mincore`).
fn resident_pages(start: usize, len: usize) -> usize {
    let page = page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: the range is page-aligned and mapped (ours); `vec` has one byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn a_freed_block_past_the_budget_keeps_no_page_resident() {
    let mut r = private_region(1 << 30);
    let page = page_size();
    // Within the budget a freed block keeps its pages, for the next block of its class.
    let kept = r.alloc(60 << 10, 8, false).unwrap();
    // SAFETY: live for 60 KiB; then freed and not used.
    unsafe {
        std::ptr::write_bytes(kept, 1, 60 << 10);
        r.free(kept, 8);
    }
    assert!(resident_pages(block_of(kept, 8), 64 << 10) > 1);
    assert_eq!(r.kept, 64 << 10);
    // Past it, none: not even the header's (the block waits in the released table).
    let mut freed = Vec::new();
    for size in [2 * page, 60 << 10, 200 << 10, 1 << 20, (4 << 20) - 64] {
        let p = r.alloc(size, 8, false).unwrap();
        let block = block_of(p, 8);
        let class = size.checked_add(16).unwrap().next_power_of_two();
        // SAFETY: live for `size` bytes; then freed and not used.
        unsafe {
            std::ptr::write_bytes(p, 0x5a, size);
            assert!(resident_pages(block, class) >= size / page);
            r.kept = KEEP_FREED;
            r.free(p, 8);
        }
        assert_eq!(
            resident_pages(block, class),
            0,
            "a freed {size}-byte block (class {class}) keeps no page"
        );
        freed.push((size, p));
    }
    // Each class is served from its released blocks, zeroed, before any fresh block is carved.
    let frontier = r.frontier;
    for (size, p) in freed.into_iter().rev() {
        let q = r.alloc(size, 8, true).unwrap();
        // SAFETY: live for `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(q, size) };
        assert!(
            bytes.iter().all(|&x| x == 0),
            "{size}: {q:?} (freed {p:?}) zeroed"
        );
    }
    assert_eq!(
        r.frontier, frontier,
        "no fresh block while released ones wait"
    );
}

#[test]
fn past_the_released_table_a_freed_block_keeps_its_header_page_only() {
    let mut r = private_region(1 << 30);
    let size = 3 * page_size();
    let class = 4 * page_size();
    let blocks: Vec<*mut u8> = (0..released::PER_CLASS + 2)
        .map(|_| r.alloc(size, 8, false).unwrap())
        .collect();
    r.kept = KEEP_FREED;
    for &p in &blocks {
        // SAFETY: live for `size` bytes; then freed and not used.
        unsafe {
            std::ptr::write_bytes(p, 0x5a, size);
            r.free(p, 8);
        }
    }
    let resident: Vec<usize> = blocks
        .iter()
        .map(|&p| resident_pages(block_of(p, 8), class))
        .collect();
    assert_eq!(
        resident.iter().filter(|&&n| n == 0).count(),
        released::PER_CLASS,
        "{resident:?}"
    );
    assert_eq!(
        resident.iter().filter(|&&n| n == 1).count(),
        2,
        "{resident:?}"
    );
    let mut again: Vec<usize> = (0..blocks.len())
        .map(|_| r.alloc(size, 8, true).unwrap() as usize)
        .collect();
    let mut want: Vec<usize> = blocks.iter().map(|&p| p as usize).collect();
    again.sort();
    want.sort();
    assert_eq!(
        again, want,
        "every freed block is reused, from the table or the list"
    );
}

#[test]
fn the_gap_an_alignment_skips_stays_untouched() {
    let mut r = private_region(1 << 30);
    let _small = r.alloc(10, 1, false).unwrap();
    let big = r.alloc((1 << 20) - 64, 8, false).unwrap();
    let gap_end = block_of(big, 8);
    // [8 KiB, 1 MiB) of the gap went to the free lists as blocks larger than a page: no page of it
    // is touched until a block is handed out.
    let from = r.base + 2 * page_size();
    assert_eq!(resident_pages(from, gap_end - from), 0);
}

#[test]
fn a_used_up_range_says_no_and_keeps_serving_its_free_lists() {
    let mut r = private_region(1 << 30);
    let first = r.alloc((1 << 29) - 64, 8, false).unwrap();
    assert_eq!(first as usize, r.base + 16);
    assert!(
        r.alloc(1 << 29, 8, false).is_none(),
        "no room for a 1 GiB class"
    );
    let other = r.alloc((1 << 29) - 64, 8, false).unwrap();
    assert!(r.alloc((1 << 29) - 64, 8, false).is_none(), "used up");
    assert!(r.alloc(1, 1, false).is_none(), "nothing left for any class");
    // SAFETY: live blocks, not used again.
    unsafe { r.free(other, 8) };
    assert!(
        r.alloc(1000, 8, false).is_none(),
        "a freed block is not split for another class"
    );
    assert_eq!(r.alloc((1 << 29) - 64, 8, false), Some(other));
}

#[test]
fn a_small_range_is_aligned_to_its_length_and_places_blocks_up_to_it() {
    let len = SMALLEST;
    let mut r = private_region(len);
    assert_eq!(r.base % len, 0, "aligned to its own length");
    let a = r.alloc(4000, 4096, false).expect("a page-aligned block");
    assert_eq!(a as usize % 4096, 0);
    assert!(r.alloc(len, 8, false).is_none(), "larger than the range");
    assert!(
        r.alloc(8, len * 2, false).is_none(),
        "an alignment over the range's"
    );
}

#[test]
fn the_samplers_range_is_published_for_owns() {
    // This test binary has no sampling allocator, so this is the only region that publishes.
    let mut r = Region::new();
    let p = r.alloc(4, 1, false).expect("a range of some size");
    assert!(owns(p as usize));
    assert_eq!(range(), Some(r.base..r.base + r.len));
    assert!(!owns(r.base + r.len) && !owns(r.base - 1) && !owns(0) && !owns(usize::MAX));
    assert_eq!(outcome(), Outcome::Full, "no limit here: the full range");
}
