//! A second per-thread CPU-time timer, the kernel's own, armed beside the engine's in the same thread and
//! over the same window: what it counts is what the kernel delivered, so a test can tell the periods the
//! kernel never signalled (it checks CPU timers only at its tick, and a thread that exits between ticks
//! takes the expiries of its last stretch with it; a loaded machine makes that stretch longer) from
//! samples the engine lost. Its handler adds `1 + si_overrun` to a process-wide count, as the engine's
//! sampler weighs its samples (the overrun from `timer_getoverrun`).
use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// The reference's signal: near the top of the realtime range, clear of the engine's (SIGPROF, 38).
fn signal() -> c_int {
    libc::SIGRTMAX() - 1
}

/// Periods delivered to every reference timer of this process since the last [`take`].
static PERIODS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The calling thread's reference timer (its handler asks the kernel for the overrun by id).
    static OWN: Cell<Option<usize>> = const { Cell::new(None) };
}

extern "C" fn on_expiry(_: c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let Some(id) = OWN.with(Cell::get) else {
        return; // a late signal of a timer already deleted: no period of any window
    };
    // SAFETY: a syscall on this thread's own timer (deleted only after the thread forgets it).
    let overrun = unsafe { libc::timer_getoverrun(id as libc::timer_t) }.max(0) as u64;
    PERIODS.fetch_add(1 + overrun, Ordering::Relaxed);
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler for a signal nobody else uses.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_expiry as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(libc::sigaction(signal(), &action, std::ptr::null_mut()), 0);
        }
    });
}

/// Returns the periods counted since the last call, and starts counting again from zero.
pub fn take() -> u64 {
    PERIODS.swap(0, Ordering::Relaxed)
}

/// A timer on the calling thread's CPU clock, deleted on drop.
pub struct ReferenceTimer(libc::timer_t);

impl ReferenceTimer {
    /// Arms one every `period` of this thread's CPU time, the first expiry at `phase` (0..1) of a period
    /// (the engine's timers start at a random phase too, so neither count is biased low).
    pub fn arm(period: Duration, phase: f64) -> ReferenceTimer {
        install();
        let first = period.mul_f64(phase.clamp(0.001, 1.0));
        let ts = |d: Duration| libc::timespec {
            tv_sec: d.as_secs() as _, // time_t: 64-bit on glibc, deprecated as a name on musl
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a zeroed sigevent naming this thread; the timer id is written by the kernel.
        unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = signal();
            sev.sigev_notify_thread_id = libc::syscall(libc::SYS_gettid) as c_int;
            let mut id: libc::timer_t = std::mem::zeroed();
            assert_eq!(
                libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut id),
                0,
                "timer_create: {}",
                std::io::Error::last_os_error()
            );
            let spec = libc::itimerspec {
                it_interval: ts(period),
                it_value: ts(first),
            };
            OWN.with(|o| o.set(Some(id as usize)));
            assert_eq!(libc::timer_settime(id, 0, &spec, std::ptr::null_mut()), 0);
            ReferenceTimer(id)
        }
    }
}

impl Drop for ReferenceTimer {
    fn drop(&mut self) {
        // SAFETY: our timer, deleted once (and forgotten first, so a late handler asks for none).
        OWN.with(|o| o.set(None));
        unsafe { libc::timer_delete(self.0) };
    }
}
