//! The walk: from an interrupted `RIP`, `RSP`, `RBP`, one caller at a time, each proven by a rule.
//!
//! For each frame, innermost first:
//! - a **return address into a frame-pointer function** of the executable (its body: the call sits after
//!   `push rbp; mov rbp, rsp`): the frame record at `RBP` — caller's `RBP` at `[RBP]`, return address at
//!   `[RBP + 8]`;
//! - otherwise (the interrupted instruction of any function — a prologue or epilogue included — and every
//!   frameless function: musl's `libc.a`, glibc's objects, the vDSO) the **CFI rule** of that instruction
//!   ([`super::rules::lookup`], at `pc - 1` for a return address): CFA = `RSP` or `RBP` + offset, the
//!   return address at CFA − 8, `RBP` restored from where the rule saved it;
//! - a frame-pointer function with no rule at all (an executable built without unwind tables): the frame
//!   record, the one proof such a function offers.
//!
//! The walk ends at a thread's first function (a `ROOT` rule: `__clone`, `start_thread`, `_start`…), or
//! with one stop entry ([`super::stop`]) naming what it could not prove: no rule, an unsupported rule, a
//! return address outside every object, a frame off the stack, a lost frame pointer, too many frames. A
//! return address is written only once the rule that found it held and it lies in known code.
//!
//! Memory: stack words only inside `[lo, hi)`, each frame strictly above the previous one. Never
//! allocates, locks or panics.
use super::rules::{kind, rbp as rbp_rule, Found, Rule};
use super::stop::{stop_entry, Stop};

/// What a walk reads: the stack, the rule tables, the frame-pointer table.
pub(crate) struct Ctx<S, L, F> {
    pub lo: u64,
    pub hi: u64,
    pub word: S,
    pub rule_at: L,
    pub has_fp: F,
}

/// Registers of one frame.
#[derive(Clone, Copy)]
struct Frame {
    pc: u64,
    rsp: u64,
    rbp: u64,
}

/// Where the walk goes from one frame.
enum Next {
    Caller(Frame),
    Root,
    Stop(Stop),
}

impl<S, L, F> Ctx<S, L, F>
where
    S: Fn(u64) -> u64,
    L: Fn(u64) -> Found,
    F: Fn(u64) -> bool,
{
    /// A word at `a` is inside the stack at or above `floor`.
    #[inline]
    fn readable(&self, a: u64, floor: u64) -> bool {
        a.is_multiple_of(8) && a >= floor && a >= self.lo && self.hi >= 8 && a <= self.hi - 8
    }

    /// The caller through the frame record at `f.rbp`.
    #[inline]
    fn frame_record(&self, f: Frame) -> Next {
        let fp = f.rbp;
        if !self.readable(fp, f.rsp) || !self.readable(fp.wrapping_add(8), f.rsp) {
            return Next::Stop(Stop::FramePointerLost);
        }
        Next::Caller(Frame {
            pc: (self.word)(fp + 8),
            rsp: fp + 16,
            rbp: (self.word)(fp),
        })
    }

    /// The caller by a CFA rule.
    #[inline]
    fn by_rule(&self, f: Frame, r: Rule) -> Next {
        let base = if r.kind == kind::CFA_RSP {
            f.rsp
        } else {
            f.rbp
        };
        let cfa = base.wrapping_add(r.cfa_off as i64 as u64);
        let ra_at = cfa.wrapping_sub(8);
        if cfa < f.rsp.wrapping_add(8) || !self.readable(ra_at, f.rsp) {
            return Next::Stop(Stop::OffStack);
        }
        let rbp = match r.rbp {
            rbp_rule::SAME => f.rbp,
            rbp_rule::SAVED => {
                let at = cfa.wrapping_add(r.rbp_off as i64 as u64);
                if at < f.rsp {
                    // Below RSP: the epilogue popped it already (at `ret` after `pop rbp`), so RBP
                    // holds the caller's value.
                    f.rbp
                } else if !self.readable(at, f.rsp) {
                    return Next::Stop(Stop::OffStack);
                } else {
                    (self.word)(at)
                }
            }
            // Unknown: a frame-pointer caller will stop on it rather than follow a wrong chain.
            _ => 1,
        };
        Next::Caller(Frame {
            pc: (self.word)(ra_at),
            rsp: cfa,
            rbp,
        })
    }

    /// One step from frame `f`, whose instruction is `probe` (the pc, or a return address − 1).
    #[inline]
    fn step(&self, f: Frame, probe: u64, found: Found, exact: bool) -> (Next, u8, u32) {
        // `probe` is only needed for a frame-pointer function without any rule (see the module doc).
        let (rule, obj, off) = match found {
            Found::Rule { rule, obj, off } => (rule, obj, off),
            Found::FramePointerBody if !exact => return (self.frame_record(f), 0, 0),
            _ => return (Next::Stop(Stop::OutsideCode), 0, 0),
        };
        let next = match rule.kind {
            kind::ROOT => Next::Root,
            kind::CFA_RSP | kind::CFA_RBP => self.by_rule(f, rule),
            kind::UNSUPPORTED => Next::Stop(Stop::Unsupported),
            _ if (self.has_fp)(probe) => self.frame_record(f),
            _ => Next::Stop(Stop::NoRule),
        };
        (next, obj, off)
    }

    /// Walks from `(rip, rsp, rbp)`: writes the leaf, its proven callers, and a stop entry if the walk
    /// did not reach a thread's first function. Returns the entries written.
    pub(crate) fn walk(&self, rip: u64, rsp: u64, rbp: u64, out: &mut [u64]) -> usize {
        let Some(first) = out.first_mut() else {
            return 0;
        };
        *first = rip;
        let mut n = 1;
        let mut f = Frame { pc: rip, rsp, rbp };
        let mut probe = rip;
        let mut found = (self.rule_at)(probe);
        let mut exact = true;
        loop {
            let (next, obj, off) = self.step(f, probe, found, exact);
            let why = match next {
                Next::Root => return n,
                Next::Stop(why) => why,
                Next::Caller(c) if c.pc == 0 => Stop::ZeroReturn,
                Next::Caller(c) => {
                    // A return into a frame-pointer body needs no lookup: its frame record is next.
                    let at = if (self.has_fp)(c.pc.wrapping_sub(1)) {
                        Found::FramePointerBody
                    } else {
                        (self.rule_at)(c.pc.wrapping_sub(1))
                    };
                    if at == Found::Outside {
                        Stop::OutsideCode
                    } else if n + 1 >= out.len() {
                        Stop::TooDeep
                    } else {
                        out[n] = c.pc;
                        n += 1;
                        (f, probe, found, exact) = (c, c.pc - 1, at, false);
                        continue;
                    }
                }
            };
            if let Some(slot) = out.get_mut(n) {
                *slot = stop_entry(why, obj, off);
                n += 1;
            } else if let Some(last) = out.last_mut() {
                *last = stop_entry(why, obj, off);
            }
            return n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::stop::decode;
    use super::*;

    const RSP8: Rule = Rule {
        kind: kind::CFA_RSP,
        rbp: rbp_rule::SAME,
        rbp_off: 0,
        cfa_off: 8,
    };

    /// Code: 0x1000..0x2000 frame-pointer functions; 0x2000..0x2100 a frameless function whose CFA is
    /// RSP + 0x30 with RBP saved at CFA − 16; 0x2100..0x2200 a root; 0x2200..0x2300 no rule; above 0x3000
    /// nothing.
    fn lookup(pc: u64) -> Found {
        let rule = match pc {
            0x1000..=0x1fff => Rule {
                kind: kind::CFA_RBP,
                rbp: rbp_rule::SAVED,
                rbp_off: -16,
                cfa_off: 16,
            },
            0x2000..=0x20ff => Rule {
                kind: kind::CFA_RSP,
                rbp: rbp_rule::SAVED,
                rbp_off: -16,
                cfa_off: 0x30,
            },
            0x2100..=0x21ff => Rule {
                kind: kind::ROOT,
                ..Rule::default()
            },
            0x2200..=0x2fff => Rule::default(),
            0x3000..=0x3fff => RSP8,
            _ => return Found::Outside,
        };
        Found::Rule {
            rule,
            obj: 0,
            off: (pc - 0x1000) as u32,
        }
    }

    fn run(words: &[(usize, u64)], rip: u64, rsp_i: usize, rbp: u64) -> (Vec<u64>, u64) {
        let base = 0x7000_0000u64;
        let mut w = vec![0u64; 64];
        for &(i, v) in words {
            w[i] = v;
        }
        let ctx = Ctx {
            lo: base,
            hi: base + 8 * 64,
            word: |a: u64| w[((a - base) / 8) as usize],
            rule_at: lookup,
            has_fp: |pc: u64| (0x1000..0x2000).contains(&pc),
        };
        let mut out = [0u64; 16];
        let n = ctx.walk(rip, base + 8 * rsp_i as u64, rbp, &mut out);
        (out[..n].to_vec(), base)
    }

    /// A frameless leaf (CFA = RSP + 0x30, a stale return address in its locals), its frame-pointer
    /// caller, then a root.
    #[test]
    fn frameless_leaf_then_frame_records_then_root() {
        let base = 0x7000_0000u64;
        let at = |i: usize| base + 8 * i as u64;
        // RSP at word 0; locals hold a stale 0x1805. CFA = word 6: RA at word 5, RBP saved at word 4.
        let (out, _) = run(
            &[
                (1, 0x1805),
                (4, at(10)),
                (5, 0x1205),
                (10, at(20)),
                (11, 0x2150),
            ],
            0x2010,
            0,
            7,
        );
        assert_eq!(out, vec![0x2010, 0x1205, 0x2150]);
    }

    /// Interrupted at an FP function's first instruction (before `push rbp`): the rule says the return
    /// address is at `[RSP]`, so the real caller is kept.
    #[test]
    fn a_leaf_in_a_prologue_keeps_its_caller() {
        let base = 0x7000_0000u64;
        let at = |i: usize| base + 8 * i as u64;
        let (out, _) = run(&[(0, 0x1305), (6, 0), (7, 0x2150)], 0x3000, 0, at(6));
        assert_eq!(out, vec![0x3000, 0x1305, 0x2150]);
    }

    /// Interrupted at `ret` after `pop rbp`: the rule still says RBP is saved at CFA − 16, a slot now
    /// below RSP; RBP already holds the caller's frame, and the caller is kept.
    #[test]
    fn a_leaf_at_ret_after_pop_rbp_keeps_its_caller() {
        let base = 0x7000_0000u64;
        let at = |i: usize| base + 8 * i as u64;
        // 0x3800: CFA = RSP + 8, RBP saved at CFA - 16 (a row after `pop rbp`).
        let lookup = |pc: u64| match pc {
            0x3800..=0x38ff => Found::Rule {
                rule: Rule {
                    kind: kind::CFA_RSP,
                    rbp: rbp_rule::SAVED,
                    rbp_off: -16,
                    cfa_off: 8,
                },
                obj: 0,
                off: 0,
            },
            p => super::tests::lookup(p),
        };
        let mut w = vec![0u64; 64];
        w[1] = 0x1305;
        w[6] = 0;
        w[7] = 0x2150;
        let ctx = Ctx {
            lo: base,
            hi: base + 8 * 64,
            word: |a: u64| w[((a - base) / 8) as usize],
            rule_at: lookup,
            has_fp: |pc: u64| (0x1000..0x2000).contains(&pc),
        };
        let mut out = [0u64; 8];
        let n = ctx.walk(0x3810, at(1), at(6), &mut out);
        assert_eq!(&out[..n], &[0x3810, 0x1305, 0x2150]);
    }

    #[test]
    fn stops_are_named_never_guessed() {
        // No rule for a frameless function.
        let (out, _) = run(&[], 0x2210, 0, 0);
        assert_eq!(out.len(), 2);
        assert_eq!(decode(out[1]).map(|d| d.0), Some(Stop::NoRule));
        // A return address outside the code.
        let (out, _) = run(&[(0, 0x9999)], 0x3000, 0, 0);
        assert_eq!(decode(out[1]).map(|d| d.0), Some(Stop::OutsideCode));
        // A frame pointer below RSP.
        let (out, _) = run(&[(0, 0x1205)], 0x3000, 0, 0x10);
        assert_eq!(out[1], 0x1205);
        assert_eq!(decode(out[2]).map(|d| d.0), Some(Stop::FramePointerLost));
        // A CFA above the stack.
        let (out, _) = run(&[], 0x2010, 60, 0);
        assert_eq!(decode(out[1]).map(|d| d.0), Some(Stop::OffStack));
        // Outside all code at the leaf.
        let (out, _) = run(&[], 0x9000, 0, 0);
        assert_eq!(decode(out[1]).map(|d| d.0), Some(Stop::OutsideCode));
    }

    #[test]
    fn a_loop_of_frame_records_ends_in_a_stop() {
        let base = 0x7000_0000u64;
        let at = |i: usize| base + 8 * i as u64;
        // Frame record at word 2 points to itself: the next frame must be above, so the walk stops.
        let (out, _) = run(&[(2, at(2)), (3, 0x1205)], 0x1100, 0, at(2));
        assert_eq!(out[1], 0x1205);
        assert!(decode(*out.last().unwrap()).is_some(), "{out:x?}");
        assert!(out.len() < 16);
    }
}
