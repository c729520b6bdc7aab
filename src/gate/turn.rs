//! Turns: the gate's transition lock, first come first served, with an optional bound on the wait.
//!
//! A transition can hold its turn for a push's bounded stop (up to 20 s against a hanging collector). A
//! `POST` must not wait in a server worker at all, so it takes a place in the queue without waiting
//! ([`Turns::take_or_queue`]) and comes back when woken ([`Turns::claim`]), or gives up after its short
//! limit and answers 409; startup, shutdown and the revert timer wait on their own threads as long as it
//! takes ([`Turns::take`]). Both kinds of waiter share one queue served in arrival order, so a `POST`
//! queued behind a few quick transitions is not overtaken by later ones (a plain mutex makes no such
//! promise).
//!
//! Owns nothing but the queue of tickets and the wake-ups of queued tickets; never does I/O, never spawns.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How a queued ticket's owner is told the turn may be its own now (called without the lock held).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Queue {
    held: bool,
    next_ticket: u64,
    waiting: VecDeque<u64>,
    /// Wake-ups of tickets queued with [`Turns::take_or_queue`] that asked for one.
    wakes: Vec<(u64, Wake)>,
}

impl Queue {
    /// The wake-up of the first waiter, when the turn is free and that waiter is a woken ticket.
    fn front_wake(&self) -> Option<Wake> {
        if self.held {
            return None;
        }
        let first = *self.waiting.front()?;
        self.wakes
            .iter()
            .find(|(t, _)| *t == first)
            .map(|(_, w)| Arc::clone(w))
    }

    fn forget(&mut self, ticket: u64) {
        self.waiting.retain(|t| *t != ticket);
        self.wakes.retain(|(t, _)| *t != ticket);
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("held", &self.held)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
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

/// A place in the queue taken without waiting. Give it back with [`Turns::claim`] (when first) or
/// [`Turns::leave`]; a ticket that is neither holds up everyone behind it.
#[derive(Debug)]
pub struct Ticket(u64);

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
                        q.forget(me);
                        let wake = q.front_wake();
                        drop(q);
                        // The caller behind this one may now be first.
                        self.changed.notify_all();
                        if let Some(w) = wake {
                            w();
                        }
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

    /// The turn at once when it is free and nobody waits; otherwise a place at the back of the queue.
    pub fn take_or_queue(&self) -> Result<Turn<'_>, Ticket> {
        let mut q = lock(&self.queue);
        if !q.held && q.waiting.is_empty() {
            q.held = true;
            return Ok(Turn { turns: self });
        }
        let me = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(me);
        Err(Ticket(me))
    }

    /// Asks to be woken (`wake` is called) whenever `ticket` may be able to claim the turn. Called at once
    /// when it already can.
    pub fn wake_when_first(&self, ticket: &Ticket, wake: Wake) {
        let mut q = lock(&self.queue);
        q.wakes.retain(|(t, _)| *t != ticket.0);
        q.wakes.push((ticket.0, wake));
        let now = q.front_wake();
        drop(q);
        if let Some(w) = now {
            w();
        }
    }

    /// True when `ticket` is first and the turn is free: [`Turns::claim`] would succeed. Never waits.
    pub fn claimable(&self, ticket: &Ticket) -> bool {
        let q = lock(&self.queue);
        !q.held && q.waiting.front() == Some(&ticket.0)
    }

    /// The turn, when `ticket` is first and the turn is free; otherwise the ticket back, still queued.
    pub fn claim(&self, ticket: Ticket) -> Result<Turn<'_>, Ticket> {
        let mut q = lock(&self.queue);
        if q.held || q.waiting.front() != Some(&ticket.0) {
            return Err(ticket);
        }
        q.forget(ticket.0);
        q.held = true;
        Ok(Turn { turns: self })
    }

    /// Leaves the queue; whoever is behind moves up.
    pub fn leave(&self, ticket: Ticket) {
        let mut q = lock(&self.queue);
        q.forget(ticket.0);
        let wake = q.front_wake();
        drop(q);
        self.changed.notify_all();
        if let Some(w) = wake {
            w();
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut q = lock(&self.turns.queue);
        q.held = false;
        let wake = q.front_wake();
        drop(q);
        self.turns.changed.notify_all();
        if let Some(w) = wake {
            w();
        }
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

    #[test]
    fn a_ticket_keeps_its_place_without_waiting_and_is_woken_when_first() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let turns = Arc::new(Turns::default());
        let held = turns.take_or_queue().expect("free turn");
        let first = turns.take_or_queue().expect_err("held: queued");
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        turns.wake_when_first(
            &first,
            Arc::new(move || {
                w.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let second = turns.take_or_queue().expect_err("queued behind the first");
        assert!(!turns.claimable(&first));
        let first = turns.claim(first).expect_err("the turn is held");
        drop(held);
        assert_eq!(
            woken.load(Ordering::SeqCst),
            1,
            "not woken when the turn came"
        );
        assert!(turns.claimable(&first) && !turns.claimable(&second));
        // A blocking waiter that arrives now queues behind both tickets.
        let (t, order) = (Arc::clone(&turns), Arc::new(Mutex::new(Vec::new())));
        let o = Arc::clone(&order);
        let blocking = std::thread::spawn(move || {
            let _turn = t.take(Some(Duration::from_secs(20))).expect("served");
            o.lock().unwrap().push("blocking");
        });
        let queued = Instant::now() + Duration::from_secs(5);
        while lock(&turns.queue).waiting.len() < 3 && Instant::now() < queued {
            std::thread::sleep(Duration::from_millis(1));
        }
        let turn = turns.claim(first).expect("first in line");
        order.lock().unwrap().push("first");
        drop(turn);
        // The second ticket leaves: the blocking waiter moves up and is served.
        turns.leave(second);
        blocking.join().unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["first", "blocking"]);
        let q = lock(&turns.queue);
        assert!(q.waiting.is_empty() && q.wakes.is_empty() && !q.held);
    }
}
