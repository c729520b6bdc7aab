//! Frame-pointer unwinding, from an interrupted signal context or from the current frame.
//!
//! Every nl6 build carries frame pointers (`-C force-frame-pointers=yes`, .cargo/config.toml), so a stack is
//! the chain `rbp → [saved rbp, return address]`. A CPU sample starts with the **interrupted instruction
//! itself** (`RIP` from the `ucontext`) as the leaf, then follows the chain.
//!
//! Safety of the walk: a frame pointer is read only if it is 8-byte aligned, at or above the interrupted
//! `RSP`, below the thread's stack top, and strictly above the previous frame. Code without frame pointers —
//! musl's `libc.a`, hand-written assembly — may use `RBP` as a general register; those checks turn a bogus
//! `RBP` into an early stop, never into a read outside the live stack. What is lost, and accepted:
//! interrupted in a function's prologue (before `push rbp; mov rbp, rsp`) or inside a libc function that
//! keeps no frame, the direct caller of the leaf is missing (the chain resumes at the caller's caller);
//! when `RBP` is not a plausible frame at all, [`chain_start`] scans a few hundred bytes above `RSP` for a
//! saved frame pointer (bounded, within the stack, checked against the binary's code range) to resume the
//! chain, so a thread blocked inside libc still shows its Rust callers.
//!
//! Stack bounds: the stack top of each thread is cached in a `const` thread-local without destructor. A
//! thread fills it outside any handler (at birth through `threads::spawn_recorded`, on its first
//! [`current_stack`], when it starts a CPU profile). On musl, `pthread_getattr_np` is pure arithmetic for
//! spawned threads and `mremap` probing for the main thread — no lock, no allocation — so a handler fills
//! the cache on first use and every thread, even one nl6 did not spawn, gets full stacks. glibc's version
//! takes a lock and reads /proc for the main thread, so there a handler never calls it: a thread with no
//! cached top yields the leaf only, plus its tid and `RSP`; the CPU collector then looks that `RSP` up in
//! `/proc/self/maps` and publishes the end of its mapping as the thread's top in a lock-free `tid → top`
//! table, so later samples get full stacks. (That end can lie past the real stack top when the kernel merged
//! the stack with an adjacent read-write mapping; a bogus `RBP` pointing there is still mapped memory at
//! the time. The shipped musl build never uses the table.)
//!
//! The foreign table's contract. An entry is valid only for the thread that had the tid when it was
//! learnt; Linux reuses tids, so an entry outliving its thread would bound a new thread's walk by another
//! stack's top. Hence: (1) the collector learns tops only for tids whose timer is armed, and **every tid
//! whose timer is deleted is forgotten** — at each rescan for threads gone, and for all of them when the
//! session ends — so no entry survives its thread by more than one rescan, nor any session. (Clearing the
//! whole table at session start instead was rejected: between sessions the stack-capture handler still
//! reads the table and no rescan notices deaths, so stale entries would be used there.) (2) Each entry is
//! **one `AtomicU64`** packing tid and top (stored with Release, read with one Acquire load), so a handler
//! reading while the collector inserts or forgets sees the whole old entry, the whole new one, or
//! none — never one thread's tid with another's top. Forgetting writes a tombstone (probing goes on past
//! it). Writers (collector, session stop) are serialised by a mutex no handler takes. (3) The walk itself
//! trusts no top blindly: one below `RSP` or more than [`MAX_STACK_SPAN`] above it is treated as unknown
//! (leaf only), so even a wrong entry cannot send a walk across unmapped pages far away.
//!
//! This module never allocates, locks or panics on the walking paths.
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

mod foreign;
pub(crate) use foreign::{foreign_top, forget_foreign, set_foreign_top};

/// Deepest stack recorded; deeper stacks are truncated at the root end.
pub(crate) const MAX_DEPTH: usize = 64;

thread_local! {
    /// The calling thread's stack top (highest address + 1); 0 = not known yet, 1 = could not be known.
    static STACK_TOP: Cell<usize> = const { Cell::new(0) };
    /// Set while this thread asks libc for its bounds (a nested allocation must not re-enter).
    static FILLING: Cell<bool> = const { Cell::new(false) };
}

/// The three registers a walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Regs {
    pub rip: u64,
    pub rbp: u64,
    pub rsp: u64,
}

/// Reads `RIP`, `RBP`, `RSP` from the `ucontext` a `SA_SIGINFO` handler received.
///
/// # Safety
/// `ctx` must be the third argument the kernel passed to a `SA_SIGINFO` handler, or null.
#[inline]
pub(crate) unsafe fn regs_from_ucontext(ctx: *const std::ffi::c_void) -> Option<Regs> {
    if ctx.is_null() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the kernel's ucontext_t for this thread, valid for the handler's duration.
        let gregs = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs };
        let get = |i: libc::c_int| gregs.get(i as usize).map(|v| *v as u64);
        Some(Regs {
            rip: get(libc::REG_RIP)?,
            rbp: get(libc::REG_RBP)?,
            rsp: get(libc::REG_RSP)?,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
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

/// Reads one word of the live stack.
///
/// # Safety
/// `addr` must be 8-aligned and inside a mapped, readable region (the walk checks stack bounds first).
#[inline(always)]
unsafe fn read_word(addr: u64) -> u64 {
    // SAFETY: the caller guarantees the address; volatile because the memory belongs to another frame.
    unsafe { std::ptr::read_volatile(addr as usize as *const u64) }
}

/// Asks libc for the calling thread's stack top (0 on failure).
fn query_stack_top() -> usize {
    // SAFETY: pthread_self is always valid; attr is initialised by pthread_getattr_np before use and
    // destroyed after; pthread_attr_getstack writes two out-values we own.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return 0;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || addr.is_null() {
            return 0;
        }
        (addr as usize).wrapping_add(size)
    }
}

/// Fills the calling thread's cached stack top (outside any signal handler) and returns it (0 if it
/// cannot be known). Cheap after the first call.
pub(crate) fn init_thread_bounds() -> usize {
    let top = STACK_TOP.with(Cell::get);
    if top > 1 {
        return top;
    }
    if top == 1 || FILLING.with(|f| f.replace(true)) {
        return 0;
    }
    let found = query_stack_top();
    STACK_TOP.with(|t| t.set(if found == 0 { 1 } else { found }));
    FILLING.with(|f| f.set(false));
    found
}

/// The end of the readable-writable mapping containing `addr`, from `/proc/self/maps` text (pure).
pub(crate) fn mapping_end(maps: &str, addr: u64) -> Option<u64> {
    maps.lines().find_map(|line| {
        let mut parts = line.split_ascii_whitespace();
        let (range, perms) = (parts.next()?, parts.next()?);
        let (lo, hi) = range.split_once('-')?;
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).ok()?,
            u64::from_str_radix(hi, 16).ok()?,
        );
        (perms.starts_with("rw") && lo <= addr && addr < hi).then_some(hi)
    })
}

/// Where a handler found the stack top of its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Top {
    /// Known: walk up to here.
    Known(usize),
    /// Unknown for this thread (`tid`): walk nothing; the collector may learn it from the sample's `RSP`.
    Unknown(i32),
}

/// The calling thread's stack top for use inside a signal handler.
#[inline]
pub(crate) fn stack_top_in_handler() -> Top {
    let top = STACK_TOP.with(Cell::get);
    if top > 1 {
        return Top::Known(top);
    }
    if top == 0 && cfg!(target_env = "musl") {
        // musl's pthread_getattr_np is async-signal-safe in practice (see module doc); never on glibc.
        let found = query_stack_top();
        STACK_TOP.with(|t| t.set(if found == 0 { 1 } else { found }));
        if found != 0 {
            return Top::Known(found);
        }
    }
    let tid = super::signal::gettid();
    match foreign_top(tid) {
        0 => Top::Unknown(tid),
        top => Top::Known(top as usize),
    }
}

/// Words above `RSP` searched for a saved frame pointer when `RBP` is not one.
const SCAN_WORDS: u64 = 256;

/// The executable's code range `[lo, hi)` (0, 0 = unknown), learnt outside handlers by [`learn_text`].
static TEXT: (AtomicU64, AtomicU64) = (AtomicU64::new(0), AtomicU64::new(0));

/// Records the address range of this binary's executable mappings (call outside any handler; cheap to
/// repeat). Return addresses outside it are not trusted when a walk has to resynchronise.
pub(crate) fn learn_text() {
    if TEXT.1.load(Ordering::Relaxed) != 0 {
        return;
    }
    let (Ok(maps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/maps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return;
    };
    if let Some((lo, hi)) = text_range(&maps, &exe.to_string_lossy()) {
        TEXT.0.store(lo, Ordering::Relaxed);
        TEXT.1.store(hi, Ordering::Release);
    }
}

/// The span of `exe`'s executable mappings in `/proc/self/maps` text (pure).
pub(crate) fn text_range(maps: &str, exe: &str) -> Option<(u64, u64)> {
    let mut range: Option<(u64, u64)> = None;
    for line in maps.lines() {
        let mut parts = line.split_ascii_whitespace();
        let (Some(r), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !perms.contains('x') || parts.nth(3) != Some(exe) {
            continue;
        }
        let Some((lo, hi)) = r.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else {
            continue;
        };
        range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    range
}

/// Where the frame chain of an interrupted context starts: `(return address of the leaf's caller if it
/// had to be found by scanning, first frame pointer)`.
///
/// Normally `RBP` is the leaf's (or its caller's) frame. When it is not a plausible frame — code without
/// frame pointers (musl's libc.a) uses it as a general register — scan up to [`SCAN_WORDS`] words above
/// `RSP` for a saved frame pointer: a word `w` with `rsp < w`, a whole frame below `hi`, a return address
/// in `text` at `w + 8`, and a saved link that is 0 or above `w`. The first code address met on the way is
/// kept as the return into the leaf's caller. Reads only 8-aligned words in `[rsp, hi)`.
pub(crate) fn chain_start(
    rbp: u64,
    rsp: u64,
    hi: u64,
    text: (u64, u64),
    read: impl Fn(u64) -> u64,
) -> (Option<u64>, u64) {
    let in_stack = |a: u64| a.is_multiple_of(8) && a >= rsp && hi >= 16 && a <= hi - 16;
    let in_text = |a: u64| text.1 == 0 || (text.0 <= a && a < text.1);
    let plausible = |fp: u64| {
        in_stack(fp) && in_text(read(fp + 8)) && {
            let link = read(fp);
            link == 0 || (link > fp && in_stack(link))
        }
    };
    if plausible(rbp) || text.1 == 0 || !rsp.is_multiple_of(8) {
        return (None, rbp);
    }
    let mut caller_ret = None;
    let mut p = rsp;
    let end = rsp.saturating_add(SCAN_WORDS * 8).min(hi.saturating_sub(8));
    while p < end {
        let w = read(p);
        if w > p && plausible(w) {
            return (caller_ret, w);
        }
        if caller_ret.is_none() && in_text(w) {
            caller_ret = Some(w);
        }
        p += 8;
    }
    (None, rbp)
}

/// Largest `top - RSP` a walk trusts: far above any thread stack nl6 or a library sets up (8 MiB by
/// default, the main thread's `RLIMIT_STACK`), far below the distance to an unrelated mapping a stale top
/// would put in the range.
pub(crate) const MAX_STACK_SPAN: u64 = 64 << 20;

/// `stack_top` if it can bound a walk from `rsp` — above `rsp` by at most [`MAX_STACK_SPAN`] — else 0
/// (unknown: leaf only). A top that fails this is not this thread's (stale or wrong), and walking up to it
/// could read unmapped pages.
#[inline]
pub(crate) fn trusted_top(rsp: u64, stack_top: u64) -> u64 {
    if rsp < stack_top && stack_top - rsp <= MAX_STACK_SPAN {
        stack_top
    } else {
        0
    }
}

/// Unwinds an interrupted context: the interrupted `RIP` first, then the frame chain (see
/// [`chain_start`]), within `[regs.rsp, stack_top)`; an implausible `stack_top` (see [`trusted_top`])
/// yields the leaf only. Async-signal-safe.
#[inline]
pub(crate) fn unwind_interrupted(regs: Regs, stack_top: usize, out: &mut [u64]) -> usize {
    let text = (
        TEXT.0.load(Ordering::Relaxed),
        TEXT.1.load(Ordering::Acquire),
    );
    let hi = trusted_top(regs.rsp, stack_top as u64);
    if hi == 0 {
        return walk(Some(regs.rip), 0, 1, 0, 0, out, |_| 0);
    }
    // SAFETY (both closures): reads only 8-aligned words inside [rsp, stack_top), the live stack of the
    // interrupted thread (it is stopped in our handler, so its stack stays mapped).
    let (caller, fp) = chain_start(regs.rbp, regs.rsp, hi, text, |a| unsafe { read_word(a) });
    let mut n = 0;
    for pc in [Some(regs.rip), caller].into_iter().flatten() {
        if let Some(slot) = out.get_mut(n) {
            *slot = pc;
            n += 1;
        }
    }
    let rest = out.get_mut(n..).unwrap_or(&mut []);
    n + walk(None, fp, regs.rsp, hi, 0, rest, |a| unsafe { read_word(a) })
}

/// Writes the calling thread's return addresses (the caller of `current_stack` first), skipping `skip`
/// more frames, into `out`; returns how many were written. Allocation-free and async-signal-safe once the
/// thread's bounds are cached; the first call on a thread asks libc for them (see module doc).
#[inline(never)]
pub(crate) fn current_stack(skip: usize, out: &mut [u64]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let (fp, sp): (u64, u64);
        // SAFETY: reads two registers, no memory access or side effect.
        unsafe {
            std::arch::asm!("mov {fp}, rbp", "mov {sp}, rsp", fp = out(reg) fp, sp = out(reg) sp,
                options(nomem, nostack, preserves_flags));
        }
        let top = init_thread_bounds();
        if top == 0 {
            return 0;
        }
        // SAFETY: as in `unwind_interrupted`; our own stack between sp and its top is live.
        walk(None, fp, sp, top as u64, skip, out, |a| unsafe {
            read_word(a)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (skip, out);
        0
    }
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

    #[test]
    fn resynchronises_when_rbp_is_not_a_frame() {
        let text = (0x1000, 0x2000);
        let mut s = fake(32);
        // The leaf (libc) saved the caller's frame pointer at word 3 and returns to 0x1500 (word 5).
        let (rsp, f) = (s.at(0), s.at(10));
        s.words[1] = 0x42;
        s.words[3] = f;
        s.words[5] = 0x1500;
        s.frame(10, s.at(20), 0x1600);
        s.frame(20, 0, 0x1700);
        assert_eq!(chain_start(5, rsp, s.hi(), text, |a| s.read(a)), (None, f));
        // Put a code address below the saved frame pointer: it is the return into the leaf's caller.
        s.words[2] = 0x1400;
        assert_eq!(
            chain_start(5, rsp, s.hi(), text, |a| s.read(a)),
            (Some(0x1400), f)
        );
        // A plausible RBP is used as is; unknown text range means no scanning.
        assert_eq!(chain_start(f, rsp, s.hi(), text, |a| s.read(a)), (None, f));
        assert_eq!(
            chain_start(5, rsp, s.hi(), (0, 0), |a| s.read(a)),
            (None, 5)
        );
        // Nothing plausible within the stack: keep RBP (the walk then stops at once).
        let empty = fake(8);
        assert_eq!(
            chain_start(5, empty.base, empty.hi(), text, |a| empty.read(a)),
            (None, 5)
        );
    }

    #[test]
    fn parses_maps_for_text_and_stack_mappings() {
        let maps = "5555-6000 r--p 00000000 08:01 12 /bin/nl6\n\
                    6000-9000 r-xp 00001000 08:01 12 /bin/nl6\n\
                    9000-a000 r-xp 00000000 08:01 13 /lib/other.so\n\
                    7ff0000-7ff8000 rw-p 00000000 00:00 0 [stack]\n";
        assert_eq!(text_range(maps, "/bin/nl6"), Some((0x6000, 0x9000)));
        assert_eq!(text_range(maps, "/bin/none"), None);
        assert_eq!(mapping_end(maps, 0x7ff4000), Some(0x7ff8000));
        assert_eq!(mapping_end(maps, 0x6500), None, "code is not a stack");
    }

    #[test]
    fn a_top_is_trusted_only_just_above_rsp() {
        let rsp = 0x7f00_0000_0000;
        assert_eq!(trusted_top(rsp, rsp + 4096), rsp + 4096);
        assert_eq!(trusted_top(rsp, rsp + MAX_STACK_SPAN), rsp + MAX_STACK_SPAN);
        assert_eq!(
            trusted_top(rsp, rsp + MAX_STACK_SPAN + 8),
            0,
            "too far above"
        );
        assert_eq!(trusted_top(rsp, rsp), 0, "no stack left");
        assert_eq!(trusted_top(rsp, rsp - 4096), 0, "below rsp");
        assert_eq!(trusted_top(rsp, 0), 0);
    }

    /// A stale top far above a real, well-formed stack: the walk must not go past the leaf (it would
    /// cross whatever lies between the two on a real thread).
    #[test]
    fn an_implausible_top_yields_the_leaf_only() {
        let code = a_top_is_trusted_only_just_above_rsp as *const () as u64;
        let mut stack = vec![0u64; 64];
        let base = stack.as_ptr() as u64;
        let at = |i: usize| base + 8 * i as u64;
        stack[8] = at(16);
        stack[9] = code + 16;
        stack[16] = 0;
        stack[17] = code + 32;
        let regs = Regs {
            rip: code + 8,
            rbp: at(8),
            rsp: at(0),
        };
        let mut out = [0u64; 8];
        let real_top = at(64);
        let n = unwind_interrupted(regs, real_top as usize, &mut out);
        assert_eq!(
            &out[..n],
            &[code + 8, code + 16, code + 32],
            "the real top walks the chain"
        );
        let stale = real_top + MAX_STACK_SPAN + 4096;
        let n = unwind_interrupted(regs, stale as usize, &mut out);
        assert_eq!(&out[..n], &[code + 8]);
        let n = unwind_interrupted(regs, (regs.rsp - 8) as usize, &mut out);
        assert_eq!(&out[..n], &[code + 8]);
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
