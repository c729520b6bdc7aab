//! The thread-safe gate: runs the transitions [`super::state`] computes, owns the running push (through
//! the [`Pusher`] port), publishes a snapshot for readers, and keeps the revert timer (`revert`).
//!
//! Locks and threads:
//! - `turns` ([`super::turn`]) serialises transitions, first come first served, and is held across a
//!   push's bounded stop (up to 20 s against a hanging collector). A `POST` waits at most [`POST_WAIT`]
//!   for its turn and otherwise gets [`PostError::Busy`] (409) with the state unchanged. Served over
//!   HTTP it waits on no thread: [`Gate::post_or_queue`] returns a [`PendingPost`] that the server parks
//!   and finishes when woken or at its deadline, so POSTs behind a flush never take the server's workers;
//!   startup, shutdown and the revert timer wait for their turn on their own threads.
//!   `state` is locked only by the turn's holder. Readers take neither.
//! - `published` holds an `Arc` of the state as of the last completed transition; [`Gate::view`] and
//!   [`Gate::is_open`] clone it under a lock held for a pointer copy, so `GET` never waits behind a
//!   transition in progress.
//! - `run` holds the running push; it is locked only to put, take, or read its status (never across a
//!   stop or a start).
//! - The revert timer is one thread that exists only while a revert is pending. The POST that asks for a
//!   `duration` starts it (or keeps the running one) **before** any action runs, so when it cannot start
//!   (`RLIMIT_NPROC`, out of memory) the POST fails with [`PostError::RevertUnavailable`] (500) and
//!   nothing changed: a duration is a promise. The timer
//!   waits on the monotonic clock (`Revert::due`), so a wall-clock step neither fires a revert early nor
//!   holds it back; every transition bumps a generation number and sets the next due time (or none).
//!
//! - A close is visible to the pull surface the moment it **begins**: `closes` counts closing
//!   transitions, odd while one runs (through a push's flush), so [`Gate::open_epoch`] is `None` during
//!   a close and different after it; a timed pull request compares it with the epoch it began in. The
//!   close hook ([`Gate::with_close_hook`]; the binary halts the CPU sampler with it) runs at that moment
//!   too, before the push is stopped, so "gate closed = no profiler thread, no timer" does not wait for
//!   a flush or a hung upload.
//!
//! Never does network I/O: the push behind the port does. Every transition logs exactly one line starting
//! `[profiling] `.
#![forbid(unsafe_code)]

mod revert;

use super::port::{PushRun, PushStatus, Pusher, StartError};
use super::state::{
    self, Action, GateState, Now, PostRequest, PushRefusal, Startup, Transition, ADHOC_ENV,
};
use super::turn::{Ticket, Turn, Turns, Wake};
use revert::{spawn_timer_thread, RevertTimer, Spawner};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How long closing the gate waits for the push's final flush (two upload timeouts).
pub const STOP_BUDGET: Duration = Duration::from_secs(20);

/// How long a `POST` waits for a transition in progress before answering [`PostError::Busy`]. Short, so
/// a few POSTs behind a 20 s flush cannot take every server worker (GET must answer within 1 s).
pub const POST_WAIT: Duration = Duration::from_secs(1);

/// The message of [`PostError::Busy`] (the REST 409).
pub const BUSY_MESSAGE: &str = "a profiling transition is in progress; retry";

/// What `GET /api/v1/profiling` reports. Never holds credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateView {
    pub enabled: bool,
    pub startup_flag: Option<String>,
    /// The push address in force (None: pull-only or closed).
    pub server_address: Option<String>,
    pub pushing: bool,
    /// When a pending revert happens.
    pub revert_at: Option<SystemTime>,
    pub sdk_errors: u64,
    pub last_error: Option<String>,
    pub uploads: u64,
    pub last_upload_at: Option<SystemTime>,
    /// Set when no push runs and the figures above are those of the last one, which this names.
    pub last_push: Option<LastPush>,
}

/// The push whose figures a [`GateView`] shows once it has stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPush {
    pub address: String,
    pub stopped_at: SystemTime,
}

/// A stopped push's final figures, kept until the next push starts.
struct StoppedPush {
    push: LastPush,
    status: PushStatus,
}

/// Why a POST did not (fully) take effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// The request was refused; nothing changed (400).
    Invalid(String),
    /// The gate is open but the push could not start (500, with the state).
    PushFailed {
        message: String,
        view: Box<GateView>,
    },
    /// Another transition (typically a closing push's flush) held the gate for longer than [`POST_WAIT`];
    /// nothing changed (409, with the state as of the last completed transition).
    Busy { view: Box<GateView> },
    /// The POST asks for a `duration` but the revert timer's thread cannot start; nothing changed (500,
    /// with the state).
    RevertUnavailable {
        message: String,
        view: Box<GateView>,
    },
}

/// Why a transition's push did not start: the gate is open without it (pull-only), the POST answers 500
/// with this message, and `GET` shows it as `last_error`.
#[derive(Debug)]
pub enum PushFailure {
    /// The gate refused to start it.
    Refused(PushRefusal),
    /// The push behind the port did not start.
    Start(StartError),
}

impl std::fmt::Display for PushFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushFailure::Refused(e) => write!(f, "{e}"),
            PushFailure::Start(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PushFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PushFailure::Refused(e) => Some(e),
            PushFailure::Start(e) => Some(e),
        }
    }
}

type EnvCheck = Box<dyn Fn() -> bool + Send + Sync>;
type LogSink = Box<dyn Fn(&str) + Send + Sync>;
type WallClock = Box<dyn Fn() -> SystemTime + Send + Sync>;
type CloseHook = Box<dyn Fn() + Send + Sync>;
struct Published {
    state: GateState,
    /// The push's status when it was taken out to stop, so GET has numbers while it flushes.
    stopping_status: PushStatus,
}

struct Inner {
    startup: Startup,
    pusher: Box<dyn Pusher>,
    turns: Turns,
    state: Mutex<GateState>,
    published: Mutex<Arc<Published>>,
    run: Mutex<Option<Box<dyn PushRun>>>,
    timer: Arc<RevertTimer>,
    spawn: Spawner,
    adhoc_env_set: EnvCheck,
    log: LogSink,
    stop_budget: Duration,
    /// Dates reverts (display only); `SystemTime::now` except in tests that step it.
    wall_clock: WallClock,
    /// Closing transitions begun plus those completed: odd while a close runs.
    closes: AtomicU64,
    /// Runs when a close begins (the binary: halt the CPU sampler).
    close_hook: Option<CloseHook>,
    /// The last push's figures, shown while none runs (a stop keeps them, so its outcome stays readable).
    last_push: Mutex<Option<StoppedPush>>,
}

/// The gate. Cheap to clone (shared).
#[derive(Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gate {
    /// A closed gate that reads [`ADHOC_ENV`] from the process environment and logs to stderr. Call
    /// [`Gate::start`] to apply the startup flag.
    pub fn new(startup: Startup, pusher: Box<dyn Pusher>) -> Gate {
        Gate::with_hooks(
            startup,
            pusher,
            Box::new(|| std::env::var_os(ADHOC_ENV).is_some()),
            Box::new(|line| eprintln!("{line}")),
            STOP_BUDGET,
        )
    }

    /// A closed gate with the environment check, the log sink and the stop budget given (for tests).
    pub fn with_hooks(
        startup: Startup,
        pusher: Box<dyn Pusher>,
        adhoc_env_set: EnvCheck,
        log: LogSink,
        stop_budget: Duration,
    ) -> Gate {
        let published = Arc::new(Published {
            state: GateState::default(),
            stopping_status: PushStatus::default(),
        });
        Gate {
            inner: Arc::new(Inner {
                startup,
                pusher,
                turns: Turns::default(),
                state: Mutex::new(GateState::default()),
                published: Mutex::new(published),
                run: Mutex::new(None),
                timer: Arc::default(),
                spawn: spawn_timer_thread,
                adhoc_env_set,
                log,
                stop_budget,
                wall_clock: Box::new(SystemTime::now),
                closes: AtomicU64::new(0),
                close_hook: None,
                last_push: Mutex::new(None),
            }),
        }
    }

    /// Runs `hook` whenever a close begins, before a running push is stopped. Only on a gate not yet
    /// cloned (call it right after [`Gate::new`]).
    pub fn with_close_hook(mut self, hook: CloseHook) -> Gate {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.close_hook = Some(hook),
            None => panic!("set the close hook before cloning the gate"),
        }
        self
    }

    /// Applies the startup flag (opens the gate with a push when `-profiling-pyroscope` was given).
    /// Returns why the push did not start, if it did not.
    pub fn start(&self) -> Result<(), PushFailure> {
        let _turn = self.inner.turns.take(None);
        let mut st = lock(&self.inner.state);
        let t = state::on_startup(&self.inner.startup, (self.inner.adhoc_env_set)());
        match Inner::execute(&self.inner, &mut st, t).failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Applies a POST. The response is written after this returns (so after a closing push's flush).
    /// Waits at most [`POST_WAIT`] behind another transition, then answers [`PostError::Busy`].
    pub fn post(&self, req: &PostRequest) -> Result<GateView, PostError> {
        match self.inner.turns.take(Some(POST_WAIT)) {
            Some(turn) => self.apply_post(turn, req),
            None => Err(self.busy()),
        }
    }

    /// Applies a POST at once when no transition runs or waits; otherwise queues it, without waiting, as
    /// a [`PendingPost`] that keeps its place for at most [`POST_WAIT`].
    pub fn post_or_queue(
        &self,
        req: PostRequest,
    ) -> Result<Result<GateView, PostError>, PendingPost> {
        match self.inner.turns.take_or_queue() {
            Ok(turn) => Ok(self.apply_post(turn, &req)),
            Err(ticket) => Err(PendingPost {
                gate: self.clone(),
                ticket: Some(ticket),
                req,
                deadline: Instant::now() + POST_WAIT,
            }),
        }
    }

    fn busy(&self) -> PostError {
        PostError::Busy {
            view: Box::new(self.view()),
        }
    }

    fn apply_post(&self, turn: Turn<'_>, req: &PostRequest) -> Result<GateView, PostError> {
        let mut st = lock(&self.inner.state);
        let t = state::on_post(
            &st,
            req,
            &self.inner.startup,
            (self.inner.adhoc_env_set)(),
            Now {
                wall: (self.inner.wall_clock)(),
                mono: Instant::now(),
            },
        )
        .map_err(|refusal| PostError::Invalid(refusal.to_string()))?;
        // Before any action runs: a revert that cannot be armed leaves everything as it was.
        if t.state.revert.is_some() {
            if let Err(e) = Inner::ensure_timer(&self.inner) {
                drop(st);
                drop(turn);
                return Err(PostError::RevertUnavailable {
                    message: format!(
                        "the revert timer cannot start ({e}): the duration could not be honoured, \
                         nothing changed; retry without \"duration\" or once the process may start \
                         a thread"
                    ),
                    view: Box::new(self.view()),
                });
            }
        }
        // An abandoned flush is not a failure of the POST: the gate did close (or re-target), and the flush
        // logged its own line. Found by tests/harden/push_faults.rs (a hanging collector made the closing
        // POST answer 500 while the state it carried said enabled:false).
        let failure = Inner::execute(&self.inner, &mut st, t).failure;
        drop(st);
        drop(turn);
        match failure {
            Some(failure) => Err(PostError::PushFailed {
                message: failure.to_string(),
                view: Box::new(self.view()),
            }),
            None => Ok(self.view()),
        }
    }

    /// Closes the gate (bounded flush of a running push) and cancels any revert. Returns `false` when the
    /// flush was abandoned at the deadline.
    pub fn shutdown(&self) -> bool {
        let _turn = self.inner.turns.take(None);
        let mut st = lock(&self.inner.state);
        let t = state::on_shutdown(&st, &self.inner.startup);
        !Inner::execute(&self.inner, &mut st, t).abandoned
    }

    /// The state as of the last completed transition, with the running push's counters. Never waits
    /// behind a transition.
    pub fn view(&self) -> GateView {
        let published = Arc::clone(&lock(&self.inner.published));
        let live = lock(&self.inner.run).as_ref().map(|r| r.status());
        let s = &published.state;
        let stopped = lock(&self.inner.last_push);
        let (status, last_push) = match (s.pushing, stopped.as_ref()) {
            (true, _) => (
                live.unwrap_or_else(|| published.stopping_status.clone()),
                None,
            ),
            (false, Some(p)) => (p.status.clone(), Some(p.push.clone())),
            (false, None) => (PushStatus::default(), None),
        };
        drop(stopped);
        GateView {
            enabled: s.value.enabled,
            startup_flag: self.inner.startup.flag_address().map(str::to_string),
            server_address: s.value.push_address.clone().filter(|_| s.value.enabled),
            pushing: s.pushing,
            revert_at: s.revert.as_ref().map(|r| r.at),
            sdk_errors: status.sdk_errors,
            // While pushing, the push's own error is the news; otherwise the gate's (a start that just
            // failed) comes before the stopped push's last one.
            last_error: if s.pushing {
                status.last_error.or_else(|| s.last_error.clone())
            } else {
                s.last_error.clone().or(status.last_error)
            },
            uploads: status.uploads,
            last_upload_at: status.last_upload_at,
            last_push,
        }
    }

    /// True while the gate is open (the pull surface serves).
    pub fn is_open(&self) -> bool {
        lock(&self.inner.published).state.value.enabled
    }

    /// While the gate is open and no close has begun: a number that changes when a close begins. `None`
    /// while closed or closing. A timed pull request runs while this still equals what it was at its start.
    pub fn open_epoch(&self) -> Option<u64> {
        let closes = self.inner.closes.load(Ordering::SeqCst);
        (closes.is_multiple_of(2) && self.is_open()).then_some(closes)
    }
}

/// A POST queued behind another transition ([`Gate::post_or_queue`]). It holds its place in the queue
/// until [`PendingPost::finish`] runs it (or answers busy) or it is dropped; nothing waits meanwhile.
pub struct PendingPost {
    gate: Gate,
    ticket: Option<Ticket>,
    req: PostRequest,
    deadline: Instant,
}

impl PendingPost {
    /// When the POST stops waiting and answers [`PostError::Busy`].
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True when [`PendingPost::finish`] would not wait behind a transition (its turn has come). Never
    /// waits.
    pub fn turn_is_free(&self) -> bool {
        self.ticket
            .as_ref()
            .is_some_and(|t| self.gate.inner.turns.claimable(t))
    }

    /// Calls `wake` whenever the turn may have come (at once if it has).
    pub fn wake_when_first(&self, wake: Wake) {
        if let Some(t) = &self.ticket {
            self.gate.inner.turns.wake_when_first(t, wake);
        }
    }

    /// Runs the POST if its turn has come, else leaves the queue and answers [`PostError::Busy`]. Takes as
    /// long as the transition (a closing push's flush); never waits for the turn.
    pub fn finish(mut self) -> Result<GateView, PostError> {
        let Some(ticket) = self.ticket.take() else {
            return Err(self.gate.busy());
        };
        let turns = &self.gate.inner.turns;
        match turns.claim(ticket) {
            Ok(turn) => self.gate.apply_post(turn, &self.req),
            Err(ticket) => {
                turns.leave(ticket);
                Err(self.gate.busy())
            }
        }
    }
}

impl Drop for PendingPost {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.gate.inner.turns.leave(t);
        }
    }
}

#[cfg(test)]
impl Gate {
    /// Replaces how the revert timer's thread is started (tests make it fail). Only on a gate not yet
    /// cloned.
    fn with_spawner(mut self, spawn: Spawner) -> Gate {
        Arc::get_mut(&mut self.inner)
            .expect("set the spawner before cloning the gate")
            .spawn = spawn;
        self
    }

    /// Replaces the wall clock (tests step it). Only on a gate not yet cloned.
    fn with_wall_clock(mut self, clock: WallClock) -> Gate {
        Arc::get_mut(&mut self.inner)
            .expect("set the wall clock before cloning the gate")
            .wall_clock = clock;
        self
    }
}

/// What running a transition's actions came to.
struct Executed {
    /// The push was refused or did not start (the POST answers 500 with it).
    failure: Option<PushFailure>,
    /// A stopping push's flush was abandoned at the deadline (logged; the transition still happened).
    abandoned: bool,
}

impl Inner {
    /// Runs a transition's actions, stores and publishes the new state, logs its line and (re)arms the
    /// revert timer.
    fn execute(this: &Arc<Inner>, st: &mut GateState, t: Transition) -> Executed {
        let Transition {
            state: mut next,
            actions,
            mut log,
            failure,
        } = t;
        let mut failure = failure.map(PushFailure::Refused);
        let mut abandoned = false;
        let closing = st.value.enabled && !next.value.enabled;
        if closing {
            this.closes.fetch_add(1, Ordering::SeqCst);
            if let Some(hook) = &this.close_hook {
                hook();
            }
        }
        for action in actions {
            match action {
                Action::StopPush => {
                    let run = lock(&this.run).take();
                    if let Some(run) = run {
                        this.publish(Published {
                            state: st.clone(),
                            stopping_status: run.status(),
                        });
                        let (flushed, status) = run.stop_with_status(this.stop_budget);
                        let address = st.value.push_address.clone().unwrap_or_default();
                        *lock(&this.last_push) = Some(StoppedPush {
                            push: LastPush {
                                address,
                                stopped_at: (this.wall_clock)(),
                            },
                            status,
                        });
                        if !flushed {
                            let msg = format!(
                                "flush abandoned after {} s: the last profiles may not have reached the collector",
                                this.stop_budget.as_secs()
                            );
                            log.push_str("; ");
                            log.push_str(&msg);
                            abandoned = true;
                        }
                    }
                }
                Action::StartPush(target) => match this.pusher.start(target) {
                    Ok(run) => {
                        *lock(&this.run) = Some(run);
                        *lock(&this.last_push) = None;
                    }
                    Err(e) => {
                        let message = e.to_string();
                        next.pushing = false;
                        log.push_str("; push failed to start: ");
                        log.push_str(&message);
                        next.last_error = Some(message);
                        failure = Some(PushFailure::Start(e));
                    }
                },
            }
        }
        *st = next.clone();
        let revert_due = next.revert.as_ref().map(|r| r.due);
        this.publish(Published {
            state: next,
            stopping_status: PushStatus::default(),
        });
        if closing {
            this.closes.fetch_add(1, Ordering::SeqCst);
        }
        (this.log)(&log);
        this.arm_revert(revert_due);
        Executed { failure, abandoned }
    }

    fn publish(&self, p: Published) {
        *lock(&self.published) = Arc::new(p);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        lock(&self.timer.slot).gone = true;
        self.timer.wake.notify_all();
    }
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
