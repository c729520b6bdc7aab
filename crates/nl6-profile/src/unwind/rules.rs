//! The unwind rules a handler looks up: per code object (the executable, each shared object, the vDSO), a
//! sorted table `pc → rule` telling where the caller's frame is at that instruction — ORC-like, built
//! outside handlers from the object's CFI ([`super::cfi`], [`super::learn`]).
//!
//! Storage and publication. Each object's table lives in its own anonymous mapping (never on nl6's heap,
//! never unmapped or written after publication): the distinct [`Rule`]s, then the rows' start offsets
//! (`u32`, from the object's first code address), then each row's rule index (`u16`). A fixed array of
//! [`MAX_OBJECTS`] slots holds the objects; a slot is filled (Relaxed stores), then `COUNT` is raised with
//! Release. A handler loads `COUNT` with Acquire first and reads only the slots below it, so it sees whole
//! tables or none; slots are never reused. Writers are serialised by the learner's mutex.
//!
//! Never: allocates, locks or panics on the lookup side ([`lookup`]); every thread may look up at once.
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Code objects the table can hold (the executable, libc, ld.so, the vDSO and a few more).
pub(crate) const MAX_OBJECTS: usize = 64;

/// What a rule says of the caller's frame.
pub(crate) mod kind {
    /// No CFI covers the instruction (the default rule).
    #[allow(dead_code)]
    pub const NONE: u8 = 0;
    /// CFA = RSP + offset; the return address is at CFA - 8.
    pub const CFA_RSP: u8 = 1;
    /// CFA = RBP + offset; the return address is at CFA - 8.
    pub const CFA_RBP: u8 = 2;
    /// A thread's first function (its CFI leaves the return address undefined, or its name is a known
    /// thread entry): the stack ends here.
    pub const ROOT: u8 = 3;
    /// CFI exists but in a form the walk does not evaluate (a DWARF expression, another register).
    pub const UNSUPPORTED: u8 = 4;
}

/// How RBP is recovered.
pub(crate) mod rbp {
    /// Unchanged by the function (still the caller's).
    pub const SAME: u8 = 0;
    /// Saved at CFA + offset.
    pub const SAVED: u8 = 1;
    /// Not recoverable: the caller's frame pointer is unknown.
    pub const LOST: u8 = 2;
}

/// One unwind rule (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Rule {
    pub kind: u8,
    pub rbp: u8,
    pub rbp_off: i16,
    pub cfa_off: i32,
}

/// One published object: code range `[lo, hi)` and its table.
struct Slot {
    lo: AtomicU64,
    hi: AtomicU64,
    rules: AtomicPtr<Rule>,
    pcs: AtomicPtr<u32>,
    idx: AtomicPtr<u16>,
    rows: AtomicUsize,
    nrules: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    lo: AtomicU64::new(0),
    hi: AtomicU64::new(0),
    rules: AtomicPtr::new(std::ptr::null_mut()),
    pcs: AtomicPtr::new(std::ptr::null_mut()),
    idx: AtomicPtr::new(std::ptr::null_mut()),
    rows: AtomicUsize::new(0),
    nrules: AtomicUsize::new(0),
};
static SLOTS: [Slot; MAX_OBJECTS] = [EMPTY; MAX_OBJECTS];
/// Slots below this are published.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// A table ready to publish: pointers into a mapping that is never unmapped or written again.
pub(crate) struct Table {
    pub lo: u64,
    pub hi: u64,
    pub rules: &'static [Rule],
    pub pcs: &'static [u32],
    pub idx: &'static [u16],
}

/// Publishes `t` in the next slot; returns its index, or `None` when the slots are full. The caller
/// serialises publishers.
pub(crate) fn publish_table(t: Table) -> Option<usize> {
    let i = COUNT.load(Ordering::Relaxed);
    let s = SLOTS.get(i)?;
    s.lo.store(t.lo, Ordering::Relaxed);
    s.hi.store(t.hi, Ordering::Relaxed);
    s.rules
        .store(t.rules.as_ptr() as *mut Rule, Ordering::Relaxed);
    s.nrules.store(t.rules.len(), Ordering::Relaxed);
    s.pcs.store(t.pcs.as_ptr() as *mut u32, Ordering::Relaxed);
    s.idx.store(t.idx.as_ptr() as *mut u16, Ordering::Relaxed);
    s.rows
        .store(t.pcs.len().min(t.idx.len()), Ordering::Relaxed);
    COUNT.store(i + 1, Ordering::Release);
    Some(i)
}

/// What the tables say of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// `pc` is in object `obj` at offset `off` from its first code address; its rule.
    Rule { rule: Rule, obj: u8, off: u32 },
    /// No known object's code holds `pc`.
    Outside,
    /// Not from the tables: the walk found `pc` in the body of a frame-pointer function of the
    /// executable, whose caller is its frame record (no lookup needed).
    FramePointerBody,
}

/// The rule for the instruction at `pc` (binary search in its object's table). Async-signal-safe.
#[inline]
pub(crate) fn lookup(pc: u64) -> Found {
    let count = COUNT.load(Ordering::Acquire).min(MAX_OBJECTS);
    for (i, s) in SLOTS.iter().enumerate().take(count) {
        let lo = s.lo.load(Ordering::Relaxed);
        if pc < lo || pc >= s.hi.load(Ordering::Relaxed) {
            continue;
        }
        let off = (pc - lo).min(u32::MAX as u64) as u32;
        let rows = s.rows.load(Ordering::Relaxed);
        let (pcs, idx, rules) = (
            s.pcs.load(Ordering::Relaxed),
            s.idx.load(Ordering::Relaxed),
            s.rules.load(Ordering::Relaxed),
        );
        let nrules = s.nrules.load(Ordering::Relaxed);
        let rule = if rows == 0 || pcs.is_null() || idx.is_null() || rules.is_null() {
            Rule::default()
        } else {
            // SAFETY: published before COUNT (Release, read above with Acquire); the mapping holds
            // `rows` offsets, `rows` indices and `nrules` rules and is never unmapped or written again.
            let (pcs, idx, rules) = unsafe {
                (
                    std::slice::from_raw_parts(pcs, rows),
                    std::slice::from_raw_parts(idx, rows),
                    std::slice::from_raw_parts(rules, nrules),
                )
            };
            let at = pcs.partition_point(|&p| p <= off);
            at.checked_sub(1)
                .and_then(|r| idx.get(r))
                .and_then(|&k| rules.get(k as usize))
                .copied()
                .unwrap_or_default()
        };
        return Found::Rule {
            rule,
            obj: i as u8,
            off,
        };
    }
    Found::Outside
}

/// True once at least one object's table is published.
#[inline]
pub(crate) fn learnt() -> bool {
    COUNT.load(Ordering::Acquire) > 0
}
