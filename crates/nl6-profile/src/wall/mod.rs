//! # Wall-clock profiles: where every thread spends its time, running or waiting
//!
//! [`start`] begins a session: one sampler thread wakes at a fixed wall-clock rate (99 Hz by default, as
//! Go's fgprof), knows the process's threads (listing `/proc/self/task` again when their count changes, and
//! every tenth tick), and takes the stack of every thread but itself — running, parked
//! on a lock, asleep, blocked in `poll` — with the all-thread capture's signal and slots (`threads`), each
//! with the subsystem label it had at that instant and its state (`state`: the kernel's word for it,
//! refined by the interrupted instruction). [`WallSession::stop`] returns the [`WallProfile`];
//! [`encode`] writes it in fgprof's shape (sample types `samples/count` and `time/nanoseconds`, period
//! type `wallclock/nanoseconds`), which Grafana Alloy's `profile.fgprof`, Pyroscope and `go tool pprof`
//! read as they read Go's.
//!
//! ## Cost, bounded
//! Signalling a thread and walking its stack costs it (and the process) some microseconds of CPU; reading
//! its state from `/proc` a few more (its `stat` and `wchan` stay open across ticks for up to
//! `state::FD_BUDGET` threads, read again in place). A tick samples at most [`WallConfig::max_threads`] threads
//! ([`DEFAULT_MAX_THREADS`]); with more, it takes a window that rotates over the thread list, and each
//! sample's `time` stands for `threads / sampled` periods, so totals stay right and every thread is seen
//! equally often (`pick`). The `samples` value counts stacks actually taken.
//!
//! ## What embedders must know
//! Every sampled thread gets a signal (the stack-capture signal, `SA_RESTART`) up to 99 times a second.
//! Calls that the kernel never restarts after a handler — socket calls with a timeout, `poll`,
//! `epoll_wait`, `nanosleep`, `accept` with `SO_RCVTIMEO`… (signal(7)) — then return `EINTR`
//! ([`std::io::ErrorKind::Interrupted`]); a blocking loop must retry it, re-computing what is left of its
//! timeout: a wait that ends at the first signal gives up 10 ms into a 50 ms wait. `std::thread::sleep`,
//! `Mutex`, `Condvar::wait_timeout` (to the same deadline), `mpsc::Receiver::recv_timeout`,
//! `TcpStream::connect_timeout`, `TcpListener::accept` and `write_all`/`read_exact` already do; a bare
//! `read`/`recv_from` with a timeout, `poll` and `epoll_wait` do not, nor does a non-blocking send's wait
//! for room.
//!
//! One session at a time ([`WallError::Busy`]); a thread that does not answer within the tick is counted
//! in [`WallProfile::unanswered`] and its time is shown under a frame saying so, never dropped.
//!
//! Never: signals its own sampler thread; holds the capture lock across more than one tick; runs longer
//! than its session.
#![forbid(unsafe_code)]

mod encode;
mod pick;
mod state;

pub use encode::encode;

use crate::threads::{self, Missing};
use crate::Stack;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Ticks a second by default (fgprof's rate: 99, not 100, so ticks do not line up with 100 Hz work).
pub const DEFAULT_HZ: u32 = 99;
/// Threads sampled a tick by default; more are taken in turns and weighted.
pub const DEFAULT_MAX_THREADS: usize = 32;
/// Highest rate accepted.
pub const MAX_HZ: u32 = 1000;

/// A session's settings: [`WallConfig::default`], then the builder methods.
///
/// ```
/// let config = nl6_profile::wall::WallConfig::default().hz(49).max_threads(64);
/// assert_eq!((config.hz, config.max_threads), (49, 64));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WallConfig {
    /// Ticks a second (1..=[`MAX_HZ`]).
    pub hz: u32,
    /// Threads sampled a tick at most (≥ 1).
    pub max_threads: usize,
}

impl Default for WallConfig {
    fn default() -> WallConfig {
        WallConfig {
            hz: DEFAULT_HZ,
            max_threads: DEFAULT_MAX_THREADS,
        }
    }
}

impl WallConfig {
    /// This config ticking `hz` times a second (checked by [`start_with`]).
    pub fn hz(mut self, hz: u32) -> WallConfig {
        self.hz = hz;
        self
    }

    /// This config sampling at most `n` threads a tick (checked by [`start_with`]).
    pub fn max_threads(mut self, n: usize) -> WallConfig {
        self.max_threads = n;
        self
    }
}

/// Why a session could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum WallError {
    /// Another wall-clock session runs (one at a time).
    Busy,
    /// A setting out of range: which, and the range.
    Config(String),
    /// The sampler thread could not be spawned.
    Os(std::io::Error),
    /// The capture signal's handler could not be installed (another owner holds the signal, say).
    Signal(crate::SignalError),
}

impl std::fmt::Display for WallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WallError::Busy => f.write_str("wall-clock profiling already in use"),
            WallError::Config(what) => write!(f, "wall-clock profile settings: {what}"),
            WallError::Os(e) => write!(f, "wall-clock profile: {e}"),
            WallError::Signal(e) => write!(f, "wall-clock profile: {e}"),
        }
    }
}

impl std::error::Error for WallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WallError::Os(e) => Some(e),
            WallError::Signal(e) => Some(e),
            _ => None,
        }
    }
}

/// One distinct (stack, label, state) of a profile and what it sums to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WallSample {
    /// Return addresses, leaf first (the interrupted instruction at index 0); empty when the thread did
    /// not answer (`missing` says why).
    pub stack: Stack,
    /// Subsystem label index (0 = none).
    pub label: u16,
    /// The thread's state word (`running`, `syscall`, `semacquire`, `IO wait`, `sleep`…).
    pub state: &'static str,
    /// Why the stack is empty, when it is.
    pub missing: Option<Missing>,
    /// Stacks taken.
    pub count: u64,
    /// Wall-clock time they stand for (weighted when a tick sampled fewer threads than there were).
    pub nanos: u64,
}

/// What a session sampled.
#[derive(Debug, Clone)]
pub struct WallProfile {
    /// When it started.
    pub start: SystemTime,
    /// How long it ran.
    pub duration: Duration,
    /// Nanoseconds between ticks.
    pub period_ns: u64,
    /// Ticks taken.
    pub ticks: u64,
    /// Stacks asked for that did not come back in time (their time is in samples with `missing`).
    pub unanswered: u64,
    /// Ticks on which there were more threads than the cap.
    pub capped_ticks: u64,
    /// Distinct (stack, label, state).
    pub samples: Vec<WallSample>,
}

type Key = (Stack, u16, &'static str, Option<Missing>);

/// What the sampler accumulates.
#[derive(Default)]
struct Acc {
    by_key: HashMap<Key, (u64, u64)>,
    ticks: u64,
    unanswered: u64,
    capped_ticks: u64,
}

/// A running session; dropping it stops the sampler (nothing is returned).
pub struct WallSession {
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<Acc>>,
    start: SystemTime,
    started: Instant,
    period_ns: u64,
}

impl std::fmt::Debug for WallSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WallSession")
            .field("start", &self.start)
            .field("period_ns", &self.period_ns)
            .field("stopping", &self.stop.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Whether a session runs (one at a time).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Serialises starts against the flag (outside handlers only).
static STARTING: Mutex<()> = Mutex::new(());

/// Starts a session with the default settings.
pub fn start() -> Result<WallSession, WallError> {
    start_with(WallConfig::default())
}

/// Starts a session with `config`.
pub fn start_with(config: WallConfig) -> Result<WallSession, WallError> {
    if !(1..=MAX_HZ).contains(&config.hz) {
        return Err(WallError::Config(format!(
            "hz={} is out of range 1..={MAX_HZ}",
            config.hz
        )));
    }
    if config.max_threads == 0 {
        return Err(WallError::Config("max_threads=0: at least 1".into()));
    }
    let _serial = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if RUNNING.swap(true, Ordering::SeqCst) {
        return Err(WallError::Busy);
    }
    if let Err(e) = threads::install_handler() {
        RUNNING.store(false, Ordering::SeqCst);
        return Err(WallError::Signal(e));
    }
    let ready = {
        crate::heap::unsampled(crate::unwind::learn_code);
        let stop = Arc::new(AtomicBool::new(false));
        let period_ns = 1_000_000_000 / u64::from(config.hz);
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("pprof-wall".into())
            .spawn(move || sample_until(&flag, period_ns, config.max_threads))
            .map(|h| (stop, h, period_ns))
    };
    match ready {
        Ok((stop, h, period_ns)) => Ok(WallSession {
            stop,
            sampler: Some(h),
            start: SystemTime::now(),
            started: Instant::now(),
            period_ns,
        }),
        Err(e) => {
            RUNNING.store(false, Ordering::SeqCst);
            Err(WallError::Os(e))
        }
    }
}

/// Whether a session runs now.
pub fn is_running() -> bool {
    RUNNING.load(Ordering::SeqCst)
}

impl WallSession {
    /// Stops sampling and returns what was sampled.
    pub fn stop(mut self) -> WallProfile {
        let acc = self.finish();
        let samples = acc
            .by_key
            .into_iter()
            .map(
                |((stack, label, state, missing), (count, nanos))| WallSample {
                    stack,
                    label,
                    state,
                    missing,
                    count,
                    nanos,
                },
            )
            .collect();
        WallProfile {
            start: self.start,
            duration: self.started.elapsed(),
            period_ns: self.period_ns,
            ticks: acc.ticks,
            unanswered: acc.unanswered,
            capped_ticks: acc.capped_ticks,
            samples,
        }
    }

    fn finish(&mut self) -> Acc {
        self.stop.store(true, Ordering::SeqCst);
        let acc = self
            .sampler
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        RUNNING.store(false, Ordering::SeqCst);
        acc
    }
}

impl Drop for WallSession {
    fn drop(&mut self) {
        if self.sampler.is_some() {
            self.finish();
        }
    }
}

/// The sampler thread: one tick every `period_ns` (on an absolute schedule: a late tick is not made up
/// for twice), until `stop`.
fn sample_until(stop: &AtomicBool, period_ns: u64, max_threads: usize) -> Acc {
    let me = crate::signal::gettid();
    let code = state::Code::open();
    let mut kernel = state::Kernel::new(state::FD_BUDGET);
    let mut picker = pick::Picker::new(max_threads);
    let mut roster = Roster::default();
    let mut learnt = Vec::new();
    let mut acc = Acc::default();
    let period = Duration::from_nanos(period_ns);
    let mut next = Instant::now() + period;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
            continue;
        }
        next += period;
        if next < now {
            next = now + period; // fell behind: skip the missed ticks rather than burst
        }
        let tids = roster.current(me);
        kernel.keep_only(tids);
        let readers = Readers {
            code: &code,
            kernel: &mut kernel,
        };
        tick(tids, readers, &mut picker, &mut learnt, &mut acc, period_ns);
    }
    threads::forget_learnt(&learnt);
    acc
}

/// Ticks between two listings of `/proc/self/task` while the thread count stays the same.
const RELIST_EVERY: u32 = 10;

/// The threads a tick samples. Listing `/proc/self/task` reads one entry per thread (a quarter of a
/// tick's cost at 2 000 threads), so the list is kept and read again only when the thread count (one
/// `stat`, the same cost for any count) changes, or every [`RELIST_EVERY`] ticks: a thread that ends and
/// another that starts between two listings leave the count alone, so the newcomer waits at most that
/// long (~100 ms at 99 Hz), and the one that ended is skipped by the capture, which finds it gone.
#[derive(Default)]
struct Roster {
    tids: Vec<i32>,
    count: Option<usize>,
    since: u32,
}

impl Roster {
    /// Every thread but `me`, sorted.
    fn current(&mut self, me: i32) -> &[i32] {
        self.since += 1;
        let count = crate::cpu::thread_count();
        if count.is_none() || count != self.count || self.since >= RELIST_EVERY {
            self.tids = crate::cpu::list_tids().unwrap_or_default();
            self.tids.retain(|t| *t != me);
            self.tids.sort_unstable();
            self.count = count;
            self.since = 0;
        }
        &self.tids
    }
}

/// What a tick reads a thread's state with: its kernel files and this process's code.
struct Readers<'a> {
    code: &'a state::Code,
    kernel: &'a mut state::Kernel,
}

/// One tick: the threads given (at most the picker's cap of them), each one's state read first, then
/// its stack.
fn tick(
    tids: &[i32],
    readers: Readers<'_>,
    picker: &mut pick::Picker,
    learnt: &mut Vec<i32>,
    acc: &mut Acc,
    period_ns: u64,
) {
    let pick = picker.pick(tids, period_ns);
    acc.ticks += 1;
    acc.capped_ticks += u64::from(pick.tids.len() < tids.len());
    let states: HashMap<i32, &'static str> = pick
        .tids
        .iter()
        .map(|t| (*t, readers.kernel.state(*t)))
        .collect();
    // A tick's answers must come within the tick, or the next would queue behind it.
    let timeout = Duration::from_nanos(period_ns).max(Duration::from_millis(5));
    for t in threads::capture_tids(&pick.tids, timeout, learnt) {
        let kernel = states.get(&t.tid).copied().unwrap_or("running");
        let state = state::refine(kernel, t.stack.first().copied(), readers.code);
        acc.unanswered += u64::from(t.missing.is_some());
        let e = acc
            .by_key
            .entry((t.stack, t.label, state, t.missing))
            .or_default();
        e.0 += 1;
        e.1 += pick.weight_ns;
    }
}

/// Serialises this crate's unit tests that start sessions (one runs at a time); it lives with the
/// thread captures (a lower layer), whose own tests must not overlap a session either.
#[cfg(test)]
pub(crate) use crate::threads::TEST_WALL_SESSIONS as TEST_SESSIONS;

#[cfg(test)]
mod tests;
