//! The machine under the walk: reading the interrupted registers from a signal's `ucontext`, the current
//! frame's registers, one stack word with one machine load, the thread pointer, and which first bytes of a
//! function set up a frame pointer. One implementation per supported machine (x86_64, aarch64); any other
//! compiles to "nothing known", and the samplers refuse to start there (`Unsupported`).
//!
//! On both machines a frame record is two words, `[fp] = caller's fp`, `[fp + 8] = return address`:
//! x86_64's `RBP` after `push rbp; mov rbp, rsp`, aarch64's `x29` after `stp x29, x30, [sp, …]`, `add x29,
//! sp, …` (AAPCS64). [`Regs`] names x86_64's registers; on aarch64 `rip` holds `pc`, `rbp` `x29` and `rsp`
//! `sp`.
//!
//! Never: allocates, locks, calls libc or panics (each function here runs in signal handlers).
use super::Regs;

/// True when the walk proves callers by CFI rules (x86_64); aarch64 follows frame records only.
pub(crate) const WALKS_RULES: bool = cfg!(target_arch = "x86_64");

/// How many first bytes of a function [`sets_up_frame`] reads.
pub(crate) const PROLOGUE_BYTES: usize = if cfg!(target_arch = "aarch64") { 16 } else { 8 };

/// Reads the interrupted `pc`, frame pointer and stack pointer from the `ucontext` a `SA_SIGINFO`
/// handler received.
///
/// # Safety
/// `ctx` must be the third argument the kernel passed to a `SA_SIGINFO` handler, or null.
#[inline]
pub(crate) unsafe fn regs_from_ucontext(ctx: *const std::ffi::c_void) -> Option<Regs> {
    if ctx.is_null() {
        return None;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
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
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    {
        // SAFETY: as above; the aarch64 mcontext holds x0..x30, sp and pc.
        let mc = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext };
        Some(Regs {
            rip: mc.pc as u64,
            rbp: *mc.regs.get(29)? as u64,
            rsp: mc.sp as u64,
        })
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        None
    }
}

/// The caller's frame pointer, stack pointer and an address inside it. Inlined, so "the caller" is the
/// function that calls this one.
#[inline(always)]
pub(crate) fn here() -> Option<Regs> {
    #[cfg(target_arch = "x86_64")]
    {
        let (fp, sp, ip): (u64, u64, u64);
        // SAFETY: reads three registers, no memory access or side effect.
        unsafe {
            std::arch::asm!("mov {fp}, rbp", "mov {sp}, rsp", "lea {ip}, [rip]", fp = out(reg) fp,
                sp = out(reg) sp, ip = out(reg) ip, options(nomem, nostack, preserves_flags));
        }
        Some(Regs {
            rip: ip,
            rbp: fp,
            rsp: sp,
        })
    }
    #[cfg(target_arch = "aarch64")]
    {
        let (fp, sp, ip): (u64, u64, u64);
        // SAFETY: reads three registers, no memory access or side effect.
        unsafe {
            std::arch::asm!("mov {fp}, x29", "mov {sp}, sp", "adr {ip}, .", fp = out(reg) fp,
                sp = out(reg) sp, ip = out(reg) ip, options(nomem, nostack, preserves_flags));
        }
        Some(Regs {
            rip: ip,
            rbp: fp,
            rsp: sp,
        })
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// Loads one 8-byte word at `addr` with a single machine load, outside Rust's abstract machine (the word
/// may never have been written by anyone: see the parent module).
///
/// # Safety
/// `addr..addr+8` must be mapped and readable (the callers check stack bounds or the code range first).
#[inline(always)]
pub(crate) unsafe fn load_word(addr: u64) -> u64 {
    let v: u64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees the address is mapped; a load has no other effect.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{a}]", a = in(reg) addr, v = out(reg) v,
            options(nostack, preserves_flags, readonly));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    unsafe {
        std::arch::asm!("ldr {v}, [{a}]", a = in(reg) addr, v = out(reg) v,
            options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: as above.
    unsafe {
        v = std::ptr::read_volatile(addr as usize as *const u64);
    }
    v
}

/// The calling thread's thread pointer, which glibc and musl place inside the thread's own stack
/// mapping, above its stack: x86_64's word at `%fs:0` (the control block's address, what `pthread_self`
/// returns), aarch64's `tpidr_el0` (just above the control block). A plain register or load; 0 elsewhere.
#[inline]
pub(crate) fn thread_pointer() -> u64 {
    let tp: u64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: libc sets up %fs for every thread it starts, with its control block's address at %fs:0
    // (the x86_64 TLS ABI); the handler's own thread-local loads rely on the same register.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
            options(nostack, readonly, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reading the EL0 thread-ID register has no side effect.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        tp = 0;
    }
    tp
}

/// True when a function's first [`PROLOGUE_BYTES`] set up a frame pointer: x86_64's `[endbr64] push
/// rbp; mov rbp, rsp`; aarch64's `add x29, sp, #n` (`mov x29, sp` when n = 0) among its first four
/// instructions.
pub(crate) fn sets_up_frame(first: &[u8]) -> bool {
    if cfg!(target_arch = "aarch64") {
        aarch64_sets_up_frame(first)
    } else {
        x86_64_sets_up_frame(first)
    }
}

fn x86_64_sets_up_frame(first: &[u8]) -> bool {
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    const PROLOGUE: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
    first.get(..4) == Some(&PROLOGUE[..])
        || (first.get(..4) == Some(&ENDBR64[..]) && first.get(4..8) == Some(&PROLOGUE[..]))
}

fn aarch64_sets_up_frame(first: &[u8]) -> bool {
    // ADD (immediate), 64-bit, Rn = sp, Rd = x29: 1001_0001_0shi_iiii_iiii_ii11_1111_1101.
    const ADD_X29_SP: (u32, u32) = (0xff80_03ff, 0x9100_03fd);
    first
        .chunks_exact(4)
        .take(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .any(|insn| insn & ADD_X29_SP.0 == ADD_X29_SP.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_64_prologues_are_recognised() {
        assert!(x86_64_sets_up_frame(&[0x55, 0x48, 0x89, 0xe5, 0, 0, 0, 0]));
        assert!(x86_64_sets_up_frame(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        assert!(!x86_64_sets_up_frame(&[0x48, 0x83, 0xec, 0x18, 0, 0, 0, 0]));
    }

    #[test]
    fn aarch64_prologues_are_recognised() {
        let le = |w: &[u32]| w.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>();
        // stp x29, x30, [sp, #-16]!; mov x29, sp (as `aarch64-linux-gnu-objdump` prints them).
        assert!(aarch64_sets_up_frame(&le(&[
            0xa9bf_7bfd,
            0x9100_03fd,
            0,
            0
        ])));
        // sub sp, sp, #0x30; stp x29, x30, [sp, #0x20]; add x29, sp, #0x20.
        assert!(aarch64_sets_up_frame(&le(&[
            0xd100_c3ff,
            0xa902_7bfd,
            0x9100_83fd,
            0
        ])));
        // A leaf: add x0, x0, x1; ret. And add x29, x0, #0 (not from sp).
        assert!(!aarch64_sets_up_frame(&le(&[
            0x8b01_0000,
            0xd65f_03c0,
            0,
            0
        ])));
        assert!(!aarch64_sets_up_frame(&le(&[0x9100_001d, 0, 0, 0])));
    }
}
