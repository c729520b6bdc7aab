//! nl6's profiling vocabulary: the `subsystem` label, which part of the lab a thread or a call works for.
//!
//! Each value is one engine label set, `{subsystem = "<name>"}`, built on first use and kept, so
//! entering one is the engine's two thread-local stores ([`nl6_profile::labels::with`]). The built-in
//! values are [`Subsystem`]'s constants (snmp, trap, syslog, flow, gnmi, gnmi-dialout, scenario,
//! scheduler); [`Subsystem::custom`] adds a free-form one (the interop probe's `interop-probe`).
//!
//! Owns the name table and nothing else: sampling, scoping and encoding are the engine's. Never
//! allocates or locks when entering a value (a custom value's first use registers it under a lock).
#![forbid(unsafe_code)]

use nl6_profile::labels::{self as engine, LabelSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The label key every value is written under.
pub const KEY: &str = "subsystem";
/// How many distinct values nl6 can hold (built-ins plus [`Subsystem::custom`] ones).
pub const MAX_VALUES: usize = 64;

/// A `subsystem` label value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Subsystem(u16);

/// The built-in values, in index order (index 0 is unused).
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
static CUSTOM_NAMES: [OnceLock<&'static str>; MAX_VALUES] = [const { OnceLock::new() }; MAX_VALUES];
/// Each value's engine label set, built on first use.
static SETS: [OnceLock<LabelSet>; MAX_VALUES] = [const { OnceLock::new() }; MAX_VALUES];

impl Subsystem {
    /// SNMP agent work (the per-device read loop).
    pub const SNMP: Subsystem = Subsystem(1);
    /// SNMP traps and INFORMs.
    pub const TRAP: Subsystem = Subsystem(2);
    /// Syslog export.
    pub const SYSLOG: Subsystem = Subsystem(3);
    /// NetFlow export.
    pub const FLOW: Subsystem = Subsystem(4);
    /// gNMI.
    pub const GNMI: Subsystem = Subsystem(5);
    /// gNMI dial-out.
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

    /// The value for `name`: a built-in one, or a free-form one registered on first use (the name is
    /// leaked once). Panics past [`MAX_VALUES`] distinct values or for an empty name: nl6's values are a
    /// small fixed vocabulary written in its source, not data.
    pub fn custom(name: &str) -> Subsystem {
        assert!(!name.is_empty(), "a subsystem label value cannot be empty");
        if let Some(s) = Self::find(name) {
            return s;
        }
        let mut names = CUSTOM.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = names.iter().position(|n| *n == name) {
            return Subsystem((BUILTIN.len() + i) as u16);
        }
        let i = names.len();
        assert!(
            BUILTIN.len() + i < MAX_VALUES,
            "more than {MAX_VALUES} subsystem label values"
        );
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        let _ = CUSTOM_NAMES[i].set(leaked);
        names.push(leaked);
        CUSTOM_LEN.store(i + 1, Ordering::Release);
        Subsystem((BUILTIN.len() + i) as u16)
    }

    /// The value already named `name`, without registering one.
    fn find(name: &str) -> Option<Subsystem> {
        (1..BUILTIN.len() + CUSTOM_LEN.load(Ordering::Acquire))
            .map(|i| Subsystem(i as u16))
            .find(|s| s.name() == name)
    }

    /// The label's text, as it appears in profiles.
    pub fn name(self) -> &'static str {
        let i = self.0 as usize;
        if i < BUILTIN.len() {
            return BUILTIN[i];
        }
        CUSTOM_NAMES[i - BUILTIN.len()].get().copied().unwrap_or("")
    }

    /// The engine label set `{subsystem = name}`.
    #[inline]
    pub fn labels(self) -> LabelSet {
        *SETS[self.0 as usize].get_or_init(|| LabelSet::new([(KEY, self.name())]))
    }

    /// The engine's raw label index for this value (what a sample's `label` holds).
    pub fn index(self) -> u16 {
        self.labels().index()
    }

    /// The `subsystem` text of a sample's raw label index; `None` when its set has no such key.
    pub fn name_of(index: u16) -> Option<&'static str> {
        LabelSet::from_index(index)?.get(KEY)
    }

    /// The value a sample's raw label index carries.
    pub fn from_index(index: u16) -> Option<Subsystem> {
        Self::find(Self::name_of(index)?)
    }
}

impl From<Subsystem> for LabelSet {
    fn from(s: Subsystem) -> LabelSet {
        s.labels()
    }
}

impl std::fmt::Display for Subsystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The calling thread's subsystem, if its labels carry one.
pub fn current() -> Option<Subsystem> {
    Subsystem::find(engine::current().get(KEY)?)
}

/// Runs `f` under `label` and restores the thread's labels after ([`nl6_profile::labels::with`]).
#[inline]
pub fn with<R>(label: Subsystem, f: impl FnOnce() -> R) -> R {
    engine::with(label.labels(), f)
}

/// Labels the calling thread `label` for the rest of its life (or until the next call).
#[inline]
pub fn set_thread(label: Subsystem) {
    engine::set_thread(label.labels());
}

/// Clears the calling thread's labels.
#[inline]
pub fn clear_thread() {
    engine::clear_thread();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_round_trip_through_the_engine_s_sets() {
        for s in Subsystem::ALL_BUILTIN {
            assert_eq!(Subsystem::custom(s.name()), s);
            assert_eq!(Subsystem::from_index(s.index()), Some(s));
            assert_eq!(s.labels().pairs(), &[(KEY, s.name())]);
        }
        assert_eq!(Subsystem::SNMP.name(), "snmp");
        assert_eq!(Subsystem::GNMI_DIALOUT.name(), "gnmi-dialout");
        assert_eq!(Subsystem::from_index(0), None);
    }

    #[test]
    fn custom_values_are_interned() {
        let a = Subsystem::custom("interop-probe");
        assert_eq!(a, Subsystem::custom("interop-probe"));
        assert_eq!(a.name(), "interop-probe");
        assert_ne!(a, Subsystem::SNMP);
        assert_eq!(Subsystem::name_of(a.index()), Some("interop-probe"));
    }

    #[test]
    fn scopes_nest_and_restore() {
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
            clear_thread();
            assert_eq!(current(), None);
        })
        .join()
        .unwrap();
    }
}
