//! Which threads a CPU profile could not see: the threads the sampler found but could not arm a timer on
//! (`timer_create` refused: most often `EAGAIN`, the per-user pending-signal limit `RLIMIT_SIGPENDING`,
//! since every POSIX timer holds one queued-signal slot from its creation), with the reason.
//!
//! What it provides: [`Coverage`], carried by every [`super::CpuProfile`] and turned into the profile's
//! comment and the log line by [`Coverage::note`]; [`current`], the running (or last) session's coverage
//! for status views; and the rule that one session logs one line, again only when more threads go
//! unarmed than it already said.
//!
//! Never: runs in a signal handler; retries arming (the timers' rescan does).
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A thread the CPU sampler found and could not arm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnarmedThread {
    /// The kernel thread id.
    pub tid: i32,
    /// Its name (`/proc/self/task/<tid>/comm` when it was found).
    pub name: String,
    /// The errno `timer_create` answered.
    pub errno: i32,
}

/// The threads a CPU window saw and the ones among them it could not sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// The most threads seen at once (armed or not) during the window.
    pub threads_seen: usize,
    /// Threads without a timer at some point of the window, by tid.
    pub unarmed: BTreeMap<i32, UnarmedThread>,
}

/// A thread's name (`/proc/self/task/<tid>/comm`; empty if it is gone). Also the thread dump's.
pub(crate) fn thread_name(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// Names listed in a note before "and N more".
const NAMES_SHOWN: usize = 64;

/// Why `timer_create` refused, with the remedy when it is a limit.
pub(crate) fn cause(errno: i32) -> String {
    let err = std::io::Error::from_raw_os_error(errno);
    if errno == libc::EAGAIN {
        format!(
            "timer_create: {err}: the pending-signal limit RLIMIT_SIGPENDING is reached (each timer holds one queued signal; raise `ulimit -i` or LimitSIGPENDING=)"
        )
    } else {
        format!("timer_create: {err}")
    }
}

impl Coverage {
    /// Folds in what the timers know now: `armed` threads have a timer, `unarmed` do not.
    pub(super) fn observe(&mut self, armed: usize, unarmed: &BTreeMap<i32, UnarmedThread>) {
        self.threads_seen = self.threads_seen.max(armed + unarmed.len());
        for (tid, t) in unarmed {
            self.unarmed.entry(*tid).or_insert_with(|| t.clone());
        }
    }

    /// The profile comment and log text when some thread went unsampled, None when every thread was armed.
    pub fn note(&self) -> Option<String> {
        let first = self.unarmed.values().next()?;
        let mut names: Vec<&str> = self
            .unarmed
            .values()
            .take(NAMES_SHOWN)
            .map(|t| t.name.as_str())
            .collect();
        let more = self.unarmed.len().saturating_sub(NAMES_SHOWN);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        names
            .iter_mut()
            .filter(|n| n.is_empty())
            .for_each(|n| *n = "?");
        Some(format!(
            "the CPU sampler could not arm a timer on {} of {} threads ({}): their CPU time is missing from this profile: {}{more}",
            self.unarmed.len(),
            self.threads_seen.max(self.unarmed.len()),
            cause(first.errno),
            names.join(", ")
        ))
    }
}

/// The running or last session's coverage, and how many unarmed threads it has logged.
struct Current {
    coverage: Coverage,
    logged: usize,
}

static CURRENT: Mutex<Current> = Mutex::new(Current {
    coverage: Coverage {
        threads_seen: 0,
        unarmed: BTreeMap::new(),
    },
    logged: 0,
});

fn lock() -> std::sync::MutexGuard<'static, Current> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running (or last) CPU session's coverage: which threads it could not arm.
pub(crate) fn current() -> Coverage {
    lock().coverage.clone()
}

/// A new session begins: nothing known yet.
pub(super) fn reset() {
    *lock() = Current {
        coverage: Coverage::default(),
        logged: 0,
    };
}

/// Records the session's timers as they are now, and (when `may_log`: the collector's ticks, once the
/// collector itself is counted) logs one line when more threads are unarmed than the session has said.
pub(super) fn publish(armed: usize, unarmed: &BTreeMap<i32, UnarmedThread>, may_log: bool) {
    let line = {
        let mut c = lock();
        let mut now = Coverage::default();
        now.observe(armed, unarmed);
        c.coverage.threads_seen = c.coverage.threads_seen.max(now.threads_seen);
        c.coverage.unarmed = now.unarmed;
        let n = c.coverage.unarmed.len();
        if !may_log || n <= c.logged {
            return;
        }
        c.logged = n;
        c.coverage.note()
    };
    if let Some(line) = line {
        crate::notes::log(&format!("cpu profile: {line}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unarmed(tids: &[i32]) -> BTreeMap<i32, UnarmedThread> {
        tids.iter()
            .map(|&tid| {
                (
                    tid,
                    UnarmedThread {
                        tid,
                        name: format!("worker-{tid}"),
                        errno: libc::EAGAIN,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_full_coverage_has_no_note() {
        let mut c = Coverage::default();
        c.observe(26, &BTreeMap::new());
        assert_eq!(c.note(), None);
        assert_eq!(c.threads_seen, 26);
    }

    #[test]
    fn the_note_counts_names_and_gives_the_cause() {
        let mut c = Coverage::default();
        c.observe(4, &unarmed(&[10, 11, 12]));
        // A thread that exits stays counted for the window.
        c.observe(4, &unarmed(&[10, 11]));
        let note = c.note().unwrap();
        assert!(note.contains("on 3 of 7 threads"), "{note}");
        assert!(note.contains("RLIMIT_SIGPENDING"), "{note}");
        assert!(note.ends_with("worker-10, worker-11, worker-12"), "{note}");
    }

    #[test]
    fn a_long_list_is_cut_with_a_count() {
        let mut c = Coverage::default();
        let tids: Vec<i32> = (1..=100).collect();
        c.observe(0, &unarmed(&tids));
        let note = c.note().unwrap();
        assert!(note.ends_with("worker-64 and 36 more"), "{note}");
        assert!(cause(libc::EINVAL).starts_with("timer_create: "));
    }
}
