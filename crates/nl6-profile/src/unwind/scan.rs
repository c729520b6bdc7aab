//! Finding the frame-pointer callers above a frameless leaf.
//!
//! Code without frame pointers — musl's `libc.a` inside the static binary, glibc's `libc.so`, hand-written
//! assembly — does not link itself into the `RBP` chain, and may use `RBP` as a general register. When the
//! interrupted `RIP` is such code (or `RBP` is not a plausible frame), [`scan_from_rsp`] walks the stack
//! words above `RSP` (at most [`SCAN_WORDS`]) for **validated return addresses**: inside the executable's
//! code, with a `call` instruction ending just before them, and — for a direct call — whose target lies
//! at most [`MAX_CALLEE_SPAN`] below the code found so far (the callee, or a function it tail-jumps to):
//! a stale return address left in a frameless function's uninitialised locals by an earlier call
//! elsewhere fails that. Each one found is a caller, innermost first;
//! frameless callers (`__libc_free` above `__munmap`) are recorded and the scan goes on; the first caller
//! that keeps a frame pointer ends the scan: its frame is `RBP` if that is still a plausible frame above the
//! word found (frameless code that never touched `RBP`), else the first plausible frame record above it.
//! The frame-pointer walk continues from there.
//!
//! What is accepted: return addresses into code outside the executable (glibc's libc.so calling itself)
//! are not recognised, so those intermediate frames are skipped while the executable's callers are kept;
//! a stale return address left in a frameless function's uninitialised locals can add one wrong frame
//! (a `call` must precede it, which makes that rare).
use super::code::Code;
#[cfg(doc)]
use super::code::MAX_CALLEE_SPAN;

/// Words above `RSP` a scan may read.
pub(crate) const SCAN_WORDS: u64 = 256;
/// Callers a scan may record before it must have found a frame-pointer function.
const MAX_SCANNED: usize = 8;

/// The stack a scan reads: `[lo, hi)`, with readers for stack words and for 8 code bytes.
pub(crate) struct Mem<S: Fn(u64) -> u64, C: Fn(u64) -> u64> {
    pub lo: u64,
    pub hi: u64,
    pub stack: S,
    pub code: C,
}

impl<S: Fn(u64) -> u64, C: Fn(u64) -> u64> Mem<S, C> {
    fn in_stack(&self, a: u64, floor: u64) -> bool {
        a.is_multiple_of(8) && a >= floor && a >= self.lo && self.hi >= 16 && a <= self.hi - 16
    }

    /// A frame record at `fp` (at or above `floor`): a validated return address above it and a saved
    /// link that is 0 or a higher record inside the stack.
    pub(crate) fn plausible_frame(&self, code: &Code, fp: u64, floor: u64) -> bool {
        self.in_stack(fp, floor) && code.is_return_address((self.stack)(fp + 8), &self.code) && {
            let link = (self.stack)(fp);
            link == 0 || (link > fp && self.in_stack(link, floor))
        }
    }
}

/// Scans above `rsp` (see the module doc). Writes the callers found to `out`; returns how many, and the
/// frame pointer to continue the walk from (0 = none found: the stack ends with the scanned callers).
pub(crate) fn scan_from_rsp<S, C>(
    code: &Code,
    rip: u64,
    rbp: u64,
    mem: &Mem<S, C>,
    out: &mut [u64],
) -> (usize, u64)
where
    S: Fn(u64) -> u64,
    C: Fn(u64) -> u64,
{
    let mut n = 0;
    let end = mem
        .lo
        .saturating_add(SCAN_WORDS * 8)
        .min(mem.hi.saturating_sub(8));
    let mut p = mem.lo;
    // The innermost code so far: a caller's direct call must lead there (its target at most
    // MAX_CALLEE_SPAN below it). Outside the executable (libc.so, the vdso) no target is checked.
    let mut pc = rip;
    while p < end && n < MAX_SCANNED.min(out.len()) {
        let w = (mem.stack)(p);
        p += 8;
        let Some(call) = code.call_before(w, &mem.code) else {
            continue;
        };
        if code.contains(pc) && !call.leads_to(pc) {
            continue;
        }
        if let Some(slot) = out.get_mut(n) {
            *slot = w;
            n += 1;
        }
        pc = w;
        if !code.keeps_frame_pointer(w) {
            continue;
        }
        // `w` returns into a frame-pointer function: find that function's frame record above `p`.
        if mem.plausible_frame(code, rbp, p) {
            return (n, rbp);
        }
        let mut q = p;
        while q < end {
            if mem.plausible_frame(code, q, p) {
                return (n, q);
            }
            q += 8;
        }
        return (n, 0);
    }
    (n, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Code at 0x1000..0x3000; frame-pointer functions in 0x1000..0x2000, frameless ones above. Every
    /// address `a` with `a % 16 == 5` is preceded by a `call rel32` (0xe8 five bytes before).
    fn code() -> Code {
        Code {
            lo: 0x1000,
            hi: 0x3000,
            fp: &[[0x1000, 0x2000]],
        }
    }

    /// Code bytes: every address `w` with `w % 16 == 5` follows a `call rel32` to 0x1000.
    fn code_byte(x: u64) -> u8 {
        let w = x - x % 16 + 5;
        let rel = (0x1000i64 - w as i64) as i32;
        match x % 16 {
            0 => 0xe8,
            k @ 1..=4 => rel.to_le_bytes()[k as usize - 1],
            _ => 0x90,
        }
    }

    fn read_code(a: u64) -> u64 {
        let mut b = [0u8; 8];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = code_byte(a + i as u64);
        }
        u64::from_le_bytes(b)
    }

    fn stack(words: &[u64]) -> (u64, Vec<u64>) {
        (0x7000_0000, words.to_vec())
    }

    #[test]
    fn finds_frameless_callers_then_the_frame_pointer_caller() {
        let (base, mut w) = stack(&[0; 40]);
        let at = |i: usize| base + 8 * i as u64;
        // Leaf __munmap: a spilled register, then the return into __libc_free (frameless, 0x2105).
        w[0] = 0x42;
        w[1] = 0x2105;
        // __libc_free's locals (a code pointer not after a call: 0x2100), then the return into F (0x1205).
        w[3] = 0x2100;
        w[5] = 0x1205;
        // F's frame record at word 9 → G's at word 15 (returns into G, then H).
        w[9] = at(15);
        w[10] = 0x1305;
        w[15] = 0;
        w[16] = 0x1405;
        let read = |a: u64| w[((a - base) / 8) as usize];
        let mem = Mem {
            lo: base,
            hi: at(40),
            stack: read,
            code: read_code,
        };
        let mut out = [0u64; 8];
        // RBP clobbered by libc (a small integer): the frame record is found by scanning.
        let (n, fp) = scan_from_rsp(&code(), 0x2500, 7, &mem, &mut out);
        assert_eq!((&out[..n], fp), (&[0x2105, 0x1205][..], at(9)));
        // RBP untouched (still F's frame): used as is.
        let (n, fp) = scan_from_rsp(&code(), 0x2500, at(9), &mem, &mut out);
        assert_eq!((n, fp), (2, at(9)));
        // RBP pointing below the return into F is not F's frame: scan instead.
        let (_, fp) = scan_from_rsp(&code(), 0x2500, at(2), &mem, &mut out);
        assert_eq!(fp, at(9));
    }

    #[test]
    fn stops_within_the_bounds_and_the_budget() {
        let (base, w) = stack(&[0x55; 8]);
        let read = |a: u64| {
            *w.get(((a - base) / 8) as usize)
                .unwrap_or_else(|| panic!("read outside the stack at {a:#x}"))
        };
        let mem = Mem {
            lo: base,
            hi: base + 64,
            stack: read,
            code: read_code,
        };
        let mut out = [0u64; 8];
        assert_eq!(scan_from_rsp(&code(), 0x2500, 0, &mem, &mut out), (0, 0));
        // Nothing but frameless return addresses: at most MAX_SCANNED callers.
        let (base, w) = stack(&[0x2105; 64]);
        let read = |a: u64| w[((a - base) / 8) as usize];
        let mem = Mem {
            lo: base,
            hi: base + 512,
            stack: read,
            code: read_code,
        };
        let mut out = [0u64; 64];
        assert_eq!(
            scan_from_rsp(&code(), 0x2500, 0, &mem, &mut out),
            (MAX_SCANNED, 0)
        );
    }
}
