//! Stacks of every thread (the goroutine-profile analog: one OS thread is one "goroutine") and the
//! `threadcreate` record.
//!
//! [`capture_all`] lists `/proc/self/task`, gives each other thread a preallocated slot, sends it
//! `signal::stacks_signal` with `tgkill`, and waits (bounded) while each handler unwinds its interrupted
//! context into its slot with the label it had at that instant. The calling thread records its own stack
//! directly. A thread that blocks the signal or does not run in time is reported with an empty stack and
//! the reason ([`Missing`]); so is one the signal could not be sent to: an `EAGAIN` refusal (the pending-
//! signal limit) is retried until the deadline, and only a thread that has exited (`ESRCH`) is left out. A
//! thread whose stack bounds nobody learnt (one nl6 did not spawn, outside a CPU profile) answers with
//! its leaf only (handlers never ask libc for bounds); the capture then learns its bounds from the
//! answer's RSP and `/proc/self/maps`, asks it once more, and forgets those entries before returning. Each
//! capture has a generation carried in every slot's state word; a slot whose handler is still writing
//! when the capture gives up is quarantined — skipped by later captures until that handler publishes —
//! so a late handler can never tear or mislabel another capture's stack (protocol at `state_word`).
//! Names come from `/proc/self/task/<tid>/comm`, read outside any handler. Captures are serialised by a
//! mutex (never touched by the handler).
//!
//! [`spawn_recorded`] spawns a named thread after recording where it was spawned from (bounded to
//! [`MAX_THREADCREATE`] records) and caches the new thread's stack bounds at birth for the unwinder.
//!
//! Never: allocates, locks or panics in the handler (contract in the crate-private `signal`); waits
//! without a bound.
use super::cpu::thread_name;
use super::labels;
use super::signal::{self, ErrnoGuard};
use super::unwind::{self, MAX_DEPTH};
use super::Stack;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod missing;
mod spawn;
pub use missing::Missing;
use missing::Sent;
pub use spawn::{
    learn_own_stack, on_thread_start, on_thread_stop, spawn_inheriting, spawn_labelled,
    spawn_recorded, threadcreate_stacks,
};

/// Threads one capture can signal; more are reported with empty stacks.
pub const MAX_CAPTURED: usize = 1024;
/// Spawn sites kept for the `threadcreate` profile; later spawns are not recorded.
pub const MAX_THREADCREATE: usize = 4096;

/// One thread's stack at capture time.
#[derive(Debug, Clone)]
pub struct ThreadStack {
    /// The kernel thread id.
    pub tid: i32,
    /// The thread's name (`/proc/self/task/<tid>/comm`).
    pub name: String,
    /// The thread's label-set index at capture time (0 = none; [`crate::labels::LabelSet::from_index`]).
    pub label: u16,
    /// Return addresses, leaf first.
    pub stack: Stack,
    /// Why the stack is empty, when it is (the thread is listed all the same).
    pub missing: Option<Missing>,
}

/// A slot's state word: the capture generation (upper 62 bits) and a phase (low 2 bits). The generation
/// makes every arming unique, so a handler that saw one arming can never claim a later one (no ABA).
///
/// Protocol, for capture generation `g`:
/// - the capturer arms only a free slot (`IDLE` or `DONE`, any generation): stores the tid (Release), then
///   `(g, ARMED)` (Release);
/// - a handler claims a slot armed for its own tid by CAS `(g, ARMED) → (g, WRITING)`, writes the data,
///   and publishes `(g, DONE)` (Release); it touches no other slot and no other state;
/// - after its wait the capturer takes each of its slots back: `(g, ARMED) → (g, IDLE)` by CAS (never
///   answered: a handler arriving later finds nothing to claim); `(g, DONE)` → read the data, then
///   `(g, IDLE)`; `(g, WRITING)` → spin a little, and if the handler is still writing, **leave the slot
///   quarantined**: reported as empty, never re-armed (not free) until its handler publishes `(g, DONE)`,
///   after which a later capture may reuse it. A late writer therefore only ever writes into its own slot,
///   and a later capture neither reads it as its own answer nor hands it out again while it is written.
const PHASE_BITS: u32 = 2;
const PHASE_MASK: u64 = (1 << PHASE_BITS) - 1;
const IDLE: u64 = 0;
const ARMED: u64 = 1;
const WRITING: u64 = 2;
const DONE: u64 = 3;

const fn state_word(generation: u64, phase: u64) -> u64 {
    (generation << PHASE_BITS) | phase
}

struct Captured {
    label: u16,
    depth: u16,
    /// The interrupted RSP when the thread's stack bounds were unknown (leaf only), else 0.
    unbounded_rsp: u64,
    frames: [u64; MAX_DEPTH],
}

struct Slot {
    /// The thread the slot is armed for (meaningful while `ARMED`; written only by the capturer, only
    /// while the slot is free).
    tid: AtomicI32,
    state: AtomicU64,
    data: UnsafeCell<Captured>,
}

// SAFETY: a slot's data is written only by the handler that claimed it (ARMED→WRITING of one generation)
// on the thread whose tid it holds, and read by the capturer only after that generation's DONE (Acquire);
// see the protocol at `state_word`.
unsafe impl Sync for Slot {}

/// What a capture got back from one of its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Stack {
        label: u16,
        frames: Stack,
        /// The RSP of a thread whose bounds the handler did not know, else 0.
        unbounded_rsp: u64,
    },
    /// The handler never claimed the slot (the thread did not run in time, or blocks the signal).
    Unanswered,
    /// The handler was still writing after the wait: the slot stays out of use until it finishes.
    Quarantined,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            tid: AtomicI32::new(0),
            state: AtomicU64::new(state_word(0, IDLE)),
            data: UnsafeCell::new(Captured {
                label: 0,
                depth: 0,
                unbounded_rsp: 0,
                frames: [0; MAX_DEPTH],
            }),
        }
    }

    /// Capturer: may this slot be armed? Not while armed or written (quarantined).
    fn is_free(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire) & PHASE_MASK, IDLE | DONE)
    }

    /// Capturer: arms a free slot for `tid` in `generation`.
    fn arm(&self, tid: i32, generation: u64) {
        self.tid.store(tid, Ordering::Release);
        self.state
            .store(state_word(generation, ARMED), Ordering::Release);
    }

    /// Handler, step 1: the state word to claim if this slot is armed for `me` (async-signal-safe).
    fn armed_for(&self, me: i32) -> Option<u64> {
        let seen = self.state.load(Ordering::Acquire);
        // The tid is read after the armed state (Acquire): it is this arming's tid or a later one, and a
        // later one means the state moved on, so the claim below fails.
        (seen & PHASE_MASK == ARMED && self.tid.load(Ordering::Acquire) == me).then_some(seen)
    }

    /// Handler, step 2: claims the arming seen in step 1; returns its generation (async-signal-safe).
    fn claim(&self, seen: u64) -> Option<u64> {
        let writing = (seen & !PHASE_MASK) | WRITING;
        self.state
            .compare_exchange(seen, writing, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| seen >> PHASE_BITS)
    }

    /// Handler: the data of a slot it claimed.
    ///
    /// # Safety
    /// Only between a successful [`Slot::claim`] and [`Slot::publish`], by the claiming thread.
    #[allow(clippy::mut_from_ref)]
    unsafe fn data_mut(&self) -> &mut Captured {
        // SAFETY: the claim made this thread the slot's only user until it publishes (see the protocol).
        unsafe { &mut *self.data.get() }
    }

    /// Handler: the data is written (async-signal-safe).
    fn publish(&self, generation: u64) {
        self.state
            .store(state_word(generation, DONE), Ordering::Release);
    }

    /// Capturer, after the wait: takes back the slot it armed in `generation`, spinning up to `spin` for a
    /// handler still writing; reads the answer if there is one.
    fn take_back(&self, generation: u64, spin: Duration) -> Answer {
        let (armed, writing, done) = (
            state_word(generation, ARMED),
            state_word(generation, WRITING),
            state_word(generation, DONE),
        );
        let spin_until = Instant::now() + spin;
        loop {
            match self.state.compare_exchange(
                armed,
                state_word(generation, IDLE),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Answer::Unanswered,
                Err(s) if s == done => break,
                Err(s) if s == writing && Instant::now() < spin_until => std::hint::spin_loop(),
                Err(s) if s == writing => return Answer::Quarantined,
                // Not this generation's arming (cannot happen while captures are serialised).
                Err(_) => return Answer::Unanswered,
            }
        }
        // SAFETY: DONE of our generation (Acquire): the handler finished writing and no handler touches a
        // slot that is not ARMED, so nothing writes the data while we read it.
        let d = unsafe { &*self.data.get() };
        let answer = Answer::Stack {
            label: d.label,
            frames: d.frames.get(..d.depth as usize).unwrap_or(&[]).to_vec(),
            unbounded_rsp: d.unbounded_rsp,
        };
        self.state
            .store(state_word(generation, IDLE), Ordering::Release);
        answer
    }
}

/// Arms free slots for `tids` in order (quarantined ones are skipped); returns the slot index given to
/// each tid that got one — a prefix of `tids`.
fn arm_slots(slots: &[Slot], tids: &[i32], generation: u64) -> Vec<usize> {
    let free = slots.iter().enumerate().filter(|(_, s)| s.is_free());
    free.zip(tids)
        .map(|((i, slot), tid)| {
            slot.arm(*tid, generation);
            i
        })
        .collect()
}

/// The handler's side over `slots`: claims the slot armed for `me`, fills it with `fill`, publishes.
/// Returns whether a slot was written.
#[inline]
fn answer_in(slots: &[Slot], me: i32, fill: impl FnOnce(&mut Captured)) -> bool {
    let Some((slot, generation)) = slots.iter().find_map(|s| {
        s.armed_for(me)
            .and_then(|seen| s.claim(seen))
            .map(|g| (s, g))
    }) else {
        return false;
    };
    // SAFETY: claimed just now by this thread; published right after.
    fill(unsafe { slot.data_mut() });
    slot.publish(generation);
    true
}

struct Slots {
    /// Upper bound of the slot indices armed by the capture in progress (the handler scans only these).
    used: AtomicUsize,
    slots: [Slot; MAX_CAPTURED],
}

static SLOTS: Slots = Slots {
    used: AtomicUsize::new(0),
    slots: [const { Slot::new() }; MAX_CAPTURED],
};

/// The generation of the last capture (captures are serialised by [`CAPTURE`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Serialises captures (outside the handler only).
static CAPTURE: Mutex<()> = Mutex::new(());
/// Serialises the unit tests that start wall-clock sessions (which keep the stack bounds they learn)
/// with this module's tests that need no session running.
#[cfg(test)]
pub(crate) static TEST_WALL_SESSIONS: Mutex<()> = Mutex::new(());

/// The stacks-signal handler. Follows the contract in [`super::signal`].
unsafe extern "C" fn on_stacks_signal(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let _errno = ErrnoGuard::save();
    let tid = signal::gettid();
    let used = SLOTS.used.load(Ordering::Acquire).min(MAX_CAPTURED);
    let slots = SLOTS.slots.get(..used).unwrap_or(&[]);
    answer_in(slots, tid, |data| {
        // SAFETY: ctx is the kernel's ucontext for this handler.
        let regs = unsafe { unwind::regs_from_ucontext(ctx) };
        data.label = labels::current_index();
        let bounds = match unwind::bounds_in_handler() {
            unwind::Bounds::Known(low, high) => Some((low, high)),
            unwind::Bounds::Unknown(_) => None,
        };
        data.unbounded_rsp = match (bounds, regs) {
            (None, Some(r)) => r.rsp,
            _ => 0,
        };
        data.depth = match regs {
            Some(r) => unwind::unwind_interrupted(r, bounds, &mut data.frames) as u16,
            None => 0,
        };
    });
}

/// Installs the stack-capture handler (it stays installed), so a stray stack-capture signal before the
/// first capture is ignored instead of killing the process. The binary calls it at startup. Refuses,
/// naming the owner, when another owner's handler holds the capture signal (see
/// [`crate::SignalOptions`]).
pub(crate) fn install_handler() -> Result<(), crate::SignalError> {
    signal::install(signal::stacks_signal(), on_stacks_signal)
        .map_err(|e| e.named(crate::symbols::symbolize))
}

/// One thread's reply to a capture round: its label and stack (empty when it did not answer in time),
/// and its RSP when the handler did not know its stack bounds.
struct Reply {
    tid: i32,
    label: u16,
    stack: Stack,
    unbounded_rsp: u64,
    missing: Option<Missing>,
}

impl Reply {
    fn empty(tid: i32, why: Missing) -> Reply {
        Reply {
            tid,
            label: 0,
            stack: Vec::new(),
            unbounded_rsp: 0,
            missing: Some(why),
        }
    }
}

/// One round: signals each of `tids` (none of them the caller) and collects the replies; threads that
/// exited meanwhile are left out, threads that do not answer within `timeout` (or that the signal could not
/// reach) reply with an empty stack and the reason.
fn capture_round(tids: &[i32], timeout: Duration) -> Vec<Reply> {
    let refused = signal::install(signal::stacks_signal(), on_stacks_signal).err();
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let armed = if refused.is_none() {
        arm_slots(&SLOTS.slots, tids, generation)
    } else {
        Vec::new()
    };
    let (signalled, unslotted) = tids.split_at(armed.len());
    let slots: Vec<&Slot> = armed.iter().filter_map(|i| SLOTS.slots.get(*i)).collect();
    SLOTS
        .used
        .store(armed.last().map_or(0, |i| i + 1), Ordering::Release);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut sent: Vec<Sent> = signalled.iter().map(|t| missing::send(pid, *t)).collect();

    let deadline = Instant::now() + timeout;
    let done = state_word(generation, DONE);
    let all_done = |sent: &[Sent]| {
        slots.iter().zip(sent).all(|(s, how)| match how {
            Sent::Gone => true,
            Sent::Refused(_) => false,
            Sent::Queued => s.state.load(Ordering::Acquire) == done,
        })
    };
    while !all_done(&sent) && Instant::now() < deadline {
        // A full signal queue empties as earlier signals are delivered: send the refused ones again.
        for (how, tid) in sent.iter_mut().zip(signalled) {
            if *how == Sent::Refused(libc::EAGAIN) {
                *how = missing::send(pid, *tid);
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }

    let mut out = Vec::with_capacity(tids.len());
    for ((slot, tid), how) in slots.iter().zip(signalled).zip(&sent) {
        let answer = slot.take_back(generation, Duration::from_millis(100));
        let why = match (answer, *how) {
            (
                Answer::Stack {
                    label,
                    frames,
                    unbounded_rsp,
                },
                _,
            ) => {
                out.push(Reply {
                    tid: *tid,
                    label,
                    stack: frames,
                    unbounded_rsp,
                    missing: None,
                });
                continue;
            }
            (_, Sent::Gone) => continue,
            (_, Sent::Refused(errno)) => Missing::Unsignalled(errno),
            (Answer::Unanswered, Sent::Queued) => Missing::NoAnswer,
            (Answer::Quarantined, Sent::Queued) => Missing::Late,
        };
        out.push(Reply::empty(*tid, why));
    }
    SLOTS.used.store(0, Ordering::Release);
    let why = refused.map_or(Missing::NoSlot, Missing::unhandled);
    out.extend(unslotted.iter().map(|tid| Reply::empty(*tid, why)));
    out
}

/// For replies whose handler did not know the thread's stack bounds: learns them from `/proc/self/maps`
/// (the mapping holding the reply's RSP) into the foreign table, for tids that have no entry yet.
/// Returns those tids: the caller asks them again, then forgets the entries (contract in `unwind`).
fn learn_bounds_of(replies: &[Reply]) -> Vec<i32> {
    if replies.iter().all(|r| r.unbounded_rsp == 0) {
        return Vec::new();
    }
    let Ok(maps) = super::maps::read_self() else {
        return Vec::new();
    };
    replies
        .iter()
        .filter(|r| r.unbounded_rsp != 0 && unwind::foreign_bounds(r.tid).is_none())
        .filter(|r| {
            unwind::mapping_bounds(&maps, r.unbounded_rsp)
                .is_some_and(|(low, high)| unwind::set_foreign_bounds(r.tid, low, high))
        })
        .map(|r| r.tid)
        .collect()
}

/// A wall-clock tick's capture of `tids` (never the caller), serialised with every other capture: like
/// [`capture_all`] but for the threads given, with no names read, and with the bounds it learns kept: each
/// tid learnt is pushed on `learnt`, and the caller forgets them with [`forget_learnt`] when its session ends
/// (learning them again on every tick would read `/proc/self/maps` 99 times a second).
pub(crate) fn capture_tids(
    tids: &[i32],
    timeout: Duration,
    learnt: &mut Vec<i32>,
) -> Vec<ThreadStack> {
    let _serial = CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    let deadline = Instant::now() + timeout;
    let mut replies = capture_round(tids, timeout);
    let fresh = learn_bounds_of(&replies);
    if !fresh.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        for again in capture_round(&fresh, left) {
            let first = replies.iter_mut().find(|r| r.tid == again.tid);
            if let Some(first) = first.filter(|_| !again.stack.is_empty()) {
                *first = again;
            }
        }
        learnt.extend(fresh);
    }
    replies
        .into_iter()
        .map(|r| ThreadStack {
            tid: r.tid,
            name: String::new(),
            label: r.label,
            stack: r.stack,
            missing: r.missing,
        })
        .collect()
}

/// Forgets the stack bounds [`capture_tids`] learnt.
pub(crate) fn forget_learnt(tids: &[i32]) {
    for tid in tids {
        unwind::forget_foreign(*tid);
    }
}

/// Signals every thread of the process and collects its stack within `timeout` in all; threads that do
/// not answer in time are reported with an empty stack. Sorted by tid.
///
/// A thread whose stack bounds nobody learnt yet (one nl6 did not spawn, outside a CPU profile) answers
/// with its leaf only; its bounds are then learnt from that answer's RSP and it is asked once more, and
/// the learnt entries are forgotten when the capture ends.
pub fn capture_all(timeout: Duration) -> Vec<ThreadStack> {
    let _serial = CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    // Both rounds share `timeout`: the capture as a whole answers within it.
    let deadline = Instant::now() + timeout;
    crate::heap::unsampled(unwind::learn_code);
    let me = signal::gettid();
    let others: Vec<i32> = super::cpu::list_tids()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| *t != me)
        .collect();
    let mut replies = capture_round(&others, timeout);
    let learnt = learn_bounds_of(&replies);
    if !learnt.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        for again in capture_round(&learnt, left) {
            let first = replies.iter_mut().find(|r| r.tid == again.tid);
            if let Some(first) = first.filter(|_| !again.stack.is_empty()) {
                *first = again;
            }
        }
        for tid in learnt {
            unwind::forget_foreign(tid);
        }
    }
    let mut out: Vec<ThreadStack> = replies
        .into_iter()
        .map(|r| ThreadStack {
            tid: r.tid,
            name: thread_name(r.tid),
            label: r.label,
            stack: r.stack,
            missing: r.missing,
        })
        .collect();
    let mut own = [0u64; MAX_DEPTH];
    let n = unwind::current_stack(0, &mut own);
    out.push(ThreadStack {
        tid: me,
        name: thread_name(me),
        label: labels::current_index(),
        stack: own[..n].to_vec(),
        missing: (!signal::SUPPORTED).then_some(Missing::Unsupported),
    });
    out.sort_by_key(|t| t.tid);
    out
}

#[cfg(test)]
mod tests;
