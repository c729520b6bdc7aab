//! Stack walks from an interrupted signal context or from the current frame, every caller proven.
//!
//! A CPU sample starts with the **interrupted instruction itself** (`RIP` from the `ucontext`) as the leaf;
//! each caller then comes from a rule ([`step`]): the CFI row of the frame's instruction, looked up in the
//! table of the code object that holds it ([`rules`], built outside handlers by [`learn`] and [`cfi`] from
//! the executable's `.eh_frame` and musl's `.debug_frame`, and the `.eh_frame` of glibc, ld.so and the
//! vDSO), or — for the body of a function of the executable that keeps a frame pointer ([`code`]) — its
//! frame record `RBP → [saved rbp, return address]`. The interrupted frame always uses its CFI row, so a
//! leaf in a prologue (before `push rbp; mov rbp, rsp`) or at `ret` after `pop rbp` keeps its caller. The
//! walk ends in a thread's first function, or with one stop frame naming what it could not prove
//! ([`stop`]): never with a guess. The decision and its costs are in ARCHITECTURE.md ("The unwind").
//!
//! Safety of the walk: the handler reads stack memory only inside `[RSP, high)` after checking that
//! `RSP` lies inside the thread's own stack bounds `[low, high)` ([`bounds`]): a sample taken on the
//! sigaltstack or on a coroutine's stack yields the leaf and a stop frame. Bounds are learnt outside handlers — by
//! the thread itself for threads nl6 spawns (and the profile's starter), by the CPU collector for others
//! ([`foreign`]'s table, from `/proc/self/maps`); a handler never calls libc for them. A frame pointer is
//! followed, and a CFA accepted, only if 8-aligned, inside those bounds and strictly above the previous
//! frame, so a bogus `RBP` or rule ends the walk, never reads outside the live stack; no code byte is read
//! in a handler. Stack words are loaded with one `mov` in
//! inline assembly: the words belong to frames the compiler knows nothing of, possibly never written
//! (a frameless function's locals), which a Rust load would make undefined behaviour; a machine load of
//! mapped memory is defined.
//!
//! What is lost, and accepted: a frame whose rule the walk does not evaluate (a DWARF expression, as in
//! PLT stubs and signal trampolines) ends the stack with a stop frame; the first sample of a foreign thread
//! is its leaf and a stop frame (its bounds are learnt from it); code mapped after the last profile start
//! or thread dump has no table until the next one (its frames stop as "no rule").
//!
//! The foreign table's contract. An entry is valid only for the thread that had the tid when it was
//! learnt; Linux reuses tids, so an entry outliving its thread would bound a new thread's walk by another
//! stack. Hence: (1) the collector learns bounds only for tids whose timer is armed, and **every tid whose
//! timer is deleted is forgotten** — when the rescan notices its thread gone, and for all of them when the
//! session ends — so no entry survives its thread by more than one rescan, nor any session. (2) Entries
//! are read with atomic loads only and each word carries its tid (protocol in [`foreign`]), so a handler
//! reading while the collector inserts or forgets sees the whole old entry, the whole new one, or none.
//! Writers (collector, session stop) are serialised by a mutex no handler takes. (3) The walk trusts no
//! bound blindly: `RSP` outside `[low, high)` or more than [`MAX_STACK_SPAN`] below `high` yields the leaf
//! only.
//!
//! This module never allocates, locks or panics on the walking paths.
use std::sync::atomic::compiler_fence;

mod arch;
mod bounds;
mod cfi;
mod code;
mod foreign;
mod learn;
mod rules;
mod step;
mod stop;
use arch::load_word;
pub(crate) use arch::regs_from_ucontext;
pub(crate) use bounds::{bounds_in_handler, init_thread_bounds, mapping_bounds, Bounds};
pub(crate) use code::frame_pointer_census;
pub(crate) use foreign::{foreign_bounds, forget_foreign, set_foreign_bounds};
#[cfg(test)]
pub(crate) use foreign::{foreign_top, set_foreign_top};
pub(crate) use stop::stop_name;

/// Learns what the walk needs, outside any handler: the executable's code map and the rule tables of
/// every code object not yet known (cheap to repeat).
pub(crate) fn learn_code() {
    code::learn_code();
    if arch::WALKS_RULES {
        learn::learn_objects();
    }
}

/// Deepest stack recorded (Go's 128); deeper stacks are truncated at the root end. A debug build's
/// tokio/tonic stacks reach 71 frames. Handlers write frames into static slots, never onto the
/// sigaltstack, so the depth costs the slots (8 bytes a frame each), not the handler's stack
/// (`tests/engine_depth.rs` measures that).
pub(crate) const MAX_DEPTH: usize = 128;

/// Largest `high - RSP` a walk trusts: far above any thread stack nl6 or a library sets up (8 MiB by
/// default, the main thread's `RLIMIT_STACK`), far below the distance to an unrelated mapping a stale bound
/// would put in the range.
pub(crate) const MAX_STACK_SPAN: u64 = 64 << 20;

/// The three registers a walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Regs {
    pub rip: u64,
    pub rbp: u64,
    pub rsp: u64,
}

/// The frame-pointer walk, over any memory reader (the real one reads process memory; tests pass fake
/// stacks). Writes `leaf` (if any) then return addresses to `out`, skipping the first `skip` return
/// addresses; returns how many entries were written.
///
/// A frame at `fp` is read only when `fp` is 8-aligned, `lo <= fp` and `fp + 16 <= hi`; the walk stops at
/// the first frame failing that, a zero return address, a saved frame pointer not strictly above `fp`,
/// or a full `out`.
#[inline]
pub(crate) fn walk(
    leaf: Option<u64>,
    mut fp: u64,
    lo: u64,
    hi: u64,
    mut skip: usize,
    out: &mut [u64],
    read: impl Fn(u64) -> u64,
) -> usize {
    let mut n = 0;
    if let Some(pc) = leaf {
        match out.get_mut(n) {
            Some(slot) => *slot = pc,
            None => return 0,
        }
        n += 1;
    }
    while n < out.len() {
        if !fp.is_multiple_of(8) || fp < lo || fp > hi.wrapping_sub(16) || hi < 16 {
            break;
        }
        let next = read(fp);
        let ret = read(fp.wrapping_add(8));
        if ret == 0 {
            break;
        }
        if skip > 0 {
            skip -= 1;
        } else if let Some(slot) = out.get_mut(n) {
            *slot = ret;
            n += 1;
        }
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

/// Unwinds an interrupted context: the interrupted `RIP` first, then its proven callers ([`step`]),
/// reading only `[RSP, high)` once `RSP` is inside the thread's bounds `[low, high)`; otherwise the leaf
/// and a stop entry saying the bounds are unknown. Async-signal-safe.
#[inline]
pub(crate) fn unwind_interrupted(regs: Regs, bounds: Option<(u64, u64)>, out: &mut [u64]) -> usize {
    let Some(first) = out.first_mut() else {
        return 0;
    };
    *first = regs.rip;
    let Some((lo, hi)) = bounds.and_then(|(low, high)| bounds::walk_range(regs.rsp, low, high))
    else {
        return match out.get_mut(1) {
            Some(slot) => {
                *slot = stop::stop_entry(stop::Stop::NoBounds, 0, 0);
                2
            }
            None => 1,
        };
    };
    compiler_fence(std::sync::atomic::Ordering::SeqCst);
    walk_rules(regs, lo, hi, out)
}

/// The rule walk over the live stack `[lo, hi)` of the calling or interrupted thread (on aarch64, the
/// frame-record walk: see [`arch`]).
#[inline]
fn walk_rules(regs: Regs, lo: u64, hi: u64, out: &mut [u64]) -> usize {
    if !arch::WALKS_RULES {
        // SAFETY (reader): stack words only in [lo, hi), checked by the walk, as below.
        return walk(Some(regs.rip), regs.rbp, lo, hi, 0, out, |a| unsafe {
            load_word(a)
        });
    }
    let code = code::Code::load();
    // SAFETY (reader): stack words only in [lo, hi) (the walk checks each address), inside the thread's
    // own live stack, which is stopped in our handler or is our own.
    // A closure (not the fn item) so the handler contract's call-graph test sees the lookup.
    #[allow(clippy::redundant_closure)]
    let ctx = step::Ctx {
        lo,
        hi,
        word: |a| unsafe { load_word(a) },
        rule_at: |pc| rules::lookup(pc),
        has_fp: |pc| code.is_some_and(|c| c.keeps_frame_pointer(pc)),
    };
    ctx.walk(regs.rip, regs.rsp, regs.rbp, out)
}

/// Writes the calling thread's return addresses (the caller of `current_stack` first), skipping `skip`
/// more frames, into `out`; returns how many were written. The same rule walk as a sample's once the
/// rules are learnt ([`learn_code`]), the frame-pointer chain before. Allocation-free and
/// async-signal-safe once the thread's bounds are cached; the first call on a thread asks libc for them
/// (see module doc).
#[inline(never)]
pub(crate) fn current_stack(skip: usize, out: &mut [u64]) -> usize {
    let Some(Regs {
        rip: ip,
        rbp: fp,
        rsp: sp,
    }) = arch::here()
    else {
        let _ = (skip, out);
        return 0;
    };
    let top = init_thread_bounds();
    if top == 0 {
        return 0;
    }
    if !arch::WALKS_RULES || !rules::learnt() {
        // SAFETY: as in `unwind_interrupted`; our own stack between sp and its top is live.
        return walk(None, fp, sp, top as u64, skip, out, |a| unsafe {
            load_word(a)
        });
    }
    let regs = Regs {
        rip: ip,
        rbp: fp,
        rsp: sp,
    };
    let mut all = [0u64; MAX_DEPTH + 8];
    let n = walk_rules(regs, sp, top as u64, &mut all);
    // all[0] is this function itself.
    let from = (1 + skip).min(n);
    let k = (n - from).min(out.len());
    out[..k].copy_from_slice(&all[from..from + k]);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake stack: words at `base + 8*i`.
    struct Fake {
        base: u64,
        words: Vec<u64>,
    }

    impl Fake {
        fn read(&self, a: u64) -> u64 {
            let i = ((a - self.base) / 8) as usize;
            *self
                .words
                .get(i)
                .unwrap_or_else(|| panic!("read outside the fake stack at {a:#x}"))
        }
        fn hi(&self) -> u64 {
            self.base + 8 * self.words.len() as u64
        }
        /// Frame at word `i`: saved fp pointing at word `next` (or a raw value), return address `ret`.
        fn frame(&mut self, i: usize, next: u64, ret: u64) {
            self.words[i] = next;
            self.words[i + 1] = ret;
        }
        fn at(&self, i: usize) -> u64 {
            self.base + 8 * i as u64
        }
    }

    fn fake(n: usize) -> Fake {
        Fake {
            base: 0x7000_0000,
            words: vec![0; n],
        }
    }

    #[test]
    fn walks_a_good_chain_leaf_first() {
        let mut s = fake(16);
        let (f0, f1, f2) = (s.at(2), s.at(6), s.at(10));
        s.frame(2, f1, 0x1111);
        s.frame(6, f2, 0x2222);
        s.frame(10, 0, 0x3333);
        let mut out = [0u64; 8];
        let n = walk(Some(0xAAAA), f0, s.base, s.hi(), 0, &mut out, |a| s.read(a));
        assert_eq!(&out[..n], &[0xAAAA, 0x1111, 0x2222, 0x3333]);
        let n = walk(None, f0, s.base, s.hi(), 1, &mut out, |a| s.read(a));
        assert_eq!(&out[..n], &[0x2222, 0x3333]);
    }

    #[test]
    fn stops_on_pointer_out_of_bounds_misaligned_or_not_increasing() {
        let mut s = fake(16);
        let (f0, f1) = (s.at(2), s.at(6));
        // Next frame points below the current one (a loop): stop after recording its return address.
        s.frame(2, f1, 0x1111);
        s.frame(6, f0, 0x2222);
        let mut out = [0u64; 8];
        let n = walk(Some(1), f0, s.base, s.hi(), 0, &mut out, |a| s.read(a));
        assert_eq!(&out[..n], &[1, 0x1111, 0x2222]);
        // Out of bounds (above the stack top): the fake reader would panic if touched.
        s.frame(6, s.hi() + 64, 0x2222);
        let n = walk(Some(1), f0, s.base, s.hi(), 0, &mut out, |a| s.read(a));
        assert_eq!(&out[..n], &[1, 0x1111, 0x2222]);
        // The last 8 bytes of the stack are not a whole frame.
        let n = walk(Some(1), s.hi() - 8, s.base, s.hi(), 0, &mut out, |a| {
            s.read(a)
        });
        assert_eq!(n, 1);
        // Misaligned and below the low bound.
        assert_eq!(
            walk(Some(1), f0 + 4, s.base, s.hi(), 0, &mut out, |a| s.read(a)),
            1
        );
        assert_eq!(
            walk(Some(1), f0, f0 + 8, s.hi(), 0, &mut out, |a| s.read(a)),
            1
        );
        // Unknown bounds (top 0) read nothing.
        assert_eq!(walk(Some(1), f0, s.base, 0, 0, &mut out, |a| s.read(a)), 1);
    }

    #[test]
    fn respects_max_depth_and_zero_return() {
        let mut s = fake(64);
        for i in (0..60).step_by(2) {
            let next = s.at(i + 2);
            s.frame(i, next, 0x100 + i as u64);
        }
        let mut out = [0u64; 5];
        assert_eq!(
            walk(Some(9), s.at(0), s.base, s.hi(), 0, &mut out, |a| s.read(a)),
            5
        );
        let mut s = fake(8);
        s.frame(0, s.at(2), 0);
        let mut out = [0u64; 5];
        assert_eq!(
            walk(None, s.at(0), s.base, s.hi(), 0, &mut out, |a| s.read(a)),
            0
        );
    }

    /// A well-formed stack with real return addresses; bounds that do not hold `RSP` (a sample on the
    /// sigaltstack, a stale or foreign top) yield the leaf only.
    #[test]
    fn rsp_outside_the_bounds_yields_the_leaf_only() {
        learn_code();
        let mut real = [0u64; MAX_DEPTH];
        let n = marker(&mut real);
        assert!(n >= 2);
        let (ret_in_marker, ret_in_test) = (real[0], real[1]);
        let mut stack = vec![0u64; 64];
        let base = stack.as_ptr() as u64;
        let at = |i: usize| base + 8 * i as u64;
        stack[8] = at(16);
        stack[9] = ret_in_marker;
        stack[16] = 0;
        stack[17] = ret_in_test;
        let leaf = marker as *const () as u64 + 8;
        let regs = Regs {
            rip: leaf,
            rbp: at(8),
            rsp: at(0),
        };
        let mut out = [0u64; 8];
        let (low, high) = (base, at(64));
        let n = unwind_interrupted(regs, Some((low, high)), &mut out);
        assert_eq!(
            &out[..3],
            &[leaf, ret_in_marker, ret_in_test],
            "the real bounds walk the chain"
        );
        if arch::WALKS_RULES {
            // The fake chain ends with a zero frame pointer: a named stop, not a guess.
            assert_eq!(n, 4);
            assert!(stop::decode(out[3]).is_some());
        } else {
            // A frame-record walk (aarch64) ends at the zero frame record, AAPCS64's chain end.
            assert_eq!(n, 3, "{:x?}", &out[..n]);
        }
        let leaf_only = |bounds| {
            let n = unwind_interrupted(regs, bounds, &mut [0u64; 8]);
            let mut o = [0u64; 8];
            unwind_interrupted(regs, bounds, &mut o);
            (n, o[0], stop::decode(o[1]).map(|d| d.0))
        };
        let only = (2, leaf, Some(stop::Stop::NoBounds));
        let stale = high + MAX_STACK_SPAN + 4096;
        assert_eq!(leaf_only(Some((low, stale))), only);
        assert_eq!(leaf_only(Some((low, regs.rsp - 8))), only);
        assert_eq!(leaf_only(Some((at(1), high))), only, "RSP below low");
        assert_eq!(leaf_only(None), only);
        drop(stack);
    }

    /// A leaf in a frameless function of the real executable (a rule: CFA = RSP + 8 at a function's
    /// first instruction) with `RBP` clobbered: the caller is the word at `[RSP]`, not a stale return
    /// address above it; then the frame chain.
    #[test]
    #[cfg(target_arch = "x86_64")] // CFI rules (aarch64 walks frame records only)
    fn a_leaf_at_a_function_entry_keeps_its_real_caller() {
        learn_code();
        let mut real = [0u64; MAX_DEPTH];
        let n = marker(&mut real);
        assert!(n >= 3);
        let mut stack = vec![0u64; 64];
        let base = stack.as_ptr() as u64;
        let at = |i: usize| base + 8 * i as u64;
        // [rsp] = the return into `marker`'s caller frame; a stale return address above it.
        stack[0] = real[0];
        stack[1] = real[2];
        stack[6] = at(12);
        stack[7] = real[1];
        stack[12] = 0;
        stack[13] = real[2];
        let regs = Regs {
            rip: marker as *const () as u64,
            rbp: at(6),
            rsp: at(0),
        };
        let mut out = [0u64; 8];
        let n = unwind_interrupted(regs, Some((base, at(64))), &mut out);
        assert!(n >= 3, "{:x?}", &out[..n]);
        assert_eq!(&out[..3], &[regs.rip, real[0], real[1]]);
        drop(stack);
    }

    #[inline(never)]
    fn marker(out: &mut [u64]) -> usize {
        std::hint::black_box(current_stack(0, out))
    }

    #[test]
    fn current_stack_starts_in_the_caller() {
        let mut out = [0u64; MAX_DEPTH];
        let n = marker(&mut out);
        assert!(n >= 3, "only {n} frames");
        // out[0] is a return address inside `marker`, which starts at `marker as usize`.
        let start = marker as *const () as u64;
        assert!(
            out[0] > start && out[0] < start + 256,
            "{:#x} vs fn at {start:#x}",
            out[0]
        );
        // out[1] is inside this test function.
        let test_fn = current_stack_starts_in_the_caller as *const () as u64;
        assert!(out[1] > test_fn && out[1] < test_fn + 4096);
    }
}
