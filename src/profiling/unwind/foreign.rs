//! The foreign stack-top table: `tid → stack top` for threads whose own cache is empty (glibc threads nl6
//! did not spawn), learnt by the CPU collector from `/proc/self/maps` and read by signal handlers.
//!
//! Owns the table and its writer lock; the protocol (one atomic word per entry, who forgets what and when)
//! is the contract in the parent module's doc. Never: allocates, locks or panics on the reading path.
use std::sync::atomic::{AtomicU64, Ordering};
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

/// `tid → stack top` for threads whose own cache is empty (glibc threads nl6 did not spawn), one
/// `AtomicU64` per entry (see [`pack_foreign`]; the protocol is in the module doc).
static FOREIGN: [AtomicU64; FOREIGN_SLOTS] = [const { AtomicU64::new(0) }; FOREIGN_SLOTS];
/// Serialises the table's writers (never taken by a handler).
static FOREIGN_WRITER: Mutex<()> = Mutex::new(());

fn foreign_writer() -> std::sync::MutexGuard<'static, ()> {
    FOREIGN_WRITER.lock().unwrap_or_else(|e| e.into_inner())
}

fn foreign_probe(tid: i32) -> impl Iterator<Item = &'static AtomicU64> {
    let start = (tid as u32 as usize).wrapping_mul(0x9E37_79B9) % FOREIGN_SLOTS;
    (0..FOREIGN_PROBES).filter_map(move |i| FOREIGN.get((start + i) % FOREIGN_SLOTS))
}

/// The stack top the collector learnt for `tid` (0 = none). Async-signal-safe: one atomic load per
/// probe, so a concurrent insert or forget yields the whole old entry or the whole new one.
#[inline]
pub(crate) fn foreign_top(tid: i32) -> u64 {
    let Ok(want) = u64::try_from(tid) else {
        return 0;
    };
    for entry in foreign_probe(tid) {
        match entry.load(Ordering::Acquire) {
            0 => return 0,
            e if e & TID_MASK == want => return (e >> TID_BITS) << PAGE_SHIFT,
            _ => {}
        }
    }
    0
}

/// Records `tid`'s stack top unless one is recorded already or it does not fit the table; returns
/// whether `tid` now has an entry. Never called from a handler.
pub(crate) fn set_foreign_top(tid: i32, stack_top: u64) -> bool {
    let Some(word) = pack_foreign(tid, stack_top) else {
        return false;
    };
    let _writer = foreign_writer();
    if foreign_top(tid) != 0 {
        return true;
    }
    match foreign_probe(tid).find(|e| matches!(e.load(Ordering::Relaxed), 0 | TOMBSTONE)) {
        Some(entry) => {
            entry.store(word, Ordering::Release);
            true
        }
        None => false,
    }
}

/// Forgets `tid`'s entry (its thread exited, or its timer was deleted). Never called from a handler.
pub(crate) fn forget_foreign(tid: i32) {
    let Ok(want) = u64::try_from(tid) else {
        return;
    };
    let _writer = foreign_writer();
    for entry in foreign_probe(tid) {
        let e = entry.load(Ordering::Relaxed);
        if e != 0 && e & TID_MASK == want {
            entry.store(TOMBSTONE, Ordering::Release);
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
