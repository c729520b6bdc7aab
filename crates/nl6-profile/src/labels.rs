//! The `subsystem` profiling label: which part of nl6 a thread is working for.
//!
//! Every CPU sample and every thread-stack sample carries the label the thread had **at the instant the
//! sample was taken**: the signal handler reads it from a thread-local, so a label applies to exactly the
//! code that ran under it (Go reads goroutine labels in its SIGPROF handler the same way).
//!
//! Three ways to set it:
//! - at thread birth, for long-lived loops: [`spawn_labelled`](crate::threads::spawn_labelled) (or
//!   [`set_thread`] inside a thread spawned otherwise);
//! - for a call's duration, the analog of Go's `pprof.Do`: [`with`] sets the label, runs the closure and
//!   restores the label the thread had before, also when the closure unwinds. The innermost scope wins;
//! - [`current`] reads it.
//!
//! Values are the [`Subsystem`] constants (snmp, trap, syslog, flow, gnmi, gnmi-dialout, scenario, scheduler) or a
//! free-form value registered once with [`Subsystem::custom`] (e.g. `interop-probe`).
//!
//! What this module never does: allocate or lock on [`with`] / [`current`] / [`set_thread`] (a scope is two
//! thread-local stores), or run a destructor at thread exit (the thread-local is `const`-initialised and
//! `Copy`, so it stays readable from a signal handler and while a thread exits).
#![forbid(unsafe_code)]

use std::sync::atomic::{compiler_fence, AtomicU16, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How many distinct label values a process can hold (built-ins plus [`Subsystem::custom`] ones).
pub const MAX_LABELS: usize = 64;

/// A `subsystem` label value: a small index into the process's label table, so the signal handler reads
/// one machine word and can never see a torn value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Subsystem(u16);

/// The built-in values, in index order (index 0 is "no label").
const BUILTIN: [&str; 9] = [
    "",
    "snmp",
    "trap",
    "syslog",
    "flow",
    "gnmi",
    "gnmi-dialout",
    "scenario",
    "scheduler",
];

static CUSTOM: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
/// Number of custom values registered; read without the lock by [`Subsystem::name`].
static CUSTOM_LEN: AtomicUsize = AtomicUsize::new(0);
/// Custom names, published one slot at a time (index `i` is valid once `CUSTOM_LEN > i`).
static CUSTOM_NAMES: [std::sync::OnceLock<&'static str>; MAX_LABELS] =
    [const { std::sync::OnceLock::new() }; MAX_LABELS];

impl Subsystem {
    /// SNMP agent work (the per-device read loop).
    pub const SNMP: Subsystem = Subsystem(1);
    /// SNMP traps and INFORMs.
    pub const TRAP: Subsystem = Subsystem(2);
    /// Syslog export.
    pub const SYSLOG: Subsystem = Subsystem(3);
    /// NetFlow export.
    pub const FLOW: Subsystem = Subsystem(4);
    /// The gNMI target (the `gnmi` thread: Capabilities, Get, Set, Subscribe).
    pub const GNMI: Subsystem = Subsystem(5);
    /// gNMI dial-out (the `gnmi-dialout` thread streaming to a collector).
    pub const GNMI_DIALOUT: Subsystem = Subsystem(6);
    /// Scenario orchestration.
    pub const SCENARIO: Subsystem = Subsystem(7);
    /// The lab scheduler's own bookkeeping between jobs (each job runs under its own subsystem).
    pub const SCHEDULER: Subsystem = Subsystem(8);

    /// Every built-in value, for tables and tests.
    pub const ALL_BUILTIN: [Subsystem; 8] = [
        Subsystem::SNMP,
        Subsystem::TRAP,
        Subsystem::SYSLOG,
        Subsystem::FLOW,
        Subsystem::GNMI,
        Subsystem::GNMI_DIALOUT,
        Subsystem::SCENARIO,
        Subsystem::SCHEDULER,
    ];

    /// The value for `name`: a built-in one, or a free-form one registered on first use (the name is leaked
    /// once, so registering the same name again returns the same value). Panics past [`MAX_LABELS`]
    /// distinct values or for an empty name: label values are a small fixed vocabulary, not data.
    pub fn custom(name: &str) -> Subsystem {
        assert!(!name.is_empty(), "a subsystem label value cannot be empty");
        if let Some(i) = BUILTIN.iter().position(|b| *b == name) {
            return Subsystem(i as u16);
        }
        let mut names = CUSTOM.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = names.iter().position(|n| *n == name) {
            return Subsystem((BUILTIN.len() + i) as u16);
        }
        let i = names.len();
        assert!(
            BUILTIN.len() + i < MAX_LABELS,
            "more than {MAX_LABELS} subsystem label values"
        );
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        let _ = CUSTOM_NAMES[i].set(leaked);
        names.push(leaked);
        CUSTOM_LEN.store(i + 1, Ordering::Release);
        Subsystem((BUILTIN.len() + i) as u16)
    }

    /// The label's text, as it appears in profiles.
    pub fn name(self) -> &'static str {
        Self::name_of(self.0).unwrap_or("")
    }

    /// The raw index stored in the thread-local (0 = none).
    pub fn index(self) -> u16 {
        self.0
    }

    /// The text for a raw index read by a sampler; `None` for 0 or an unknown index.
    pub fn name_of(index: u16) -> Option<&'static str> {
        let i = index as usize;
        if i == 0 {
            return None;
        }
        if i < BUILTIN.len() {
            return Some(BUILTIN[i]);
        }
        let c = i - BUILTIN.len();
        if c < CUSTOM_LEN.load(Ordering::Acquire) {
            CUSTOM_NAMES[c].get().copied()
        } else {
            None
        }
    }

    /// The value for a raw index (0 = none).
    pub fn from_index(index: u16) -> Option<Subsystem> {
        Self::name_of(index).map(|_| Subsystem(index))
    }
}

impl std::fmt::Display for Subsystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

thread_local! {
    /// The calling thread's label index (0 = none). `const`-initialised, no destructor, so the signal
    /// handler and thread-exit code can read it. An atomic (Relaxed: the same plain `mov` as a `Cell`)
    /// because a handler's read of a value the interrupted code writes is, by the language's rules, a
    /// concurrent access, which only atomics make defined.
    static CURRENT: AtomicU16 = const { AtomicU16::new(0) };
}

/// The calling thread's label, if any.
#[inline]
pub fn current() -> Option<Subsystem> {
    Subsystem::from_index(current_index())
}

/// The raw label index of the calling thread (0 = none). Async-signal-safe: one thread-local load.
#[inline]
pub fn current_index() -> u16 {
    CURRENT.with(|c| c.load(Ordering::Relaxed))
}

/// Stores the calling thread's label index between two compiler fences. Only a signal handler on this
/// same thread reads the value while it is set, which the compiler cannot see: without the fences, a
/// `with` around a closure that does not touch the label has both stores deleted at -O (the second
/// overwrites the first, and nothing the compiler knows of reads in between) or moved across the
/// closure's code. The fences are a signal fence (no instruction is emitted): the stores happen where
/// they are written, in program order, as the handler sees it.
#[inline(always)]
pub(crate) fn store_label(index: u16) {
    compiler_fence(Ordering::SeqCst);
    CURRENT.with(|c| c.store(index, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

/// Sets the calling thread's label for the rest of its life (or until the next `set_thread`).
/// Use at the top of a long-lived loop in a thread not spawned with
/// [`threads::spawn_labelled`](crate::threads::spawn_labelled).
#[inline]
pub fn set_thread(label: Subsystem) {
    store_label(label.0);
}

/// Clears the calling thread's label.
#[inline]
pub fn clear_thread() {
    store_label(0);
}

/// Restores the previous label when dropped, so a scope ends correctly on return and on unwind.
struct Restore(u16);

impl Drop for Restore {
    #[inline]
    fn drop(&mut self) {
        store_label(self.0);
    }
}

/// Runs `f` with the calling thread labelled `label`, then restores the label the thread had before (also
/// if `f` panics). Nested scopes: the innermost wins inside it; after it returns, the outer label is back.
/// When the thread already carries `label`, nothing is written at all. Costs two thread-local stores and
/// allocates nothing. Correct whatever `f` does: the stores are fenced (see `store_label`), so a pure
/// computation in `f` is sampled under `label` even when the compiler can see that `f` never reads it.
#[inline]
pub fn with<R>(label: Subsystem, f: impl FnOnce() -> R) -> R {
    let before = current_index();
    if before == label.0 {
        return f();
    }
    store_label(label.0);
    let _restore = Restore(before);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_round_trip() {
        for s in Subsystem::ALL_BUILTIN {
            assert_eq!(Subsystem::custom(s.name()), s);
            assert_eq!(Subsystem::from_index(s.index()), Some(s));
        }
        assert_eq!(Subsystem::SNMP.name(), "snmp");
        assert_eq!(Subsystem::GNMI_DIALOUT.name(), "gnmi-dialout");
        assert_eq!(Subsystem::from_index(0), None);
    }

    #[test]
    fn custom_values_are_interned() {
        let a = Subsystem::custom("interop-probe");
        let b = Subsystem::custom("interop-probe");
        assert_eq!(a, b);
        assert_eq!(a.name(), "interop-probe");
        assert_ne!(a, Subsystem::SNMP);
    }

    #[test]
    fn nesting_restores_outer_label_and_innermost_wins() {
        std::thread::spawn(|| {
            assert_eq!(current(), None);
            set_thread(Subsystem::SCENARIO);
            with(Subsystem::FLOW, || {
                assert_eq!(current(), Some(Subsystem::FLOW));
                with(Subsystem::SYSLOG, || {
                    assert_eq!(current(), Some(Subsystem::SYSLOG))
                });
                assert_eq!(current(), Some(Subsystem::FLOW));
            });
            assert_eq!(current(), Some(Subsystem::SCENARIO));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn scope_restores_on_unwind() {
        std::thread::spawn(|| {
            set_thread(Subsystem::TRAP);
            let r = std::panic::catch_unwind(|| with(Subsystem::SYSLOG, || panic!("boom")));
            assert!(r.is_err());
            assert_eq!(current(), Some(Subsystem::TRAP));
        })
        .join()
        .unwrap();
    }
}
