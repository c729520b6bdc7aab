//! The revert timer: one thread that exists only while a revert is pending, sleeping on the monotonic
//! clock until the current generation's due time and then applying the revert through the gate's turn.
use super::{lock, Inner};
use crate::gate::state;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Starts a thread (the revert timer's); tests make it fail.
pub(super) type Spawner = fn(Box<dyn FnOnce() + Send>) -> std::io::Result<()>;

pub(super) fn spawn_timer_thread(f: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("gate-revert".to_string())
        .spawn(f)
        .map(drop)
}

/// What the revert timer's thread waits on: the next due time of the current generation.
#[derive(Default)]
pub(super) struct RevertTimer {
    pub(super) slot: Mutex<TimerSlot>,
    pub(super) wake: Condvar,
}

#[derive(Default)]
pub(super) struct TimerSlot {
    pub(super) generation: u64,
    pub(super) due: Option<Instant>,
    /// The thread exists (set before it is spawned, cleared as it ends).
    pub(super) running: bool,
    /// A POST made sure of the thread and is about to arm its revert: the thread must not end meanwhile.
    pub(super) arming: bool,
    /// The gate is gone: the thread ends.
    pub(super) gone: bool,
}

impl Inner {
    /// Makes sure the revert timer's thread runs (starting it if need be) and keeps it until the next
    /// [`Inner::arm_revert`]. Called under the turn, before the transition's actions.
    pub(super) fn ensure_timer(this: &Arc<Inner>) -> std::io::Result<()> {
        {
            let mut slot = lock(&this.timer.slot);
            slot.arming = true;
            if slot.running {
                return Ok(());
            }
            slot.running = true;
        }
        let weak = Arc::downgrade(this);
        let timer = Arc::clone(&this.timer);
        (this.spawn)(Box::new(move || revert_timer(&weak, &timer))).inspect_err(|_| {
            let mut slot = lock(&this.timer.slot);
            slot.running = false;
            slot.arming = false;
        })
    }

    /// Cancels any pending revert and, when `due` is set, hands it to the timer's thread (which ends
    /// once nothing is pending).
    pub(super) fn arm_revert(self: &Arc<Inner>, due: Option<Instant>) {
        let missing = {
            let mut slot = lock(&self.timer.slot);
            slot.generation += 1;
            slot.due = due;
            slot.arming = false;
            due.is_some() && !slot.running
        };
        self.timer.wake.notify_all();
        // Only a POST asks for a revert, and it made sure of the thread first; say so if that changes.
        if missing {
            let started = Inner::ensure_timer(self);
            lock(&self.timer.slot).arming = false;
            if let Err(e) = started {
                (self.log)(&format!(
                    "[profiling] revert timer could not start ({e}); the revert will not happen"
                ));
            }
        }
    }

    /// Applies the revert if it is still `generation`'s and has fallen due. Returns true when the timer is
    /// done with it (applied or superseded).
    fn revert_if_due(this: &Arc<Inner>, generation: u64) -> bool {
        let _turn = this.turns.take(None);
        let mut st = lock(&this.state);
        if lock(&this.timer.slot).generation != generation {
            return true;
        }
        match state::on_revert_due(&st, &this.startup, (this.adhoc_env_set)(), Instant::now()) {
            Some(t) => {
                Inner::execute(this, &mut st, t);
                true
            }
            None => st.revert.is_none(),
        }
    }
}

/// The revert timer's thread: sleeps until the current generation's due time (on the monotonic clock, so
/// a wall-clock step changes nothing), applies the revert, and ends once no revert is pending (or the
/// gate is gone).
fn revert_timer(weak: &Weak<Inner>, timer: &RevertTimer) {
    let mut slot = lock(&timer.slot);
    loop {
        let Some(due) = slot.due.filter(|_| !slot.gone) else {
            if slot.arming && !slot.gone {
                slot = timer.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            slot.running = false;
            return;
        };
        let left = due.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            slot = timer
                .wake
                .wait_timeout(slot, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        let generation = slot.generation;
        drop(slot);
        let done = match weak.upgrade() {
            Some(inner) => Inner::revert_if_due(&inner, generation),
            None => false,
        };
        slot = lock(&timer.slot);
        if weak.strong_count() == 0 {
            slot.gone = true;
        }
        if !done && slot.generation == generation && !slot.gone {
            // Not applied yet (the state's own clock disagreed): look again shortly.
            slot = timer
                .wake
                .wait_timeout(slot, Duration::from_millis(10))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
