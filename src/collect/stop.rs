//! How `nl6 collect` stops on SIGTERM, SIGINT or SIGHUP (delivered by the composition root's signal
//! thread through [`Stop::request`]): between cycles it exits at once; during a cycle it says so in one
//! line, finishes the cycle (every snapshot written, retention run) and exits 0; a second signal exits at
//! once, saying that the cycle in progress is dropped (its unfinished snapshots stay hidden as
//! `.<port>.partial-<pid>`, never taken for finished ones).
#![forbid(unsafe_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::SystemTime;

#[derive(Debug, Default)]
struct State {
    requests: u32,
    /// The RFC 3339 start of the cycle in progress.
    cycle: Option<String>,
}

/// Shared between the collector's loop and the thread that waits for signals.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    inner: Arc<(Mutex<State>, Condvar)>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A stop signal named `signal` arrived: exits between cycles, otherwise asks the loop to stop after
    /// this cycle (or exits at once on the second request).
    pub fn request(&self, signal: &str) {
        let mut st = self.state();
        st.requests += 1;
        match (&st.cycle, st.requests) {
            (None, _) => {
                eprintln!("nl6 collect: {signal}: exiting (no cycle in progress)");
                std::process::exit(0);
            }
            (Some(c), 1) => eprintln!(
                "nl6 collect: {signal}: finishing the cycle in progress (started {c}), then exiting; send {signal} again to stop at once"
            ),
            (Some(c), _) => {
                eprintln!(
                    "nl6 collect: {signal} again: exiting now; the cycle started {c} is dropped (its unfinished snapshots stay hidden as .<port>.partial-<pid>)"
                );
                std::process::exit(1);
            }
        }
        self.inner.1.notify_all();
    }

    /// Marks a cycle started at `start` (RFC 3339) as in progress.
    pub fn begin_cycle(&self, start: String) {
        self.state().cycle = Some(start);
    }

    /// Marks the cycle finished; true when a stop was asked for meanwhile.
    pub fn end_cycle(&self) -> bool {
        let mut st = self.state();
        st.cycle = None;
        st.requests > 0
    }

    /// Waits until `deadline`; false when a stop was asked for (the process exits in
    /// [`Stop::request`] then, so this returns false only if it raced a request).
    pub fn sleep_until(&self, deadline: SystemTime) -> bool {
        let mut st = self.state();
        loop {
            if st.requests > 0 {
                return false;
            }
            let Ok(wait) = deadline.duration_since(SystemTime::now()) else {
                return true;
            };
            st = self
                .inner
                .1
                .wait_timeout(st, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
