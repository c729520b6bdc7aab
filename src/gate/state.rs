//! The gate's state machine as plain values: given the current [`GateState`], a request value (a POST, a
//! revert falling due, startup, shutdown) and the [`Startup`] configuration, it computes the next state, the
//! push actions to run and the one log line that describes the transition.
//!
//! Never does I/O, never reads a clock or the environment (`now` and the `PYROSCOPE_ADHOC_SERVER_ADDRESS`
//! check are passed in), never holds a lock: [`super::control`] executes what it decides.
//!
//! Time: a POST passes [`Now`], both clocks read at once. A revert is *scheduled* on the monotonic one
//! ([`Revert::due`], an `Instant`), so stepping the wall clock (NTP, an operator's `date -s`) neither fires
//! it early nor holds it back; the wall-clock [`Revert::at`] is only displayed (`revert_at`, RFC 3339,
//! the log line). [`on_revert_due`] therefore takes only an `Instant`.
#![forbid(unsafe_code)]

use super::address;
use super::port::PushTarget;
use crate::timefmt::rfc3339_millis as rfc3339;
use std::time::{Duration, Instant, SystemTime};

/// The environment variable the Go SDK would silently push to; nl6 never reads it and refuses to push
/// while it is set.
pub const ADHOC_ENV: &str = "PYROSCOPE_ADHOC_SERVER_ADDRESS";

/// The startup flags the gate consults on every transition. Credentials are bound to `flag_address`.
#[derive(Clone, Default)]
pub struct Startup {
    flag_address: Option<String>,
    basic_auth: Option<(String, String)>,
    tenant: Option<String>,
    interval: Duration,
    wall: bool,
}

impl std::fmt::Debug for Startup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Startup")
            .field("flag_address", &self.flag_address)
            .field("basic_auth", &self.basic_auth.as_ref().map(|_| "<set>"))
            .field("tenant", &self.tenant.as_ref().map(|_| "<set>"))
            .field("interval", &self.interval)
            .field("wall", &self.wall)
            .finish()
    }
}

impl Startup {
    /// Startup configuration (already validated by the CLI).
    pub fn new(
        flag_address: Option<String>,
        basic_auth: Option<(String, String)>,
        tenant: Option<String>,
        interval: Duration,
    ) -> Startup {
        Startup {
            flag_address,
            basic_auth,
            tenant,
            interval,
            wall: false,
        }
    }
    /// With `-profiling-wall`: every push (the flag's or a runtime one) also uploads a wall-clock window.
    pub fn with_wall(mut self, wall: bool) -> Startup {
        self.wall = wall;
        self
    }
    /// `-profiling-wall`. Defaults to off.
    pub fn wall(&self) -> bool {
        self.wall
    }
    /// `-profiling-pyroscope`. Defaults to none.
    pub fn flag_address(&self) -> Option<&str> {
        self.flag_address.as_deref()
    }
    /// Upload cadence handed to every push. Defaults to zero (the CLI always sets it).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The push target for `address`: credentials and tenant only when it is the flag's address
    /// (normalised). The flag says whether credentials were withheld.
    pub fn target_for(&self, address: &str) -> (PushTarget, bool) {
        let Startup {
            flag_address,
            basic_auth,
            tenant,
            interval,
            wall,
        } = self;
        let bound = flag_address
            .as_deref()
            .is_some_and(|f| address::same(f, address));
        let has_secrets = basic_auth.is_some() || tenant.is_some();
        let target = PushTarget {
            address: address.to_string(),
            basic_auth: if bound { basic_auth.clone() } else { None },
            tenant: if bound { tenant.clone() } else { None },
            interval: *interval,
            wall: *wall,
        };
        (target, has_secrets && !bound)
    }
}

/// What a revert restores, and what a POST chooses: open or closed, and where to push (None = pull-only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateValue {
    pub enabled: bool,
    pub push_address: Option<String>,
}

/// The present on both clocks, read together by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// For display: when a revert happens, as a date.
    pub wall: SystemTime,
    /// For scheduling: immune to clock steps.
    pub mono: Instant,
}

impl Now {
    /// Both clocks, read now.
    pub fn read() -> Now {
        Now {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }
}

/// A scheduled return to an earlier value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revert {
    /// When it happens on the wall clock as of the POST (shown as `revert_at`; never waited on).
    pub at: SystemTime,
    /// When it happens on the monotonic clock (what the timer waits for).
    pub due: Instant,
    pub to: GateValue,
}

/// The whole gate state. `pushing` is true while a push run is held; `last_error` is the reason the
/// newest push could not start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateState {
    pub value: GateValue,
    pub pushing: bool,
    pub last_error: Option<String>,
    pub revert: Option<Revert>,
}

/// The three shapes of `server_address` in a POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressField {
    /// Keep the running push's address, else the flag's, else pull-only.
    Omitted,
    /// `""`: pull-only even when the flag is set.
    Empty,
    /// Re-target (a no-op when it is the running push's address).
    Value(String),
}

/// A validated-shape POST body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostRequest {
    pub enabled: bool,
    pub server_address: AddressField,
    pub duration: Option<Duration>,
}

/// A push action for the controller to run, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop the running push (bounded flush).
    StopPush,
    /// Start a push to this target.
    StartPush(PushTarget),
}

/// The outcome of a transition: the next state, what to do, the log line, and whether the request failed
/// after all (the push could not start: the POST answers 500 with the state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub state: GateState,
    pub actions: Vec<Action>,
    /// Starts with `[profiling] `; the controller may append what happened while running the actions.
    pub log: String,
    pub failure: Option<PushRefusal>,
}

/// Why a transition that would start a push refuses to (the gate opens pull-only; the POST answers 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushRefusal {
    /// [`ADHOC_ENV`] is set in nl6's environment.
    AdhocEnv,
}

impl std::fmt::Display for PushRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushRefusal::AdhocEnv => f.write_str(&adhoc_refusal()),
        }
    }
}

impl std::error::Error for PushRefusal {}

/// The message a push refused because of [`ADHOC_ENV`] carries.
pub fn adhoc_refusal() -> String {
    format!(
        "{ADHOC_ENV} is set in nl6's environment: nl6 never reads it and refuses to push while it is set \
         (the Go SDK would silently push there instead); unset it"
    )
}

/// Why a POST was refused: a 400 naming the field; the state is then unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostRefusal {
    /// `server_address` given with `enabled:false`, where it would be ignored.
    AddressWhileDisabling,
    /// `duration` reaches past what this system's clock can represent.
    DurationOverflow,
    /// `server_address` breaks an address rule.
    Address(address::AddressError),
}

impl std::fmt::Display for PostRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostRefusal::AddressWhileDisabling => f.write_str(
                "server_address is not accepted with enabled:false (it would be ignored)",
            ),
            PostRefusal::DurationOverflow => {
                f.write_str("duration: too long for this system's clock")
            }
            PostRefusal::Address(e) => write!(f, "server_address: {e}"),
        }
    }
}

impl std::error::Error for PostRefusal {}

/// A POST. `Err` is a 400 with its message; the state is then unchanged.
pub fn on_post(
    state: &GateState,
    req: &PostRequest,
    startup: &Startup,
    adhoc_env_set: bool,
    now: Now,
) -> Result<Transition, PostRefusal> {
    if !req.enabled && req.server_address != AddressField::Omitted {
        return Err(PostRefusal::AddressWhileDisabling);
    }
    let revert = match req.duration {
        Some(d) => {
            let at = now
                .wall
                .checked_add(d)
                .ok_or(PostRefusal::DurationOverflow)?;
            let due = now
                .mono
                .checked_add(d)
                .ok_or(PostRefusal::DurationOverflow)?;
            Some(Revert {
                at,
                due,
                to: state.value.clone(),
            })
        }
        None => None,
    };
    let target = if !req.enabled {
        GateValue {
            enabled: false,
            push_address: None,
        }
    } else {
        let push_address = match &req.server_address {
            AddressField::Omitted if state.pushing => state.value.push_address.clone(),
            AddressField::Omitted => startup.flag_address.clone(),
            AddressField::Empty => None,
            AddressField::Value(a) => {
                address::validate(a).map_err(PostRefusal::Address)?;
                Some(a.clone())
            }
        };
        GateValue {
            enabled: true,
            push_address,
        }
    };
    let mut cause = "POST".to_string();
    if state.revert.is_some() {
        cause.push_str(" (pending revert cancelled)");
    }
    Ok(apply(state, target, revert, startup, adhoc_env_set, &cause))
}

/// A pending revert that has fallen due at `now` (monotonic: the wall clock plays no part); `None` when
/// there is nothing to do yet.
pub fn on_revert_due(
    state: &GateState,
    startup: &Startup,
    adhoc_env_set: bool,
    now: Instant,
) -> Option<Transition> {
    let revert = state.revert.as_ref()?;
    if now < revert.due {
        return None;
    }
    Some(apply(
        state,
        revert.to.clone(),
        None,
        startup,
        adhoc_env_set,
        "duration elapsed, reverted",
    ))
}

/// Boot: the flag opens the gate with a push (the CLI has refused the adhoc variable already).
pub fn on_startup(startup: &Startup, adhoc_env_set: bool) -> Transition {
    let target = GateValue {
        enabled: startup.flag_address.is_some(),
        push_address: startup.flag_address.clone(),
    };
    apply(
        &GateState::default(),
        target,
        None,
        startup,
        adhoc_env_set,
        "startup",
    )
}

/// SIGTERM/SIGINT: close, stopping any push, cancelling any revert.
pub fn on_shutdown(state: &GateState, startup: &Startup) -> Transition {
    apply(
        state,
        GateValue::default(),
        None,
        startup,
        false,
        "shutdown",
    )
}

/// Moves from `state` to `target`: a push already running to the same (normalised) address is kept,
/// anything else stops it and starts the new one.
fn apply(
    state: &GateState,
    target: GateValue,
    revert: Option<Revert>,
    startup: &Startup,
    adhoc_env_set: bool,
    cause: &str,
) -> Transition {
    let running = if state.pushing {
        state.value.push_address.as_deref()
    } else {
        None
    };
    let wanted = if target.enabled {
        target.push_address.as_deref()
    } else {
        None
    };
    let mut actions = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut failure = None;
    let mut next = GateState {
        value: target.clone(),
        pushing: false,
        last_error: None,
        revert: revert.clone(),
    };
    let what = match (running, wanted) {
        (Some(old), Some(new)) if address::same(old, new) => {
            next.value.push_address = Some(old.to_string());
            next.pushing = true;
            format!("gate open, push to {old} unchanged")
        }
        (_, wanted) => {
            if let Some(old) = running {
                actions.push(Action::StopPush);
                notes.push(format!("stopped push to {old}"));
            }
            match wanted {
                None if target.enabled => "gate open, pull-only".to_string(),
                None => "gate closed".to_string(),
                Some(new) if adhoc_env_set => {
                    let refusal = PushRefusal::AdhocEnv;
                    next.last_error = Some(refusal.to_string());
                    failure = Some(refusal);
                    format!("gate open, push to {new} refused: {refusal}")
                }
                Some(new) => {
                    let (push, withheld) = startup.target_for(new);
                    actions.push(Action::StartPush(push));
                    next.pushing = true;
                    if withheld {
                        notes.push(
                            "credentials withheld: address differs from -profiling-pyroscope"
                                .to_string(),
                        );
                    }
                    format!("gate open, pushing to {new}")
                }
            }
        }
    };
    Transition {
        state: next,
        actions,
        log: log_line(cause, &what, notes, revert.as_ref()),
        failure,
    }
}

/// The transition's one line: `[profiling] cause: what; note; …`, the pending revert last.
fn log_line(cause: &str, what: &str, mut notes: Vec<String>, revert: Option<&Revert>) -> String {
    if let Some(r) = revert {
        notes.push(format!(
            "reverts at {} to {}",
            rfc3339(r.at),
            describe(&r.to)
        ));
    }
    let mut log = format!("[profiling] {cause}: {what}");
    for n in notes {
        log.push_str("; ");
        log.push_str(&n);
    }
    log
}

fn describe(v: &GateValue) -> String {
    match (v.enabled, &v.push_address) {
        (false, _) => "closed".to_string(),
        (true, None) => "open, pull-only".to_string(),
        (true, Some(a)) => format!("open, pushing to {a}"),
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
