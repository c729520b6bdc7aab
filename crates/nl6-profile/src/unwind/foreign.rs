//! The foreign stack-bounds table: `tid → [low, high)` for threads whose own cache is empty (threads nl6
//! did not spawn, the main thread), learnt by the CPU collector from `/proc/self/maps` and read by signal
//! handlers.
//!
//! Each entry is two words, both tagged with the tid: `high` (the entry's key, written last on insert and
//! first on forget) and `low`. A reader loads `high`, then `low`, then `high` again, and accepts only when
//! both tags are its tid and `high` did not change, so it never pairs one thread's top with another's
//! bottom.
//!
//! Owns the table and its writer lock; the protocol (one atomic word per entry, who forgets what and when)
//! is the contract in the parent module's doc. Never: allocates, locks or panics on the reading path.
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Slots of the table of stack tops learnt from outside for threads that never filled their own cache.
const FOREIGN_SLOTS: usize = 1024;
/// Probes per lookup/insert in that table.
const FOREIGN_PROBES: usize = 16;
/// Bits of an entry holding the tid: Linux's `PID_MAX_LIMIT` is 2^22, so every tid fits.
const TID_BITS: u32 = 22;
const TID_MASK: u64 = (1 << TID_BITS) - 1;
/// Page shift of a stored top (mapping ends are page-aligned).
const PAGE_SHIFT: u32 = 12;
/// An entry whose thread is gone: tid field 0 (no real tid), non-zero, so probing goes on past it and an
/// insert may reuse it. 0 is an empty slot (probing stops there).
const TOMBSTONE: u64 = 1 << TID_BITS;

/// The one-word entry for `tid → stack_top`, or None when either does not fit (the thread then keeps
/// leaf-only samples): tid in `1..2^22`, top page-aligned and below 2^54.
fn pack_foreign(tid: i32, stack_top: u64) -> Option<u64> {
    let tid = u64::try_from(tid)
        .ok()
        .filter(|t| (1..=TID_MASK).contains(t))?;
    let page = stack_top >> PAGE_SHIFT;
    let fits =
        stack_top != 0 && stack_top.trailing_zeros() >= PAGE_SHIFT && page < 1 << (64 - TID_BITS);
    fits.then_some((page << TID_BITS) | tid)
}

/// `tid → stack top` for threads whose own cache is empty, one `AtomicU64` per entry (see
/// [`pack_foreign`]; the protocol is in the module doc).
static FOREIGN: [AtomicU64; FOREIGN_SLOTS] = [const { AtomicU64::new(0) }; FOREIGN_SLOTS];
/// The low bound of the entry in the same slot of [`FOREIGN`], packed the same way.
static FOREIGN_LOW: [AtomicU64; FOREIGN_SLOTS] = [const { AtomicU64::new(0) }; FOREIGN_SLOTS];
/// The main thread's tid (the process id), stored by the first insert, before any entry exists: a
/// handler reads it only after finding an entry, and never asks the kernel.
static MAIN_TID: AtomicI32 = AtomicI32::new(0);

/// The process's main thread's tid, once an entry was ever inserted (0 before).
#[inline]
pub(crate) fn main_tid() -> i32 {
    MAIN_TID.load(Ordering::Acquire)
}

/// Serialises the table's writers (never taken by a handler).
static FOREIGN_WRITER: Mutex<()> = Mutex::new(());

fn foreign_writer() -> std::sync::MutexGuard<'static, ()> {
    FOREIGN_WRITER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `(high, low)` word pairs `tid` may occupy, in probe order.
fn foreign_probe(tid: i32) -> impl Iterator<Item = (&'static AtomicU64, &'static AtomicU64)> {
    let start = (tid as u32 as usize).wrapping_mul(0x9E37_79B9) % FOREIGN_SLOTS;
    (0..FOREIGN_PROBES).filter_map(move |i| {
        let at = (start + i) % FOREIGN_SLOTS;
        FOREIGN.get(at).zip(FOREIGN_LOW.get(at))
    })
}

fn unpack(word: u64) -> u64 {
    (word >> TID_BITS) << PAGE_SHIFT
}

/// The stack bounds `[low, high)` the collector learnt for `tid`. Async-signal-safe: atomic loads only
/// (the high/low/high protocol in the module doc).
#[inline]
pub(crate) fn foreign_bounds(tid: i32) -> Option<(u64, u64)> {
    let want = u64::try_from(tid).ok()?;
    for (high, low) in foreign_probe(tid) {
        match high.load(Ordering::Acquire) {
            0 => return None,
            h if h & TID_MASK == want => {
                let l = low.load(Ordering::Acquire);
                let same = high.load(Ordering::Acquire) == h;
                return (same && l & TID_MASK == want).then(|| (unpack(l), unpack(h)));
            }
            _ => {}
        }
    }
    None
}

/// The stack top the collector learnt for `tid` (0 = none).
#[cfg(test)]
pub(crate) fn foreign_top(tid: i32) -> u64 {
    foreign_bounds(tid).map_or(0, |(_, high)| high)
}

/// Records `tid`'s stack bounds unless some are recorded already or they do not fit the table; returns
/// whether `tid` now has an entry. Never called from a handler.
pub(crate) fn set_foreign_bounds(tid: i32, low: u64, high: u64) -> bool {
    let (Some(high_word), Some(low_word)) = (
        pack_foreign(tid, high),
        pack_foreign(tid, low.max(1 << PAGE_SHIFT) & !((1 << PAGE_SHIFT) - 1)),
    ) else {
        return false;
    };
    if low >= high {
        return false;
    }
    let _writer = foreign_writer();
    // SAFETY: getpid has no preconditions.
    MAIN_TID.store(unsafe { libc::getpid() }, Ordering::Release);
    if foreign_bounds(tid).is_some() {
        return true;
    }
    match foreign_probe(tid).find(|(h, _)| matches!(h.load(Ordering::Relaxed), 0 | TOMBSTONE)) {
        Some((h, l)) => {
            l.store(low_word, Ordering::Release);
            h.store(high_word, Ordering::Release);
            true
        }
        None => false,
    }
}

/// Records `tid`'s stack top with no known low bound below it (tests and callers that only know the top).
#[cfg(test)]
pub(crate) fn set_foreign_top(tid: i32, stack_top: u64) -> bool {
    set_foreign_bounds(tid, 1 << PAGE_SHIFT, stack_top)
}

/// Forgets `tid`'s entry (its thread exited, or its timer was deleted). Never called from a handler.
pub(crate) fn forget_foreign(tid: i32) {
    let Ok(want) = u64::try_from(tid) else {
        return;
    };
    let _writer = foreign_writer();
    for (high, _) in foreign_probe(tid) {
        let e = high.load(Ordering::Relaxed);
        if e != 0 && e & TID_MASK == want {
            high.store(TOMBSTONE, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_top_table_inserts_finds_and_forgets() {
        let tid = 0x3f_0001;
        assert_eq!(foreign_top(tid), 0);
        assert!(set_foreign_top(tid, 0x7000));
        assert_eq!(foreign_top(tid), 0x7000);
        forget_foreign(tid);
        assert_eq!(foreign_top(tid), 0);
        assert!(set_foreign_top(tid, 0x8000));
        assert_eq!(foreign_top(tid), 0x8000);
        forget_foreign(tid);
        assert_eq!(foreign_top(tid), 0);
        // What does not fit one word is refused rather than truncated.
        assert!(!set_foreign_top(1 << 22, 0x7000), "tid above PID_MAX_LIMIT");
        assert!(!set_foreign_top(tid, 0x7008), "top not page-aligned");
        assert!(!set_foreign_top(tid, 1 << 60), "top beyond user space");
        assert!(!set_foreign_top(0, 0x7000) && !set_foreign_top(-3, 0x7000));
        assert_eq!(foreign_top(tid), 0);
        let top = 0x7fff_ffff_f000;
        assert_eq!(
            pack_foreign(0x3f_ffff, top).map(|w| w & TID_MASK),
            Some(0x3f_ffff)
        );
        assert_eq!(
            pack_foreign(0x3f_ffff, top).map(|w| (w >> TID_BITS) << PAGE_SHIFT),
            Some(top)
        );
    }

    /// Two tids probing the same slot: a reader of one tid racing the writer that forgets it and reuses
    /// its slot for the other tid must get its own top or none, never the other thread's.
    #[test]
    fn a_reader_never_sees_another_threads_top_while_entries_are_reused() {
        let a = 0x2a_0001;
        let start = |t: i32| (t as u32 as usize).wrapping_mul(0x9E37_79B9) % FOREIGN_SLOTS;
        let b = (0x2a_0002..0x3f_ffff)
            .find(|t| start(*t) == start(a))
            .expect("a tid sharing the first probe slot");
        let (top_a, top_b) = (0x7100_0000u64, 0x7200_0000u64);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let got = foreign_top(a);
                    assert!(got == 0 || got == top_a, "tid {a:#x} read top {got:#x}");
                    seen += u64::from(got == top_a);
                }
                seen
            });
            for _ in 0..20_000 {
                set_foreign_top(a, top_a);
                forget_foreign(a);
                set_foreign_top(b, top_b);
                forget_foreign(b);
            }
            stop.store(true, Ordering::Relaxed);
            reader.join().unwrap();
        });
        assert_eq!((foreign_top(a), foreign_top(b)), (0, 0));
    }
}
