//! The handler benches' stimulus: the calling thread sends itself SIGPROF with `tgkill` from the bottom of
//! a chain of [`DEPTH`] Rust frames, so every sample is taken inside libc's frameless `syscall` wrapper
//! under a real frame-pointer chain. Shared by `handler_cost` and `pprof-rs-compare`'s `handler` mode.
use std::hint::black_box;

/// Rust frames between the bench loop and the signal.
pub const DEPTH: u32 = 20;
/// Signals per round (below the CPU sampler ring's capacity, so nothing is dropped).
pub const BATCH: u32 = 1000;

#[inline(never)]
fn signal_self(n: u32) {
    // SAFETY: getpid/gettid have no preconditions; tgkill to our own thread with a handled signal.
    unsafe {
        let (pid, tid) = (libc::getpid(), libc::syscall(libc::SYS_gettid));
        for _ in 0..n {
            libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGPROF);
        }
    }
}

/// Recurses `depth` frames, then signals itself `n` times.
#[inline(never)]
pub fn nested(depth: u32, n: u32) -> u32 {
    if depth == 0 {
        signal_self(n);
        return 0;
    }
    black_box(nested(black_box(depth - 1), n)) + 1
}
