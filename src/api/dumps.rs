//! Admission of thread dumps (`/debug/pprof/goroutine`, any `debug=`): one runs at a time (each signals
//! every thread of the process), the next ones wait their turn first come first served, and none waits
//! without bound: at most [`MAX_WAITING`] wait, each at most [`MAX_WAIT`]; the others are refused at
//! once. A refusal is Go's 503 with `Retry-After`, so a looping client backs off and a single request
//! among many is answered or refused within [`MAX_WAIT`] plus one dump.
//!
//! Why: a lock alone lets the clients that just finished a dump take it again ahead of one that waits
//! (a mutex is not fair), and every waiter holds a server worker; the bounded queue keeps both the wait
//! and the workers it holds (at most 1 + [`MAX_WAITING`] of the server's 16) small, so the other routes
//! are served meanwhile. Values and one lock only: never touches a socket.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most dump requests waiting for their turn (beyond them: refused at once).
pub const MAX_WAITING: usize = 4;
/// Longest a dump request waits for its turn before it is refused.
pub const MAX_WAIT: Duration = Duration::from_secs(3);
/// What a refusal's `Retry-After` says, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// The queue of thread dumps.
#[derive(Default)]
pub struct DumpQueue {
    state: Mutex<Queue>,
    turn: Condvar,
}

#[derive(Default)]
struct Queue {
    running: bool,
    waiting: VecDeque<u64>,
    next_ticket: u64,
}

/// Why a dump was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// [`MAX_WAITING`] requests already wait.
    QueueFull,
    /// The turn did not come within [`MAX_WAIT`].
    Waited(Duration),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::QueueFull => write!(
                f,
                "thread dumps busy: one runs and {MAX_WAITING} wait already; retry in {RETRY_AFTER_SECS} s"
            ),
            Refused::Waited(d) => write!(
                f,
                "thread dumps busy: waited {:.1} s for a turn; retry in {RETRY_AFTER_SECS} s",
                d.as_secs_f64()
            ),
        }
    }
}

/// The turn of one dump; the next one's comes when it is dropped.
pub struct DumpTurn<'a>(&'a DumpQueue);

impl Drop for DumpTurn<'_> {
    fn drop(&mut self) {
        self.0.lock().running = false;
        self.0.turn.notify_all();
    }
}

impl DumpQueue {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (at most [`MAX_WAIT`]) for this dump's turn, first come first served.
    pub fn admit(&self) -> Result<DumpTurn<'_>, Refused> {
        self.admit_within(MAX_WAIT)
    }

    fn admit_within(&self, limit: Duration) -> Result<DumpTurn<'_>, Refused> {
        let mut q = self.lock();
        if !q.running && q.waiting.is_empty() {
            q.running = true;
            return Ok(DumpTurn(self));
        }
        if q.waiting.len() >= MAX_WAITING {
            return Err(Refused::QueueFull);
        }
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(ticket);
        let start = Instant::now();
        loop {
            if !q.running && q.waiting.front() == Some(&ticket) {
                q.waiting.pop_front();
                q.running = true;
                return Ok(DumpTurn(self));
            }
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                q.waiting.retain(|t| *t != ticket);
                drop(q);
                // The one behind may be first now.
                self.turn.notify_all();
                return Err(Refused::Waited(start.elapsed()));
            }
            q = self
                .turn
                .wait_timeout(q, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn turns_come_in_arrival_order_and_the_queue_is_bounded() {
        let q = Arc::new(DumpQueue::default());
        let first = q.admit().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..MAX_WAITING {
            let (mine, order) = (Arc::clone(&q), Arc::clone(&order));
            waiters.push(std::thread::spawn(move || {
                let turn = mine.admit_within(Duration::from_secs(10)).unwrap();
                order.lock().unwrap().push(i);
                drop(turn);
            }));
            // Each in the queue before the next arrives.
            while q.lock().waiting.len() < i + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(q.admit().err(), Some(Refused::QueueFull));
        drop(first);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..MAX_WAITING).collect::<Vec<_>>());
        assert!(q.admit().is_ok(), "free again");
    }

    #[test]
    fn a_wait_ends_at_its_limit_and_leaves_the_queue() {
        let q = DumpQueue::default();
        let held = q.admit().unwrap();
        let t = Instant::now();
        let e = q.admit_within(Duration::from_millis(100)).err().unwrap();
        assert!(matches!(e, Refused::Waited(d) if d >= Duration::from_millis(100)));
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(q.lock().waiting.is_empty());
        assert!(e.to_string().contains("retry in 1 s"), "{e}");
        drop(held);
        assert!(q.admit().is_ok());
    }
}
