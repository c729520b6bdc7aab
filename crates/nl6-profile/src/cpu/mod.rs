//! The CPU sampler: SIGPROF from per-thread CPU-time timers, frame-pointer stacks, the label set read
//! at sample time, aggregated by a collector thread.
//!
//! How it works: [`start`] installs the handler and arms, for every thread in `/proc/self/task`, a POSIX
//! timer on that thread's CPU clock that sends SIGPROF to that thread only (`timers`: per-thread timers
//! charge each thread exactly its own CPU time; a process-wide `setitimer` does not, golang/go#35057). The
//! signal handler unwinds the interrupted context, reads the thread's label and writes one slot of a static
//! lock-free `ring`. A collector thread (`nl6-cpu-collect`, unlabelled, sampled like any other) drains the
//! ring every 100 ms into a `(stack, label) → count` map (`window`) and keeps the timers in step with the threads:
//! each tick it compares the process's thread count with the one it knows and probes the ids the kernel
//! handed out since the last tick; only when one of them says something changed (or every 30 s) does
//! it list `/proc/self/task`, arming timers for new threads and deleting those of dead ones
//! (timers belong to the process and would leak). A tick allocates nothing and costs the same whatever
//! the number of threads.
//!
//! Coverage limit: every thread alive at [`start`] is armed before it returns, and a thread spawned
//! through `threads::spawn_recorded` (so `threads::spawn_labelled`) arms itself at birth. Any other thread started
//! during a profile (`std::thread::spawn`, a C library's thread) is armed by the collector's next tick:
//! its first **up to 100 ms** of CPU are not sampled, and a thread that lives less than that may not
//! appear at all. Waking more often would cost every profile CPU on the 2-core targets; spawn through the
//! helper instead.
//!
//! Rates: the kernel checks CPU timers on its tick, so a thread receives at most `CONFIG_HZ` signals a
//! second (250 on the kernels we target). Rates are capped at [`MAX_HZ`]; a sample is credited with
//! `1 + si_overrun` periods, so a slower delivery (another kernel, a signal still pending) still adds up
//! to the CPU time really used. CPU time = counts × `period_ns`, from samples actually taken.
//!
//! [`halt`] stops sampling from outside, whoever holds the session (the gate closing): the collector
//! sees it on its next tick (≤ 100 ms), stops sampling, deletes every timer and exits; the holder's
//! `take_window`/`stop` then return what was sampled up to the halt, and the sampler is free again once
//! the holder drops or stops its session.
//!
//! Threads it cannot arm (the kernel refuses a timer: `RLIMIT_SIGPENDING`, most often) are retried each
//! second, carried in every profile's [`CpuProfile::coverage`] (its comment), logged once and shown by
//! [`coverage`] (`coverage.rs`): a profile never covers fewer threads without saying so.
//!
//! Owns: the ring (static, ~1.1 MB of zero pages, touched as used), the timers, the collector thread. Never:
//! allocates, locks or panics in the handler; runs two sessions at once ([`CpuError::Busy`]); restores the
//! default SIGPROF action (see the crate-private `signal` module).
mod coverage;
mod ring;
mod tasks;
mod timers;
mod window;

use super::signal::{self, ErrnoGuard};
use super::unwind::{self, MAX_DEPTH};
use super::{labels, Stack};
pub(crate) use coverage::thread_name;
pub use coverage::{Coverage, UnarmedThread};
use ring::Ring;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};
pub(crate) use tasks::{list_tids, thread_count};
use timers::Timers;
use window::Window;

/// Default sampling rate, as Go's.
pub const DEFAULT_HZ: u32 = 100;

/// Highest rate honoured: the kernel delivers at most one CPU-timer signal per tick per thread
/// (`CONFIG_HZ` = 250 on the target kernels). Higher requests are capped here.
pub const MAX_HZ: u32 = 250;

/// How often the collector drains the ring and rescans the threads.
const RESCAN_EVERY: Duration = Duration::from_millis(100);
/// Why a CPU profile could not start.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CpuError {
    /// Another CPU profile is running (Display: "cpu profiling already in use").
    Busy,
    /// The OS refused what the engine was doing: `context` names it (`timer_create`, spawning the
    /// collector thread) and `source` is the OS's error (also [`std::error::Error::source`]). Display adds
    /// the remedy when the error is a limit (`RLIMIT_SIGPENDING`).
    Os {
        /// What the engine was doing.
        context: &'static str,
        /// The OS's error (shared, so the error stays `Clone`).
        source: Arc<std::io::Error>,
    },
    /// SIGPROF is not the engine's to take: another owner's handler is installed (and
    /// [`crate::SignalOptions::take_foreign`] is off), or `sigaction` failed.
    Signal(crate::SignalError),
    /// Not Linux on x86_64 or aarch64 (Display names this build's OS and architecture).
    Unsupported,
}

impl CpuError {
    fn os(context: &'static str, error: std::io::Error) -> CpuError {
        CpuError::Os {
            context,
            source: Arc::new(error),
        }
    }
}

/// Equal when the same variant says the same: `Os` errors by context and the OS's error kind and code.
impl PartialEq for CpuError {
    fn eq(&self, other: &CpuError) -> bool {
        match (self, other) {
            (CpuError::Busy, CpuError::Busy) | (CpuError::Unsupported, CpuError::Unsupported) => {
                true
            }
            (CpuError::Signal(a), CpuError::Signal(b)) => a == b,
            (
                CpuError::Os { context, source },
                CpuError::Os {
                    context: c,
                    source: s,
                },
            ) => {
                context == c
                    && source.kind() == s.kind()
                    && source.raw_os_error() == s.raw_os_error()
            }
            _ => false,
        }
    }
}
impl Eq for CpuError {}

impl std::fmt::Display for CpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuError::Busy => f.write_str("cpu profiling already in use"),
            CpuError::Os { context, source } => match source.raw_os_error() {
                Some(errno) if *context == TIMER_CREATE => f.write_str(&coverage::cause(errno)),
                _ => write!(f, "{context}: {source}"),
            },
            CpuError::Signal(e) => write!(f, "cpu profile: {e}"),
            CpuError::Unsupported => write!(f, "cpu profile: {}", signal::unsupported()),
        }
    }
}
impl std::error::Error for CpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CpuError::Signal(e) => Some(e),
            CpuError::Os { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// The context of a refused per-thread timer (its Display carries the remedy for a limit).
const TIMER_CREATE: &str = "timer_create";

/// One aggregated CPU sample: a stack, the label-set index at sample time (0 = none), and how many
/// signals landed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSample {
    /// Return addresses, leaf first.
    pub stack: Stack,
    /// Label-set index at sample time (0 = none; [`crate::labels::LabelSet::from_index`]).
    pub label: u16,
    /// Timer periods credited to this stack and label (one per signal plus its `si_overrun`).
    pub count: u64,
}

/// The result of a profiling window.
#[derive(Debug, Clone)]
pub struct CpuProfile {
    /// Wall-clock time the window began.
    pub start: SystemTime,
    /// Wall-clock length of the window.
    pub duration: Duration,
    /// Nanoseconds of CPU one sample stands for (1e9 / hz).
    pub period_ns: u64,
    /// The aggregated samples, one per distinct (stack, label).
    pub samples: Vec<CpuSample>,
    /// Samples dropped because buffers were full.
    pub lost: u64,
    /// The threads seen, and those the sampler could not arm (their CPU is missing).
    pub coverage: Coverage,
}

impl CpuProfile {
    /// Total CPU time the samples stand for.
    pub fn cpu_time(&self) -> Duration {
        let periods: u64 = self.samples.iter().map(|s| s.count).sum();
        Duration::from_nanos(periods.saturating_mul(self.period_ns))
    }
}

/// The rate actually used for a request: 0 means [`DEFAULT_HZ`], anything above [`MAX_HZ`] is capped.
pub fn effective_hz(requested: u32) -> u32 {
    match requested {
        0 => DEFAULT_HZ,
        hz => hz.min(MAX_HZ),
    }
}

/// Ring capacity: at 250 Hz on 2 busy cores, 4 s of samples between 100 ms drains.
const RING_SLOTS: usize = 2048;

static RING: Ring<RING_SLOTS> = Ring::new();
/// True while a session wants samples; the handler returns at once otherwise (late signals).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// True while a [`CpuSession`] exists.
static SESSION: AtomicBool = AtomicBool::new(false);
/// Periods dropped because the ring was full (process lifetime).
static LOST: AtomicU64 = AtomicU64::new(0);
/// Signals that produced a sample (process lifetime).
static SIGNALS: AtomicU64 = AtomicU64::new(0);
/// Sessions started (process lifetime): the running session's number.
static STARTED: AtomicU64 = AtomicU64::new(0);
/// The number of the last session [`halt`] stopped; the collector of session n runs while this is < n.
static HALTED: AtomicU64 = AtomicU64::new(0);

/// The SIGPROF handler. Follows the contract in [`super::signal`].
unsafe extern "C" fn on_sigprof(_sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let _errno = ErrnoGuard::save();
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: info and ctx are what the kernel passed to this SA_SIGINFO handler.
    let (overrun, regs) = unsafe { (signal::timer_overrun(info), unwind::regs_from_ucontext(ctx)) };
    let Some(regs) = regs else { return };
    let weight = overrun.saturating_add(1);
    let label = labels::current_index();
    let (bounds, unknown_tid) = match unwind::bounds_in_handler() {
        unwind::Bounds::Known(low, high) => (Some((low, high)), 0),
        unwind::Bounds::Unknown(tid) => (None, tid),
    };
    let written = RING.push(|slot| {
        slot.weight = weight;
        slot.label = label;
        slot.unknown_tid = unknown_tid;
        slot.rsp = regs.rsp;
        slot.depth = unwind::unwind_interrupted(regs, bounds, &mut slot.frames) as u16;
    });
    if written {
        SIGNALS.fetch_add(1, Ordering::Relaxed);
    } else {
        LOST.fetch_add(weight as u64, Ordering::Relaxed);
    }
}

/// Signals that produced a sample since the process started (for stress runs and diagnostics).
pub fn signals_taken() -> u64 {
    SIGNALS.load(Ordering::Relaxed)
}

/// The running (or last) session's coverage: the threads it could not arm a timer on, and why.
pub fn coverage() -> Coverage {
    coverage::current()
}

/// Installs the SIGPROF handler (it stays installed), so a stray SIGPROF before the first profile is
/// ignored instead of killing the process. The binary calls it at startup; [`start`] does it anyway.
/// Refuses, naming the owner, when another owner's SIGPROF handler is installed (see
/// [`crate::SignalOptions::take_foreign`]).
pub(crate) fn install_handler() -> Result<(), crate::SignalError> {
    signal::install(signal::CPU_SIGNAL, on_sigprof).map_err(|e| e.named(crate::symbols::symbolize))
}

/// Stops the running session's sampling within one collector tick (≤ 100 ms): no timer, no collector
/// thread. Its holder still owns it (so the sampler stays busy until it is stopped or dropped) and gets
/// the samples taken before the halt. A no-op when no session runs.
pub fn halt() {
    // fetch_max: two racing halts never move it back and un-halt a session.
    HALTED.fetch_max(STARTED.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// True when the sampler's SIGPROF handler is installed (it stays installed once a session has started,
/// so a late signal is ignored rather than killing the process).
pub fn handler_installed() -> bool {
    signal::is_ours(signal::CPU_SIGNAL, on_sigprof)
}

/// True while a CPU session exists.
pub fn is_running() -> bool {
    SESSION.load(Ordering::Acquire)
}

/// The timers of the running session, by tid (None between sessions). Locked by the collector's rescan,
/// by threads arming themselves at birth ([`arm_current_thread`]) and by stop; never by a handler.
static TIMERS: Mutex<Option<Timers>> = Mutex::new(None);

fn timers() -> std::sync::MutexGuard<'static, Option<Timers>> {
    TIMERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Arms the calling thread's timer now if a session runs, so a short-lived thread is sampled from its
/// first instruction instead of from the next rescan. Called at birth by `threads::spawn_recorded`.
pub(crate) fn arm_current_thread() {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    if let Some(t) = timers().as_mut() {
        let _ = t.arm_newborn(signal::gettid());
    }
}

/// Deletes the calling thread's timer as it ends (called by `threads::spawn_recorded` after the thread's
/// closure, also on unwind) and counts it out, so its exit does not make the next rescan list every
/// thread.
pub(crate) fn disarm_current_thread() {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    if let Some(t) = timers().as_mut() {
        t.disarm_ending(signal::gettid());
    }
}

// ---------------------------------------------------------------------------------------------------------
// Sessions.

/// Publishes stack bounds for threads the handler could not bound (the mapping holding the sample's
/// `RSP` in `/proc/self/maps`), for tids that still have a timer only: one whose timer is gone was
/// forgotten already (and its thread may be too), so learning it now would leave an entry nothing
/// forgets (contract in `unwind`).
fn learn_stack_tops(unknown: &[(i32, u64)], armed: impl Fn(i32) -> bool) {
    let unknown: Vec<&(i32, u64)> = unknown.iter().filter(|(tid, _)| armed(*tid)).collect();
    if unknown.is_empty() {
        return;
    }
    let Ok(maps) = super::maps::read_self() else {
        return;
    };
    for (tid, rsp) in unknown {
        if let Some((low, high)) = unwind::mapping_bounds(&maps, *rsp) {
            unwind::set_foreign_bounds(*tid, low, high);
        }
    }
}

struct Shared {
    window: Mutex<Window>,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A running CPU profile. Dropping it stops sampling (same as [`CpuSession::stop`]).
pub struct CpuSession {
    shared: Arc<Shared>,
    collector: Option<std::thread::JoinHandle<()>>,
    period_ns: u64,
}

impl std::fmt::Debug for CpuSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuSession")
            .field("period_ns", &self.period_ns)
            .finish_non_exhaustive()
    }
}

/// Starts sampling every thread at `hz` (0 = [`DEFAULT_HZ`], capped at [`MAX_HZ`]). Returns
/// [`CpuError::Busy`] if a session exists, [`CpuError::Signal`] if SIGPROF has another owner's handler.
pub fn start(hz: u32) -> Result<CpuSession, CpuError> {
    if !signal::SUPPORTED {
        return Err(CpuError::Unsupported);
    }
    if SESSION
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(CpuError::Busy);
    }
    // Numbered at once, before the slow part of the start (the code map, arming every thread): a halt
    // during that part then stops this session at its collector's first tick.
    let number = STARTED.fetch_add(1, Ordering::SeqCst) + 1;
    match start_inner(hz, number) {
        Ok(s) => Ok(s),
        Err(e) => {
            ACTIVE.store(false, Ordering::SeqCst);
            if let Some(mut t) = timers().take() {
                t.delete_all();
            }
            SESSION.store(false, Ordering::Release);
            Err(e)
        }
    }
}

fn start_inner(hz: u32, number: u64) -> Result<CpuSession, CpuError> {
    let period_ns = 1_000_000_000 / effective_hz(hz) as u64;
    install_handler().map_err(CpuError::Signal)?;
    unwind::init_thread_bounds();
    crate::heap::unsampled(unwind::learn_code);
    // Discard anything a handler published after the previous session ended.
    Window::new().drain_ring();
    let shared = Arc::new(Shared {
        window: Mutex::new(Window::new()),
        stop: Mutex::new(false),
        wake: Condvar::new(),
    });
    ACTIVE.store(true, Ordering::SeqCst);
    coverage::reset();
    let gaps = {
        let mut slot = timers();
        let t = slot.insert(Timers::new(period_ns));
        t.sync().map_err(|e| CpuError::os(TIMER_CREATE, e))?;
        unarmed_news(t)
    };
    // The collector logs, at its first tick: then the line counts the collector thread too.
    publish_unarmed(&shared, gaps, false);
    let for_collector = Arc::clone(&shared);
    let collector = std::thread::Builder::new()
        .name("nl6-cpu-collect".to_string())
        .spawn(move || collect(for_collector, number))
        .map_err(|e| CpuError::os("spawning the cpu collector", e))?;
    Ok(CpuSession {
        shared,
        collector: Some(collector),
        period_ns,
    })
}

/// The collector loop: rescan, drain, sleep; on stop, or when session `number` is halted, stop sampling
/// and delete every timer.
///
/// `start` has just armed every thread, so the loop sleeps first. Each tick compares the process's
/// thread count (the link count of `/proc/self/task`, one `stat`) with the known one and lists `/proc/self/task` only when they differ
/// or every `FULL_LIST_EVERY` ticks (`Timers::rescan`): a tick costs the same for 20 threads or 10 000
/// and allocates nothing. Threads nl6 spawns arm themselves at birth and count themselves in, so they
/// never need a listing; a foreign thread born in the same tick another one exits leaves the count
/// unchanged but is found by probing the ids handed out since the last tick (`cpu/tasks.rs`).
fn collect(shared: Arc<Shared>, number: u64) {
    unwind::init_thread_bounds();
    // Counted in at birth like threads nl6 spawns, so the first tick need not list every thread.
    arm_current_thread();
    let mut stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        // Spurious wakeups and EINTR only shorten one sleep.
        stop = shared
            .wake
            .wait_timeout(stop, RESCAN_EVERY)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if *stop {
            break;
        }
        if HALTED.load(Ordering::SeqCst) >= number {
            // Late signals find ACTIVE false and return; the holder's window keeps what came before.
            ACTIVE.store(false, Ordering::SeqCst);
            break;
        }
        drop(stop);
        let unknown = shared
            .window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain_ring();
        // Rescan first: learning then sees the timers as they are after this tick's deaths (and
        // forgets), under the same lock, so nothing is learnt for a tid the rescan just dropped.
        let gaps = timers().as_mut().and_then(|t| {
            let _ = t.rescan();
            learn_stack_tops(&unknown, |tid| t.is_armed(tid));
            unarmed_news(t)
        });
        publish_unarmed(&shared, gaps, true);
        stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
    }
    drop(stop);
    if let Some(mut t) = timers().take() {
        t.delete_all();
    }
}

/// The timers' unarmed threads when there are any or they just changed (armed count, copy), else None:
/// a tick with every thread armed copies nothing.
fn unarmed_news(t: &mut Timers) -> Option<(usize, std::collections::BTreeMap<i32, UnarmedThread>)> {
    let news =
        (t.unarmed_changed || !t.unarmed.is_empty()).then(|| (t.by_tid.len(), t.unarmed.clone()));
    t.unarmed_changed = false;
    news
}

/// Hands unarmed threads to the session's coverage (and its one log line) and to the open window. Called
/// without the timers' lock held (the window's lock is taken here).
fn publish_unarmed(
    shared: &Shared,
    gaps: Option<(usize, std::collections::BTreeMap<i32, UnarmedThread>)>,
    may_log: bool,
) {
    if let Some((armed, unarmed)) = gaps {
        coverage::publish(armed, &unarmed, may_log);
        let mut window = shared.window.lock().unwrap_or_else(|e| e.into_inner());
        window.coverage.observe(armed, &unarmed);
    }
}

impl CpuSession {
    /// Returns what was sampled since start (or the previous window) and keeps sampling. The next window
    /// starts with the threads still unarmed.
    pub fn take_window(&mut self) -> CpuProfile {
        let mut window = self.shared.window.lock().unwrap_or_else(|e| e.into_inner());
        window.drain_ring();
        let mut next = Window::new();
        let now = coverage::current();
        if !now.unarmed.is_empty() {
            next.coverage = now;
        }
        std::mem::replace(&mut *window, next).into_profile(self.period_ns)
    }

    /// Stops sampling and returns the last window.
    pub fn stop(mut self) -> CpuProfile {
        self.finish()
    }

    /// The period one sample stands for, in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    fn finish(&mut self) -> CpuProfile {
        if let Some(collector) = self.collector.take() {
            *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.shared.wake.notify_all();
            let _ = collector.join();
        }
        ACTIVE.store(false, Ordering::SeqCst);
        let profile = self.take_window();
        SESSION.store(false, Ordering::Release);
        profile
    }
}

impl Drop for CpuSession {
    fn drop(&mut self) {
        if self.collector.is_some() {
            let _ = self.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hz_is_defaulted_and_capped() {
        assert_eq!(effective_hz(0), DEFAULT_HZ);
        assert_eq!(effective_hz(100), 100);
        assert_eq!(effective_hz(1000), MAX_HZ);
    }
}
