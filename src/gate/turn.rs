//! Turns: the gate's transition lock, first come first served, with an optional bound on the wait.
//!
//! A transition can hold its turn for a push's bounded stop (up to 20 s against a hanging collector). A
//! `POST` must not sit in a server worker for that long, so it asks for its turn with a short limit and
//! answers 409 when the limit passes; startup, shutdown and the revert timer wait as long as it takes.
//! Waiters are served in arrival order, so a `POST` queued behind a few quick transitions is not
//! overtaken by later ones (a plain mutex makes no such promise).
//!
//! Owns nothing but the queue of tickets; never does I/O, never spawns.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Queue {
    held: bool,
    next_ticket: u64,
    waiting: VecDeque<u64>,
}

/// The lock. One per gate.
#[derive(Debug, Default)]
pub struct Turns {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// A held turn; dropping it hands the turn to the oldest waiter.
#[derive(Debug)]
pub struct Turn<'a> {
    turns: &'a Turns,
}

fn lock(m: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Turns {
    /// Waits for the turn: for ever with `None`, else at most `limit` (then `None` is returned and the
    /// queue is as if this caller had never come).
    pub fn take(&self, limit: Option<Duration>) -> Option<Turn<'_>> {
        let deadline = limit.map(|d| Instant::now() + d);
        let mut q = lock(&self.queue);
        if !q.held && q.waiting.is_empty() {
            q.held = true;
            return Some(Turn { turns: self });
        }
        let me = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(me);
        loop {
            if !q.held && q.waiting.front() == Some(&me) {
                q.waiting.pop_front();
                q.held = true;
                return Some(Turn { turns: self });
            }
            match deadline {
                None => q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner()),
                Some(end) => {
                    let now = Instant::now();
                    if now >= end {
                        q.waiting.retain(|t| *t != me);
                        drop(q);
                        // The caller behind this one may now be first.
                        self.changed.notify_all();
                        return None;
                    }
                    q = self
                        .changed
                        .wait_timeout(q, end - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        lock(&self.turns.queue).held = false;
        self.turns.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_bounded_wait_gives_up_while_the_turn_is_held() {
        let turns = Turns::default();
        let held = turns.take(Some(Duration::ZERO)).expect("free turn");
        assert!(turns.take(Some(Duration::from_millis(50))).is_none());
        drop(held);
        assert!(turns.take(Some(Duration::ZERO)).is_some());
    }

    #[test]
    fn waiters_are_served_in_arrival_order_and_a_quitter_does_not_block_the_queue() {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = turns.take(None).unwrap();
        let mut waiters = Vec::new();
        for i in 0..4u32 {
            let (t, o) = (Arc::clone(&turns), Arc::clone(&order));
            waiters.push(std::thread::spawn(move || {
                let _turn = t
                    .take(Some(Duration::from_secs(20)))
                    .expect("served in time");
                o.lock().unwrap().push(i);
            }));
            // Let each waiter queue before the next one arrives.
            let queued = Instant::now() + Duration::from_secs(5);
            while lock(&turns.queue).waiting.len() < i as usize + 1 && Instant::now() < queued {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // One more waiter with a short limit gives up while queued; the others still get their turn.
        assert!(turns.take(Some(Duration::from_millis(30))).is_none());
        drop(first);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
        assert!(lock(&turns.queue).waiting.is_empty() && !lock(&turns.queue).held);
    }
}
