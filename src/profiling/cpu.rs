//! The CPU sampler: SIGPROF from per-thread CPU-time timers, frame-pointer stacks, the subsystem label read
//! at sample time, aggregated by a collector thread.
//!
//! How it works: [`start`] arms, for every thread in `/proc/self/task`, a POSIX timer on that thread's CPU
//! clock (`timer_create` on clock id `((!tid) << 3) | 6`, Linux's `CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD`,
//! as Go does) that sends SIGPROF to that thread only (`SIGEV_THREAD_ID`). Per-thread timers charge each
//! thread exactly its own CPU time; a process-wide `setitimer` does not (golang/go#35057). The signal
//! handler unwinds the interrupted context, reads the thread's label and writes one slot of a static
//! lock-free ring. A collector thread (`nl6-cpu-collect`, unlabelled, sampled like any other) rescans
//! `/proc/self/task` every 100 ms — arming timers for new threads, deleting those of dead ones (timers
//! belong to the process and would leak) — and drains the ring into a `(stack, label) → count` map.
//!
//! Rates: the kernel checks CPU timers on its tick, so a thread receives at most `CONFIG_HZ` signals a
//! second (250 on the kernels we target). Rates are capped at [`MAX_HZ`]; a sample is credited with
//! `1 + si_overrun` periods, so a slower delivery (another kernel, a signal still pending) still adds up
//! to the CPU time really used. CPU time = counts × `period_ns`, from samples actually taken.
//!
//! Owns: the ring (static, ~1.1 MB of zero pages, touched as used), the timers, the collector thread. Never:
//! allocates, locks or panics in the handler; runs two sessions at once ([`CpuError::Busy`]); restores the
//! default SIGPROF action (see [`super::signal`]).
use super::signal::{self, ErrnoGuard};
use super::unwind::{self, MAX_DEPTH};
use super::{labels, Stack};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Default sampling rate, as Go's.
pub const DEFAULT_HZ: u32 = 100;

/// Highest rate honoured: the kernel delivers at most one CPU-timer signal per tick per thread
/// (`CONFIG_HZ` = 250 on the target kernels). Higher requests are capped here.
pub const MAX_HZ: u32 = 250;

/// How often the collector rescans threads and drains the ring.
const RESCAN_EVERY: Duration = Duration::from_millis(100);

/// Why a CPU profile could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuError {
    /// Another CPU profile is running (Display: "cpu profiling already in use").
    Busy,
    /// The OS refused a timer or the signal handler (Display names the call and errno).
    Os(String),
}

impl std::fmt::Display for CpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuError::Busy => f.write_str("cpu profiling already in use"),
            CpuError::Os(m) => f.write_str(m),
        }
    }
}
impl std::error::Error for CpuError {}

/// One aggregated CPU sample: a stack, the subsystem label index at sample time (0 = none), and how many
/// signals landed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSample {
    pub stack: Stack,
    pub label: u16,
    /// Timer periods credited to this stack and label (one per signal plus its `si_overrun`).
    pub count: u64,
}

/// The result of a profiling window.
#[derive(Debug, Clone)]
pub struct CpuProfile {
    pub start: SystemTime,
    pub duration: Duration,
    /// Nanoseconds of CPU one sample stands for (1e9 / hz).
    pub period_ns: u64,
    pub samples: Vec<CpuSample>,
    /// Samples dropped because buffers were full.
    pub lost: u64,
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

/// Linux's clock id for a thread's CPU time (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
pub(crate) fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    ((!tid) << 3) | 6
}

// ---------------------------------------------------------------------------------------------------------
// The ring: fixed slots, each with its own state. Writers (signal handlers) claim an EMPTY slot with a CAS,
// fill it and publish it READY; the single drainer (under the window mutex) copies READY slots and frees
// them. A writer that finds no free slot in a few tries drops the sample and counts it.

const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;
/// Slots probed by a writer before it drops the sample.
const CLAIM_TRIES: usize = 4;
/// Ring capacity: at 250 Hz on 2 busy cores, 4 s of samples between 100 ms drains.
const RING_SLOTS: usize = 2048;

struct SlotData {
    weight: u32,
    label: u16,
    depth: u16,
    /// Nonzero: this thread's stack top is unknown (its tid); `rsp` lets the collector learn it.
    unknown_tid: i32,
    rsp: u64,
    frames: [u64; MAX_DEPTH],
}

struct Slot {
    state: AtomicU32,
    data: UnsafeCell<SlotData>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU32::new(EMPTY),
            data: UnsafeCell::new(SlotData {
                weight: 0,
                label: 0,
                depth: 0,
                unknown_tid: 0,
                rsp: 0,
                frames: [0; MAX_DEPTH],
            }),
        }
    }
}

struct Ring<const N: usize> {
    next: AtomicUsize,
    slots: [Slot; N],
}

// SAFETY: a slot's data is written only by the writer that moved it EMPTY→WRITING and read only by the
// drainer after it saw READY (Acquire), and freed (Release) only after reading: one owner at a time.
unsafe impl<const N: usize> Sync for Ring<N> {}

impl<const N: usize> Ring<N> {
    const fn new() -> Self {
        Ring {
            next: AtomicUsize::new(0),
            slots: [const { Slot::new() }; N],
        }
    }

    /// Claims a slot, lets `fill` write it, publishes it. False when the ring is full. Async-signal-safe.
    #[inline]
    fn push(&self, fill: impl FnOnce(&mut SlotData)) -> bool {
        for _ in 0..CLAIM_TRIES {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % N;
            let Some(slot) = self.slots.get(i) else {
                return false;
            };
            if slot
                .state
                .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: we own the slot until we publish it (see `impl Sync`).
                fill(unsafe { &mut *slot.data.get() });
                slot.state.store(READY, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Hands every published slot to `take` and frees it. Only one drainer may run at a time.
    fn drain(&self, mut take: impl FnMut(&SlotData)) -> usize {
        let mut n = 0;
        for slot in &self.slots {
            if slot.state.load(Ordering::Acquire) == READY {
                // SAFETY: READY slots belong to the (single) drainer until stored EMPTY.
                take(unsafe { &*slot.data.get() });
                slot.state.store(EMPTY, Ordering::Release);
                n += 1;
            }
        }
        n
    }
}

static RING: Ring<RING_SLOTS> = Ring::new();
/// True while a session wants samples; the handler returns at once otherwise (late signals).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// True while a [`CpuSession`] exists.
static SESSION: AtomicBool = AtomicBool::new(false);
/// Periods dropped because the ring was full (process lifetime).
static LOST: AtomicU64 = AtomicU64::new(0);
/// Signals that produced a sample (process lifetime).
static SIGNALS: AtomicU64 = AtomicU64::new(0);
/// Timers created and not yet deleted.
static LIVE_TIMERS: AtomicUsize = AtomicUsize::new(0);

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
    let (top, unknown_tid) = match unwind::stack_top_in_handler() {
        unwind::Top::Known(top) => (top, 0),
        unwind::Top::Unknown(tid) => (0, tid),
    };
    let written = RING.push(|slot| {
        slot.weight = weight;
        slot.label = label;
        slot.unknown_tid = unknown_tid;
        slot.rsp = regs.rsp;
        slot.depth = unwind::unwind_interrupted(regs, top, &mut slot.frames) as u16;
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

/// Timers currently created by the sampler (0 when no session runs: none leak).
pub fn live_timers() -> usize {
    LIVE_TIMERS.load(Ordering::Relaxed)
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

// ---------------------------------------------------------------------------------------------------------
// Timers (raw syscalls: the kernel's sigevent carries the target tid, which musl's struct does not expose).

const SIGEV_THREAD_ID: c_int = 4;

/// The kernel's `struct sigevent` (64 bytes) with the `_tid` member of its union.
#[repr(C)]
struct KernelSigevent {
    value: u64,
    signo: c_int,
    notify: c_int,
    tid: c_int,
    _pad: [c_int; 11],
}

/// Creates and arms a SIGPROF timer on `tid`'s CPU clock; returns the kernel timer id.
fn arm_timer(tid: i32, period_ns: u64) -> Result<c_int, std::io::Error> {
    let ev = KernelSigevent {
        value: 0,
        signo: signal::CPU_SIGNAL,
        notify: SIGEV_THREAD_ID,
        tid,
        _pad: [0; 11],
    };
    let mut id: c_int = 0;
    // SAFETY: ev and id outlive the call; the kernel reads 64 bytes of ev and writes one int to id.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            thread_cpu_clock(tid),
            &ev as *const KernelSigevent,
            &mut id,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    LIVE_TIMERS.fetch_add(1, Ordering::Relaxed);
    let period = libc::timespec {
        tv_sec: (period_ns / 1_000_000_000) as _,
        tv_nsec: (period_ns % 1_000_000_000) as _,
    };
    // The first expiry comes after a random fraction of a period: a thread that lives for less than one
    // period is then sampled with probability cpu/period instead of never (unbiased for short threads).
    let first_ns = 1 + random_u64(tid) % period_ns.max(1);
    let first = libc::timespec {
        tv_sec: (first_ns / 1_000_000_000) as _,
        tv_nsec: (first_ns % 1_000_000_000) as _,
    };
    let spec = libc::itimerspec {
        it_interval: period,
        it_value: first,
    };
    // SAFETY: spec outlives the call; the old-value pointer is null.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id,
            0,
            &spec as *const libc::itimerspec,
            std::ptr::null_mut::<u8>(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        delete_timer(id);
        return Err(err);
    }
    Ok(id)
}

/// A cheap non-cryptographic random number (SplitMix64 over a counter, the clock and `salt`).
fn random_u64(salt: i32) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    super::mix64(
        nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ ((salt as u64) << 32),
    )
}

fn delete_timer(id: c_int) {
    // SAFETY: deleting a timer id we created; a wrong id only returns EINVAL.
    if unsafe { libc::syscall(libc::SYS_timer_delete, id) } == 0 {
        LIVE_TIMERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Thread ids from the entry names of `/proc/self/task` (non-numeric names are skipped).
pub(crate) fn parse_tids<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<i32> {
    let mut tids: Vec<i32> = names
        .into_iter()
        .filter_map(|n| n.parse::<i32>().ok())
        .filter(|t| *t > 0)
        .collect();
    tids.sort_unstable();
    tids
}

/// The process's live thread ids, sorted.
pub(crate) fn list_tids() -> std::io::Result<Vec<i32>> {
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    Ok(parse_tids(names.iter().map(String::as_str)))
}

/// What to do after a rescan: tids to arm and tids whose timers to delete. Pure.
pub(crate) fn diff_tids(armed: &[i32], live: &[i32]) -> (Vec<i32>, Vec<i32>) {
    let arm = live
        .iter()
        .filter(|t| armed.binary_search(t).is_err())
        .copied()
        .collect();
    let delete = armed
        .iter()
        .filter(|t| live.binary_search(t).is_err())
        .copied()
        .collect();
    (arm, delete)
}

/// The timers of the running session, by tid (None between sessions). Locked by the collector's rescan,
/// by threads arming themselves at birth ([`arm_current_thread`]) and by stop; never by a handler.
static TIMERS: Mutex<Option<Timers>> = Mutex::new(None);

fn timers() -> std::sync::MutexGuard<'static, Option<Timers>> {
    TIMERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The timers of one session, by tid.
struct Timers {
    by_tid: HashMap<i32, c_int>,
    period_ns: u64,
}

impl Timers {
    fn arm(&mut self, tid: i32) -> Result<(), std::io::Error> {
        if !self.by_tid.contains_key(&tid) {
            self.by_tid.insert(tid, arm_timer(tid, self.period_ns)?);
        }
        Ok(())
    }

    /// Arms new threads and deletes timers of dead ones. Returns how many timers were armed.
    fn sync(&mut self) -> Result<usize, std::io::Error> {
        let live = list_tids()?;
        let mut armed: Vec<i32> = self.by_tid.keys().copied().collect();
        armed.sort_unstable();
        let (arm, delete) = diff_tids(&armed, &live);
        for tid in delete {
            if let Some(id) = self.by_tid.remove(&tid) {
                delete_timer(id);
            }
            unwind::forget_foreign(tid);
        }
        let mut n = 0;
        let mut first_err = None;
        for tid in arm {
            match self.arm(tid) {
                Ok(()) => n += 1,
                // The thread may have exited since the scan (EINVAL); remember other errors.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match first_err {
            Some(e) if self.by_tid.is_empty() => Err(e),
            _ => Ok(n),
        }
    }

    fn delete_all(&mut self) {
        for (_, id) in self.by_tid.drain() {
            delete_timer(id);
        }
    }
}

/// Arms the calling thread's timer now if a session runs, so a short-lived thread is sampled from its
/// first instruction instead of from the next rescan. Called at birth by `threads::spawn_recorded`.
pub(crate) fn arm_current_thread() {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    if let Some(t) = timers().as_mut() {
        let _ = t.arm(signal::gettid());
    }
}

// ---------------------------------------------------------------------------------------------------------
// Sessions.

struct Window {
    start: SystemTime,
    began: Instant,
    lost_at_start: u64,
    counts: HashMap<(Stack, u16), u64>,
}

impl Window {
    fn new() -> Window {
        Window {
            start: SystemTime::now(),
            began: Instant::now(),
            lost_at_start: LOST.load(Ordering::Relaxed),
            counts: HashMap::new(),
        }
    }

    /// Moves the ring's published samples into this window; returns `(tid, rsp)` of samples taken on
    /// threads whose stack top the handler did not know.
    fn drain_ring(&mut self) -> Vec<(i32, u64)> {
        let mut unknown = Vec::new();
        RING.drain(|s| {
            let depth = (s.depth as usize).min(MAX_DEPTH);
            let stack = s.frames.get(..depth).unwrap_or(&[]).to_vec();
            *self.counts.entry((stack, s.label)).or_insert(0) += s.weight as u64;
            if s.unknown_tid != 0 && !unknown.iter().any(|u: &(i32, u64)| u.0 == s.unknown_tid) {
                unknown.push((s.unknown_tid, s.rsp));
            }
        });
        unknown
    }

    fn into_profile(self, period_ns: u64) -> CpuProfile {
        let mut samples: Vec<CpuSample> = self
            .counts
            .into_iter()
            .map(|((stack, label), count)| CpuSample {
                stack,
                label,
                count,
            })
            .collect();
        samples.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.stack.cmp(&b.stack)));
        CpuProfile {
            start: self.start,
            duration: self.began.elapsed(),
            period_ns,
            samples,
            lost: LOST
                .load(Ordering::Relaxed)
                .saturating_sub(self.lost_at_start),
        }
    }
}

/// Publishes stack tops for threads the handler could not bound, from `/proc/self/maps`.
fn learn_stack_tops(unknown: &[(i32, u64)]) {
    if unknown.is_empty() {
        return;
    }
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for (tid, rsp) in unknown {
        if let Some(end) = unwind::mapping_end(&maps, *rsp) {
            unwind::set_foreign_top(*tid, end);
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

/// Starts sampling every thread at `hz` (0 = [`DEFAULT_HZ`], capped at [`MAX_HZ`]). Returns
/// [`CpuError::Busy`] if a session exists.
pub fn start(hz: u32) -> Result<CpuSession, CpuError> {
    if SESSION
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(CpuError::Busy);
    }
    match start_inner(hz) {
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

fn start_inner(hz: u32) -> Result<CpuSession, CpuError> {
    let period_ns = 1_000_000_000 / effective_hz(hz) as u64;
    signal::install(signal::CPU_SIGNAL, on_sigprof).map_err(CpuError::Os)?;
    unwind::init_thread_bounds();
    unwind::learn_text();
    // Discard anything a handler published after the previous session ended.
    Window::new().drain_ring();
    let shared = Arc::new(Shared {
        window: Mutex::new(Window::new()),
        stop: Mutex::new(false),
        wake: Condvar::new(),
    });
    ACTIVE.store(true, Ordering::SeqCst);
    {
        let mut slot = timers();
        let t = slot.insert(Timers {
            by_tid: HashMap::new(),
            period_ns,
        });
        t.sync()
            .map_err(|e| CpuError::Os(format!("timer_create: {e}")))?;
    }
    let for_collector = Arc::clone(&shared);
    let collector = std::thread::Builder::new()
        .name("nl6-cpu-collect".to_string())
        .spawn(move || collect(for_collector))
        .map_err(|e| CpuError::Os(format!("spawning the cpu collector: {e}")))?;
    Ok(CpuSession {
        shared,
        collector: Some(collector),
        period_ns,
    })
}

/// The collector loop: rescan, drain, sleep; on stop delete every timer.
fn collect(shared: Arc<Shared>) {
    unwind::init_thread_bounds();
    let mut stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        drop(stop);
        if let Some(t) = timers().as_mut() {
            let _ = t.sync();
        }
        let unknown = shared
            .window
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain_ring();
        learn_stack_tops(&unknown);
        stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
        if *stop {
            break;
        }
        // Spurious wakeups and EINTR only shorten one sleep.
        stop = shared
            .wake
            .wait_timeout(stop, RESCAN_EVERY)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if *stop {
            break;
        }
    }
    drop(stop);
    if let Some(mut t) = timers().take() {
        t.delete_all();
    }
}

impl CpuSession {
    /// Returns what was sampled since start (or the previous window) and keeps sampling.
    pub fn take_window(&mut self) -> CpuProfile {
        let mut window = self.shared.window.lock().unwrap_or_else(|e| e.into_inner());
        window.drain_ring();
        std::mem::replace(&mut *window, Window::new()).into_profile(self.period_ns)
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
    fn clock_id_matches_linux_thread_cpuclock() {
        // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED.
        assert_eq!(thread_cpu_clock(1), -10);
        assert_eq!(thread_cpu_clock(1234), (!1234 << 3) | 4 | 2);
        // The kernel agrees: the clock of our own tid reads the same order of time as CLOCK_THREAD_CPUTIME_ID.
        let mut a = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writing one timespec we own.
        let rc = unsafe { libc::clock_gettime(thread_cpu_clock(signal::gettid()), &mut a) };
        assert_eq!(rc, 0, "the per-thread clock id was rejected");
    }

    #[test]
    fn hz_is_defaulted_and_capped() {
        assert_eq!(effective_hz(0), DEFAULT_HZ);
        assert_eq!(effective_hz(100), 100);
        assert_eq!(effective_hz(1000), MAX_HZ);
    }

    #[test]
    fn tids_parse_and_diff() {
        assert_eq!(
            parse_tids(["12", "3", "self", "", "-4", "7"]),
            vec![3, 7, 12]
        );
        let (arm, del) = diff_tids(&[3, 7, 12], &[3, 9, 12, 20]);
        assert_eq!(arm, vec![9, 20]);
        assert_eq!(del, vec![7]);
    }

    #[test]
    fn ring_publishes_drains_and_drops_when_full() {
        let ring: Box<Ring<4>> = Box::new(Ring::new());
        for i in 0..4u16 {
            assert!(ring.push(|s| {
                s.label = i;
                s.weight = 1;
                s.depth = 1;
                s.frames[0] = 100 + i as u64;
            }));
        }
        // Full: the fifth push finds no EMPTY slot and drops.
        assert!(!ring.push(|s| s.label = 99));
        let mut seen = Vec::new();
        assert_eq!(ring.drain(|s| seen.push((s.label, s.frames[0]))), 4);
        seen.sort();
        assert_eq!(seen, vec![(0, 100), (1, 101), (2, 102), (3, 103)]);
        // Drained slots are free again; a slot being written is not drained.
        assert!(ring.push(|s| s.label = 7));
        ring.slots[1].state.store(WRITING, Ordering::Relaxed);
        let mut labels = Vec::new();
        ring.drain(|s| labels.push(s.label));
        assert_eq!(labels, vec![7]);
        assert_eq!(ring.slots[1].state.load(Ordering::Relaxed), WRITING);
    }
}
