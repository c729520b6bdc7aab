//! Stack bounds `[low, high)` of each thread, learnt outside signal handlers and read by them lock-free.
//!
//! Two sources: the thread's own cache (a `const` thread-local without destructor), filled by the thread
//! itself outside any handler — at birth in `threads::spawn_recorded`, when it starts a CPU profile or
//! walks its own stack — from `pthread_getattr_np`; and, for threads that never fill it (foreign threads,
//! the main thread), the foreign table learnt by the CPU collector from `/proc/self/maps` (the mapping
//! that holds a sample's `RSP`). A handler never asks libc: a thread with neither yields its leaf only,
//! and the collector learns its bounds from that sample.
//!
//! The main thread's stack grows on demand, so its low bound is taken `RLIMIT_STACK` below the top (as
//! glibc reports it), not where the mapping ends today.
//!
//! What each source can know. From inside the thread (its own cache), libc gives the exact stack, and
//! the cache dies with the thread, so no later thread can read it. From outside (the foreign table), the
//! collector sees only the mapping that held a sample's `RSP`: it starts above the guard page, but it may
//! be merged with a neighbour above, and the thread may be gone and its tid given to another thread
//! before the next rescan forgets the entry. So a handler takes a foreign entry only when the thread
//! pointer (`%fs:0`, the block libc keeps for each thread, which glibc and musl place at the top of the
//! thread's own stack mapping, above the stack) lies inside it, and stops the walk there: an entry
//! learnt for another thread's stack is refused (its thread block is elsewhere), and the part of the
//! mapping above the thread block is never read. The main thread (its block is not on its stack, and its
//! tid is the process's for the process's life) takes its entry as it is.
//!
//! Writes to the cache are ordered for the handler with compiler fences: low, then high (high ≠ 0 is the
//! "valid" mark), so a handler interrupting the thread between the two stores sees high = 0 (unknown).
//! The two words a handler reads are atomics (Relaxed loads and stores: plain `mov`s), so the handler's
//! read of what the thread writes is not a data race by the language's rules.
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicUsize, Ordering};

use super::foreign::{foreign_bounds, main_tid};
use super::MAX_STACK_SPAN;
use crate::maps::{self, MapsEntry};

thread_local! {
    /// The calling thread's stack low bound (valid once `HIGH` is > 1).
    static LOW: AtomicUsize = const { AtomicUsize::new(0) };
    /// The calling thread's stack top; 0 = not known yet, 1 = could not be known.
    static HIGH: AtomicUsize = const { AtomicUsize::new(0) };
    /// Set while this thread asks libc for its bounds (a nested allocation must not re-enter).
    static FILLING: Cell<bool> = const { Cell::new(false) };
}

/// Where a handler found its thread's stack bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bounds {
    /// `[low, high)`: the walk may read there.
    Known(u64, u64),
    /// Unknown for this thread (`tid`): walk nothing; the collector may learn them from the sample.
    Unknown(i32),
}

/// The main thread's lowest possible stack address given its top: `RLIMIT_STACK` below it (capped at
/// [`MAX_STACK_SPAN`]).
fn main_stack_low(high: u64) -> u64 {
    // SAFETY: getrlimit writes one struct we own.
    let limit = unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_STACK, &mut r) == 0 {
            r.rlim_cur as u64
        } else {
            MAX_STACK_SPAN
        }
    };
    high.saturating_sub(limit.min(MAX_STACK_SPAN))
}

/// Asks libc for the calling thread's stack bounds (None on failure). Never from a handler.
fn query_stack_bounds() -> Option<(u64, u64)> {
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
    #[cfg(target_os = "linux")]
    query_linux_stack_bounds()
}

#[cfg(target_os = "linux")]
fn query_linux_stack_bounds() -> Option<(u64, u64)> {
    // SAFETY: pthread_self is always valid; attr is initialised by pthread_getattr_np before use and
    // destroyed after; pthread_attr_getstack writes two out-values we own.
    let (addr, size) = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return None;
        }
        (addr as u64, size as u64)
    };
    let high = addr.checked_add(size)?;
    // SAFETY: getpid has no preconditions.
    let main = super::super::signal::gettid() == unsafe { libc::getpid() };
    let low = if main {
        addr.min(main_stack_low(high))
    } else {
        addr
    };
    Some((low, high))
}

/// Stores the calling thread's bounds for its handlers: low first, then high (the valid mark), each
/// fenced so neither store is reordered past the other or removed.
fn publish_own(low: usize, high: usize) {
    compiler_fence(Ordering::SeqCst);
    LOW.with(|l| l.store(low, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    HIGH.with(|h| h.store(high, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

/// Fills the calling thread's cached bounds (outside any signal handler) and returns its stack top (0 if
/// it cannot be known). Cheap after the first call.
pub(crate) fn init_thread_bounds() -> usize {
    own_bounds().map_or(0, |(_, high)| high as usize)
}

/// The calling thread's bounds, asking libc on the first call (outside handlers only).
pub(crate) fn own_bounds() -> Option<(u64, u64)> {
    let high = HIGH.with(|h| h.load(Ordering::Relaxed));
    if high > 1 {
        return Some((LOW.with(|l| l.load(Ordering::Relaxed)) as u64, high as u64));
    }
    if high == 1 || FILLING.with(|f| f.replace(true)) {
        return None;
    }
    let found = query_stack_bounds();
    match found {
        Some((low, high)) => publish_own(low as usize, high as usize),
        None => publish_own(0, 1),
    }
    FILLING.with(|f| f.set(false));
    found
}

/// The calling thread's stack bounds for use inside a signal handler: its own cache, else the foreign
/// table. Async-signal-safe: two thread-local loads, then atomic loads; never a libc call.
#[inline]
pub(crate) fn bounds_in_handler() -> Bounds {
    let high = HIGH.with(|h| h.load(Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    if high > 1 {
        return Bounds::Known(LOW.with(|l| l.load(Ordering::Relaxed)) as u64, high as u64);
    }
    let tid = super::super::signal::gettid();
    match foreign_bounds(tid).and_then(|(low, high)| {
        foreign_entry_for_this_thread(tid, main_tid(), super::arch::thread_pointer(), low, high)
    }) {
        Some((low, high)) => Bounds::Known(low, high),
        None => Bounds::Unknown(tid),
    }
}

/// The walk's bounds a foreign entry `[low, high)` gives the thread `tid` whose thread pointer is `tp`
/// (pure; the rule is in the module doc): cut at `tp` when `tp` lies inside, refused when it does not,
/// as it is for the main thread.
#[inline]
pub(crate) fn foreign_entry_for_this_thread(
    tid: i32,
    main: i32,
    tp: u64,
    low: u64,
    high: u64,
) -> Option<(u64, u64)> {
    if tid == main {
        return Some((low, high));
    }
    (low < tp && tp <= high).then_some((low, tp))
}

/// `[low, high)` of the readable-writable mapping containing `addr` among `maps` (pure); for the main
/// thread's `[stack]` the low bound is `RLIMIT_STACK` below its top (it grows on demand).
pub(crate) fn mapping_bounds(maps: &[MapsEntry], addr: u64) -> Option<(u64, u64)> {
    let e = maps::writable_at(maps, addr)?;
    Some(if e.path == "[stack]" {
        (e.start.min(main_stack_low(e.end)), e.end)
    } else {
        (e.start, e.end)
    })
}

/// The walk's bounds for `rsp`: `[rsp, high)` when `rsp` lies in `[low, high)` no more than
/// [`MAX_STACK_SPAN`] below the top, else None (leaf only). A sample taken on another stack — the
/// sigaltstack, a coroutine's — or with a stale top fails this, so no walk can cross into another
/// mapping.
#[inline]
pub(crate) fn walk_range(rsp: u64, low: u64, high: u64) -> Option<(u64, u64)> {
    (low <= rsp && rsp < high && high - rsp <= MAX_STACK_SPAN).then_some((rsp, high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_for_stack_mappings() {
        let maps = &maps::parse(
            "5555-6000 r--p 00000000 08:01 12 /bin/nl6\n\
             6000-9000 r-xp 00001000 08:01 12 /bin/nl6\n\
             7000000-7100000 rw-p 00000000 00:00 0 \n\
             7ff0000000-7ff8000000 rw-p 00000000 00:00 0 [stack]\n",
        );
        assert_eq!(
            mapping_bounds(maps, 0x7080000),
            Some((0x7000000, 0x7100000))
        );
        let (lo, hi) = mapping_bounds(maps, 0x7ff4000000).unwrap();
        assert_eq!(hi, 0x7ff8000000);
        assert!(
            lo <= 0x7ff0000000,
            "the main stack may grow below its mapping"
        );
        assert_eq!(mapping_bounds(maps, 0x6500), None, "code is not a stack");
    }

    #[test]
    fn rsp_must_lie_inside_both_bounds() {
        let (lo, hi) = (0x7f00_0000_0000u64, 0x7f00_0010_0000u64);
        assert_eq!(walk_range(lo + 64, lo, hi), Some((lo + 64, hi)));
        assert_eq!(
            walk_range(lo - 8, lo, hi),
            None,
            "below the stack: sigaltstack"
        );
        assert_eq!(walk_range(hi, lo, hi), None, "at the top: nothing to walk");
        assert_eq!(walk_range(hi + 4096, lo, hi), None, "above: another stack");
        let far = hi - MAX_STACK_SPAN - 8;
        assert_eq!(walk_range(far, 0, hi), None, "too far below the top");
    }

    #[test]
    fn a_foreign_entry_holds_only_for_the_thread_whose_block_it_holds() {
        let (main, me) = (100, 200);
        let (lo, hi) = (0x7f00_0000_0000u64, 0x7f00_0080_0000u64);
        let tp = hi - 0x2000;
        assert_eq!(
            foreign_entry_for_this_thread(me, main, tp, lo, hi),
            Some((lo, tp)),
            "cut at the thread block: the mapping above it is never walked"
        );
        assert_eq!(
            foreign_entry_for_this_thread(me, main, hi + 0x10_0000, lo, hi),
            None,
            "another thread's stack (a tid reused before the rescan forgot the entry)"
        );
        assert_eq!(foreign_entry_for_this_thread(me, main, lo, lo, hi), None);
        assert_eq!(
            foreign_entry_for_this_thread(main, main, 0x5555_0000, lo, hi),
            Some((lo, hi)),
            "the main thread's block is not on its stack"
        );
    }

    /// The real thing: an entry learnt (from the maps) for one thread's stack, under the tid of another
    /// thread (what a stale entry is after the tid was reused), bounds nothing; the thread's own mapping
    /// does, cut at its thread block.
    #[test]
    fn a_stale_entry_for_another_stack_is_refused_and_the_own_mapping_is_cut() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let parked = std::thread::spawn(move || {
            let local = std::hint::black_box(0u8);
            tx.send(&local as *const u8 as u64).unwrap();
            let _ = done_rx.recv();
        });
        let other_rsp = rx.recv().unwrap();
        std::thread::spawn(move || {
            let tid = super::super::super::signal::gettid();
            let maps = maps::read_self().unwrap();
            let (olo, ohi) = mapping_bounds(&maps, other_rsp).expect("the other stack's mapping");
            assert!(super::super::set_foreign_bounds(tid, olo, ohi));
            let got = bounds_in_handler();
            super::super::forget_foreign(tid);
            assert_eq!(
                got,
                Bounds::Unknown(tid),
                "another thread's stack taken as mine"
            );
            let local = std::hint::black_box(0u8);
            let here = &local as *const u8 as u64;
            let (lo, hi) = mapping_bounds(&maps, here).expect("this stack's mapping");
            assert!(super::super::set_foreign_bounds(tid, lo, hi));
            let got = bounds_in_handler();
            super::super::forget_foreign(tid);
            let tp = super::super::arch::thread_pointer();
            assert_eq!(
                got,
                Bounds::Known(lo, tp),
                "{lo:#x}..{hi:#x}, thread block {tp:#x}"
            );
            assert!(here < tp && tp < hi);
        })
        .join()
        .unwrap();
        let _ = done_tx.send(());
        parked.join().unwrap();
    }

    #[test]
    fn own_bounds_contain_this_frame() {
        std::thread::spawn(|| {
            let local = std::hint::black_box(0u8);
            let here = &local as *const u8 as u64;
            let (lo, hi) = own_bounds().expect("bounds");
            assert!(lo < here && here < hi, "{lo:#x} {here:#x} {hi:#x}");
            assert_eq!(bounds_in_handler(), Bounds::Known(lo, hi));
        })
        .join()
        .unwrap();
    }
}
