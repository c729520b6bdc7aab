//! Stacks of every thread (the goroutine-profile analog: one OS thread is one "goroutine") and the
//! `threadcreate` record.
//!
//! [`capture_all`] lists `/proc/self/task`, gives each other thread a preallocated slot, sends it
//! [`signal::stacks_signal`] with `tgkill`, and waits (bounded) while each handler unwinds its interrupted
//! context into its slot with the label it had at that instant. The calling thread records its own stack
//! directly. A thread that blocks the signal or does not run in time is reported with an empty stack.
//! Names come from `/proc/self/task/<tid>/comm`, read outside any handler. Captures are serialised by a
//! mutex (never touched by the handler).
//!
//! [`spawn_recorded`] spawns a named thread after recording where it was spawned from (bounded to
//! [`MAX_THREADCREATE`] records) and caches the new thread's stack bounds at birth for the unwinder.
//!
//! Never: allocates, locks or panics in the handler (contract in [`super::signal`]); waits without a bound.
use super::signal::{self, ErrnoGuard};
use super::unwind::{self, MAX_DEPTH};
use super::{labels, Stack};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Threads one capture can signal; more are reported with empty stacks.
pub const MAX_CAPTURED: usize = 1024;
/// Spawn sites kept for the `threadcreate` profile; later spawns are not recorded.
pub const MAX_THREADCREATE: usize = 4096;

/// One thread's stack at capture time.
#[derive(Debug, Clone)]
pub struct ThreadStack {
    pub tid: i32,
    pub name: String,
    /// Subsystem label index (0 = none).
    pub label: u16,
    pub stack: Stack,
}

const IDLE: u32 = 0;
const ARMED: u32 = 1;
const WRITING: u32 = 2;
const DONE: u32 = 3;

struct Captured {
    label: u16,
    depth: u16,
    frames: [u64; MAX_DEPTH],
}

struct Slot {
    tid: AtomicI32,
    state: AtomicU32,
    data: UnsafeCell<Captured>,
}

struct Slots {
    /// Slots in use by the capture in progress (the handler scans only these).
    used: AtomicUsize,
    slots: [Slot; MAX_CAPTURED],
}

// SAFETY: a slot's data is written only by the handler that moved it ARMED→WRITING on the thread whose tid
// it holds, and read by the capturer only after DONE (Acquire) or after it took the slot back ARMED→IDLE.
unsafe impl Sync for Slots {}

static SLOTS: Slots = Slots {
    used: AtomicUsize::new(0),
    slots: [const {
        Slot {
            tid: AtomicI32::new(0),
            state: AtomicU32::new(IDLE),
            data: UnsafeCell::new(Captured {
                label: 0,
                depth: 0,
                frames: [0; MAX_DEPTH],
            }),
        }
    }; MAX_CAPTURED],
};

/// Serialises captures (outside the handler only).
static CAPTURE: Mutex<()> = Mutex::new(());

/// The stacks-signal handler. Follows the contract in [`super::signal`].
unsafe extern "C" fn on_stacks_signal(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let _errno = ErrnoGuard::save();
    let tid = signal::gettid();
    let used = SLOTS.used.load(Ordering::Acquire).min(MAX_CAPTURED);
    let Some(slot) = SLOTS
        .slots
        .get(..used)
        .and_then(|s| s.iter().find(|s| s.tid.load(Ordering::Relaxed) == tid))
    else {
        return;
    };
    if slot
        .state
        .compare_exchange(ARMED, WRITING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // SAFETY: ctx is the kernel's ucontext for this handler; the slot is ours until DONE.
    let regs = unsafe { unwind::regs_from_ucontext(ctx) };
    let data = unsafe { &mut *slot.data.get() };
    data.label = labels::current_index();
    let top = match unwind::stack_top_in_handler() {
        unwind::Top::Known(top) => top,
        unwind::Top::Unknown(_) => 0,
    };
    data.depth = match regs {
        Some(r) => unwind::unwind_interrupted(r, top, &mut data.frames) as u16,
        None => 0,
    };
    slot.state.store(DONE, Ordering::Release);
}

fn thread_name(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// Signals every thread of the process and collects its stack; threads that do not answer within
/// `timeout` are reported with an empty stack. Sorted by tid.
pub fn capture_all(timeout: Duration) -> Vec<ThreadStack> {
    let _serial = CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    unwind::learn_text();
    let me = signal::gettid();
    let tids = super::cpu::list_tids().unwrap_or_default();
    let mut out = Vec::with_capacity(tids.len());
    let others: Vec<i32> = tids.iter().copied().filter(|t| *t != me).collect();
    let can_signal = signal::install(signal::stacks_signal(), on_stacks_signal).is_ok();
    let (signalled, unslotted) = others.split_at(if can_signal {
        others.len().min(MAX_CAPTURED)
    } else {
        0
    });

    for (slot, tid) in SLOTS.slots.iter().zip(signalled) {
        slot.tid.store(*tid, Ordering::Relaxed);
        slot.state.store(ARMED, Ordering::Relaxed);
    }
    SLOTS.used.store(signalled.len(), Ordering::Release);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut gone = vec![false; signalled.len()];
    for (i, tid) in signalled.iter().enumerate() {
        // SAFETY: tgkill on a thread of our own process with a signal whose handler is installed.
        let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, *tid, signal::stacks_signal()) };
        if rc != 0 {
            gone[i] = true; // exited since the scan (ESRCH)
        }
    }

    let deadline = Instant::now() + timeout;
    let all_done = || {
        SLOTS
            .slots
            .iter()
            .zip(&gone)
            .all(|(s, g)| *g || s.state.load(Ordering::Acquire) == DONE)
    };
    while !all_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }

    for ((slot, tid), gone) in SLOTS.slots.iter().zip(signalled).zip(&gone) {
        // Take the slot back: ARMED (never answered) → IDLE; WRITING → wait for the handler to finish.
        let mut answered = false;
        let spin_until = Instant::now() + Duration::from_millis(100);
        loop {
            match slot
                .state
                .compare_exchange(ARMED, IDLE, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(DONE) => {
                    answered = true;
                    break;
                }
                Err(_) if Instant::now() < spin_until => std::hint::spin_loop(),
                Err(_) => break,
            }
        }
        if *gone && !answered {
            continue;
        }
        let (label, stack) = if answered {
            // SAFETY: DONE (Acquire): the handler finished writing and never touches the slot again.
            let d = unsafe { &*slot.data.get() };
            (
                d.label,
                d.frames.get(..d.depth as usize).unwrap_or(&[]).to_vec(),
            )
        } else {
            (0, Vec::new())
        };
        out.push(ThreadStack {
            tid: *tid,
            name: thread_name(*tid),
            label,
            stack,
        });
    }
    SLOTS.used.store(0, Ordering::Release);
    for slot in &SLOTS.slots[..signalled.len()] {
        slot.state.store(IDLE, Ordering::Release);
        slot.tid.store(0, Ordering::Relaxed);
    }
    for tid in unslotted {
        out.push(ThreadStack {
            tid: *tid,
            name: thread_name(*tid),
            label: 0,
            stack: Vec::new(),
        });
    }

    let mut own = [0u64; MAX_DEPTH];
    let n = unwind::current_stack(0, &mut own);
    out.push(ThreadStack {
        tid: me,
        name: thread_name(me),
        label: labels::current_index(),
        stack: own[..n].to_vec(),
    });
    out.sort_by_key(|t| t.tid);
    out
}

static THREADCREATE: Mutex<Vec<Stack>> = Mutex::new(Vec::new());

/// Stacks of the places that spawned threads through [`spawn_recorded`] (the `threadcreate` profile).
pub fn threadcreate_stacks() -> Vec<Stack> {
    THREADCREATE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Spawns a named thread, recording the spawning stack for `threadcreate`.
pub fn spawn_recorded<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mut frames = [0u64; MAX_DEPTH];
    let n = unwind::current_stack(0, &mut frames);
    {
        let mut created = THREADCREATE.lock().unwrap_or_else(|e| e.into_inner());
        if created.len() < MAX_THREADCREATE {
            created.push(frames[..n].to_vec());
        }
    }
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            unwind::init_thread_bounds();
            super::cpu::arm_current_thread();
            f()
        })
}
