//! The alternate signal stack of the threads the engine knows at birth: sized for the kernel's signal
//! frame on this CPU plus the samplers' handlers, with a guard page below it, and unmapped when its
//! thread exits.
//!
//! Why not std's: std gives each thread it starts `max(SIGSTKSZ, AT_MINSIGSTKSZ)` bytes, 8 KiB on
//! x86_64. The kernel's frame takes `AT_MINSIGSTKSZ` of that (3 376 B on an AVX2 machine, about 1.6 KiB
//! more with AVX-512's mask and upper ZMM state), and a debug build's deepest handler (the CPU sampler's
//! walk, then the capture handler) about 2.7 KiB more: 2 136 B were left on AVX2, under 500 B on AVX-512.
//! Ours is `AT_MINSIGSTKSZ` (read from the auxiliary vector at run time, so a wider register file gets a
//! bigger stack) plus [`HANDLER_RESERVE`], rounded up to pages.
//!
//! Owns: the mapping and the thread-local that unmaps it. Never: touched by a handler (handlers only run
//! on it); unmaps a stack still installed (it is disabled first).
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes kept for the handlers above the kernel's frame: six times the deepest use measured (about
/// 2.7 KiB, a debug build, 128-frame walks), for a libc or a build that needs more.
pub(crate) const HANDLER_RESERVE: usize = 16 * 1024;

/// `AT_MINSIGSTKSZ` (Linux's `include/uapi/linux/auxvec.h`; the libc crate lacks it for Linux): the
/// kernel's signal frame size on this CPU, given to every process since Linux 5.14 (x86) and 4.18 (arm64).
#[cfg(target_os = "linux")]
const AT_MINSIGSTKSZ: libc::c_ulong = 51;

#[cfg(target_os = "linux")]
const MAP_STACK: libc::c_int = libc::MAP_STACK;
#[cfg(not(target_os = "linux"))]
const MAP_STACK: libc::c_int = 0;

/// One thread's alternate stack: `len` bytes mapped at `map`, the lowest page of them the guard.
#[derive(Debug)]
pub(crate) struct AltStack {
    map: usize,
    len: usize,
}

thread_local! {
    /// The calling thread's stack of ours, if it has one; dropping it (at thread exit) unmaps it.
    static OURS: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

fn page_size() -> usize {
    // SAFETY: a pure query.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(4096)
}

/// The kernel's signal frame on this CPU: `AT_MINSIGSTKSZ`, or libc's `MINSIGSTKSZ` on a kernel that
/// does not give it.
pub(crate) fn kernel_frame() -> usize {
    #[cfg(target_os = "linux")]
    // SAFETY: a pure query of the auxiliary vector (0 when the entry is absent).
    let auxv = unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize;
    #[cfg(not(target_os = "linux"))]
    let auxv = 0;
    auxv.max(libc::MINSIGSTKSZ)
}

/// The usable size of the engine's alt stacks (without the guard page): the kernel's frame plus
/// [`HANDLER_RESERVE`], in whole pages. Computed once.
pub(crate) fn size() -> usize {
    static SIZE: AtomicUsize = AtomicUsize::new(0);
    let known = SIZE.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let page = page_size();
    let size = (kernel_frame() + HANDLER_RESERVE).div_ceil(page) * page;
    SIZE.store(size, Ordering::Relaxed);
    size
}

impl AltStack {
    /// Maps a stack of [`size`] bytes with a `PROT_NONE` guard page below it (off the supported
    /// platforms: nothing, and installing it does nothing).
    pub(crate) fn map() -> std::io::Result<AltStack> {
        if !super::SUPPORTED {
            return Ok(AltStack { map: 0, len: 0 });
        }
        let (page, len) = (page_size(), size() + page_size());
        // SAFETY: a fresh anonymous mapping; nothing else refers to it until it is installed.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | MAP_STACK,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = AltStack {
            map: map as usize,
            len,
        };
        // SAFETY: the lowest page of the mapping just made, ours alone.
        if unsafe { libc::mprotect(map, page, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// Makes this stack the calling thread's alternate signal stack until the thread exits (a thread-local
    /// unmaps it then, after std has disabled its own). A thread that has one of ours keeps it (this stack is
    /// unmapped). Fails, leaving the thread's alt stack as it was, only when `sigaltstack` refuses (the
    /// thread is running on its alt stack now).
    pub(crate) fn install(self) -> std::io::Result<()> {
        if self.len == 0 || OURS.with(|o| o.borrow().is_some()) {
            return Ok(());
        }
        let ss = libc::stack_t {
            ss_sp: self.base(),
            ss_flags: 0,
            ss_size: size(),
        };
        // SAFETY: the stack is mapped read-write for `size()` bytes above its guard and lives until this
        // thread's exit (held by `OURS`), when it is disabled before being unmapped.
        if unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        OURS.with(|o| *o.borrow_mut() = Some(self));
        Ok(())
    }

    fn base(&self) -> *mut c_void {
        (self.map + self.len - size()) as *mut c_void
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: a query, then (only if this thread still runs on our stack's registration) disabling
        // it, so no signal can land on memory we are about to unmap; the mapping is ours alone.
        unsafe {
            let mut now: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(std::ptr::null(), &mut now) == 0
                && now.ss_flags & libc::SS_DISABLE == 0
                && now.ss_sp == self.base()
            {
                let off = libc::stack_t {
                    ss_sp: std::ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: 0,
                };
                libc::sigaltstack(&off, std::ptr::null_mut());
            }
            libc::munmap(self.map as *mut c_void, self.len);
        }
    }
}

/// Maps and installs one for the calling thread (see [`AltStack::install`]); a thread with one keeps it. Fails
/// (the thread keeps the alt stack it had) when the mapping or `sigaltstack` fails.
pub(crate) fn install_alt_stack() -> std::io::Result<()> {
    if OURS.with(|o| o.borrow().is_some()) {
        return Ok(());
    }
    AltStack::map()?.install()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's alt stack `(ss_sp, ss_size)`, or None when disabled.
    fn current() -> Option<(usize, usize)> {
        // SAFETY: a query into a zeroed struct we own.
        let ss = unsafe {
            let mut ss: libc::stack_t = std::mem::zeroed();
            assert_eq!(libc::sigaltstack(std::ptr::null(), &mut ss), 0);
            ss
        };
        (ss.ss_flags & libc::SS_DISABLE == 0).then_some((ss.ss_sp as usize, ss.ss_size))
    }

    /// The permissions of the mapping holding `addr` in /proc/self/maps (e.g. "rw-p").
    fn perms_at(addr: usize) -> Option<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().find_map(|l| {
            let (range, rest) = l.split_once(' ')?;
            let (lo, hi) = range.split_once('-')?;
            let (lo, hi) = (
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
            );
            (lo <= addr && addr < hi).then(|| rest[..4].to_string())
        })
    }

    #[test]
    fn a_thread_gets_a_stack_sized_from_the_kernel_frame_with_a_guard_and_loses_it_at_exit() {
        let (sp, len) = std::thread::spawn(|| {
            let std_had = current();
            install_alt_stack().unwrap();
            let (sp, len) = current().expect("an alt stack installed");
            assert_ne!(Some((sp, len)), std_had, "std's alt stack was kept");
            assert_eq!(perms_at(sp).as_deref(), Some("rw-p"));
            assert_eq!(perms_at(sp - 1).as_deref(), Some("---p"), "no guard page");
            install_alt_stack().unwrap();
            assert_eq!(
                current(),
                Some((sp, len)),
                "a second install replaced the first"
            );
            (sp, len)
        })
        .join()
        .unwrap();
        assert!(len >= kernel_frame() + HANDLER_RESERVE, "{len} bytes");
        assert_eq!(len % page_size(), 0);
        // The thread has exited (join waits for its thread-locals' destructors): the guard is unmapped.
        assert_ne!(
            perms_at(sp - 1).as_deref(),
            Some("---p"),
            "the alt stack outlived its thread"
        );
    }
}
