//! Scenarios: `link-flap` on one device, started now or at `start_at`, listed by `GET /api/v1/scenarios`.
//!
//! A link-flap toggles one interface down and up for its duration (each toggle: counters change, a
//! linkDown/linkUp trap, a syslog message) and runs its own flow ticker. Labels: [`start`] and the finish
//! are scoped `scenario`; the runner thread carries `scenario` from birth, so between ticks it is
//! `scenario` and inside a flow tick `flow`; a scheduled start's waiting thread is spawned under
//! `scenario` and inherits it. Request parsing is a plain function whose errors name the field.
//!
//! [`cancel`] (`DELETE /api/v1/scenarios/{id}`) ends a scheduled or running scenario: it is marked
//! cancelled at once (so it no longer counts towards [`MAX_ACTIVE`]); a scheduled one's waiting thread
//! ends within [`CANCEL_POLL`], a running one's runner at its next tick (at most 5 s), bringing the
//! interface back up.
#![forbid(unsafe_code)]

use super::device::Device;
use super::netflow::FlowExporter;
use super::syslog;
use crate::labels::{self, Subsystem};
use crate::timefmt::{format_go_duration as format_duration, parse_rfc3339, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Scenario names this build knows.
pub const KNOWN: &[&str] = &["link-flap"];
/// Longest scenario accepted (a lab run, not a soak).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Furthest ahead a `start_at` may be: a scheduled start holds a waiting thread until then.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// Scenarios scheduled or running at once: each holds a thread, and the API is unauthenticated.
pub const MAX_ACTIVE: usize = 64;
/// Finished or cancelled scenarios kept for `GET /api/v1/scenarios` (the oldest are forgotten first).
pub const KEEP_ENDED: usize = 256;
/// How often a scheduled start's waiting thread looks whether it was cancelled.
pub const CANCEL_POLL: Duration = Duration::from_secs(1);

/// What a scenario needs from the fleet that runs it. The fleet implements it; this module never names
/// the fleet, so the two files do not depend on each other both ways.
pub trait Host: Send + Sync + 'static {
    fn devices(&self) -> &[Arc<Device>];
    /// Where the fleet keeps its scenarios.
    fn book(&self) -> &Book;
    /// Sleeps until `t`; false when the fleet is stopping (at once or during the sleep).
    fn sleep_until(&self, t: Instant) -> bool;
    /// Spawns a fleet thread with a birth label (joined at stop).
    fn spawn_labelled(
        &self,
        label: Subsystem,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()>;
    /// Spawns a fleet thread that inherits the caller's label.
    fn spawn_inheriting_label(
        &self,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()>;
    /// Changes an interface's oper status and announces it; false when nothing changed.
    fn set_link(&self, index: usize, if_index: u32, up: bool) -> bool;
    /// Emits a syslog message from device `index` (false when off or dropped).
    fn emit_syslog(&self, index: usize, severity: u8, msgid: &str, text: &str) -> bool;
    /// A flow exporter of the scenario's own, when flows are on.
    fn flow_exporter(&self) -> Option<FlowExporter>;
    fn flow_interval(&self) -> Duration;
    /// True once the fleet is stopping.
    fn stopping(&self) -> bool;
}

/// A validated `POST /api/v1/scenarios` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: String,
    pub device: String,
    pub duration: Duration,
    pub start_at: Option<SystemTime>,
}

/// Parses and validates a body against the device names; the error names the offending field.
pub fn parse_request(
    body: &[u8],
    device_exists: impl Fn(&str) -> bool,
) -> Result<Request, RequestError> {
    let v = crate::jsonbody::parse(body).map_err(RequestError::Body)?;
    let obj = v.as_object().ok_or(RequestError::NotObject)?;
    for k in obj.keys() {
        if !["name", "device", "duration", "start_at"].contains(&k.as_str()) {
            return Err(RequestError::UnknownField(k.clone()));
        }
    }
    let text = |field: &'static str| match obj.get(field) {
        Some(serde_json::Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(RequestError::NotString(field)),
        None => Err(RequestError::Missing(field)),
    };
    let name = text("name")?;
    if !KNOWN.contains(&name) {
        return Err(RequestError::UnknownScenario(name.into()));
    }
    let device = text("device")?;
    if !device_exists(device) {
        return Err(RequestError::NoDevice(device.into()));
    }
    let duration =
        crate::timefmt::parse_go_duration(text("duration")?).map_err(RequestError::Duration)?;
    if duration.is_zero() || duration > MAX_DURATION {
        return Err(RequestError::DurationRange);
    }
    let start_at = match obj.get("start_at") {
        None | Some(serde_json::Value::Null) => None,
        Some(_) => Some(parse_rfc3339(text("start_at")?).map_err(RequestError::StartAt)?),
    };
    Ok(Request {
        name: name.into(),
        device: device.into(),
        duration,
        start_at,
    })
}

/// Why a `POST /api/v1/scenarios` body was refused; `Display` names the field.
#[derive(Debug)]
pub enum RequestError {
    /// Not JSON, or a key twice in one object.
    Body(crate::jsonbody::BodyError),
    NotObject,
    /// A field this build does not know.
    UnknownField(String),
    NotString(&'static str),
    Missing(&'static str),
    /// A `name` not in [`KNOWN`].
    UnknownScenario(String),
    /// A `device` the fleet does not have.
    NoDevice(String),
    Duration(crate::timefmt::DurationError),
    /// A `duration` of 0 or above [`MAX_DURATION`].
    DurationRange,
    /// A `start_at` that is not an RFC 3339 time (the parser's reason).
    StartAt(crate::timefmt::Rfc3339Error),
    /// A `start_at` beyond [`MAX_START_AHEAD`].
    StartTooFar,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::jsonbody::BodyError;
        match self {
            RequestError::Body(BodyError::Invalid(e)) => write!(f, "body: invalid JSON: {e}"),
            RequestError::Body(dup) => write!(f, "body: {dup}"),
            RequestError::NotObject => f.write_str("body: want a JSON object"),
            RequestError::UnknownField(k) => write!(
                f,
                "field {k:?} is not known (name, device, duration, start_at)"
            ),
            RequestError::NotString(field) => write!(f, "field {field:?} must be a string"),
            RequestError::Missing(field) => write!(f, "field {field:?} is required"),
            RequestError::UnknownScenario(name) => write!(
                f,
                "field \"name\": unknown scenario {name:?} (known: {})",
                KNOWN.join(", ")
            ),
            RequestError::NoDevice(d) => write!(f, "field \"device\": no device named {d:?}"),
            RequestError::Duration(e) => write!(f, "field \"duration\": {e}"),
            RequestError::DurationRange => write!(
                f,
                "field \"duration\": must be above 0 and at most {}",
                format_duration(MAX_DURATION)
            ),
            RequestError::StartAt(e) => write!(f, "field \"start_at\": {e}"),
            RequestError::StartTooFar => write!(
                f,
                "field \"start_at\": at most {} ahead",
                format_duration(MAX_START_AHEAD)
            ),
        }
    }
}

impl std::error::Error for RequestError {}

/// Where a scenario is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Scheduled,
    Running,
    Finished,
    /// Cancelled through the API, or the fleet stopped before the scenario ended.
    Cancelled,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Scheduled => "scheduled",
            Phase::Running => "running",
            Phase::Finished => "finished",
            Phase::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug)]
struct Progress {
    phase: Phase,
    started: Option<SystemTime>,
    finished: Option<SystemTime>,
    flaps: u64,
    flow_ticks: u64,
}

/// One scenario's record.
#[derive(Debug)]
pub struct Scenario {
    pub id: u64,
    pub request: Request,
    pub device_index: usize,
    pub created: SystemTime,
    progress: Mutex<Progress>,
    /// Set by [`cancel`]: the scenario's thread ends at its next look.
    cancelled: std::sync::atomic::AtomicBool,
}

impl Scenario {
    pub fn phase(&self) -> Phase {
        self.lock().phase
    }
    fn cancel_requested(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The record as JSON for the API.
    pub fn to_json(&self) -> serde_json::Value {
        let p = self.lock();
        let t = |t: Option<SystemTime>| {
            t.map(|t| {
                let mut s = String::new();
                let _ = Timestamp::utc_millis(t).write_to(&mut s);
                s
            })
        };
        serde_json::json!({
            "id": self.id,
            "name": self.request.name,
            "device": self.request.device,
            "duration": format_duration(self.request.duration),
            "start_at": t(self.request.start_at),
            "state": p.phase.name(),
            "started_at": t(p.started),
            "finished_at": t(p.finished),
            "flaps": p.flaps,
            "flow_ticks": p.flow_ticks,
        })
    }
}

/// Every scenario the fleet was given.
#[derive(Debug, Default)]
pub struct Book {
    next_id: AtomicU64,
    items: Mutex<Vec<Arc<Scenario>>>,
}

impl Book {
    pub fn list(&self) -> Vec<Arc<Scenario>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why [`submit`] refused a request.
#[derive(Debug)]
pub enum SubmitError {
    /// The request names something wrong (400); the error names the field.
    Invalid(RequestError),
    /// [`MAX_ACTIVE`] scenarios are already scheduled or running (429).
    TooMany,
    /// The OS refused the scenario's thread (500).
    Spawn(std::io::Error),
}

impl SubmitError {
    /// The HTTP status this refusal answers with.
    pub fn status(&self) -> u16 {
        match self {
            SubmitError::Invalid(_) => 400,
            SubmitError::TooMany => 429,
            SubmitError::Spawn(_) => 500,
        }
    }
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::Invalid(e) => e.fmt(f),
            SubmitError::TooMany => write!(
                f,
                "{MAX_ACTIVE} scenarios are already scheduled or running; wait for one to finish"
            ),
            SubmitError::Spawn(e) => write!(f, "cannot start scenario thread: {e}"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// Records a validated request and starts it now or schedules it. At most [`MAX_ACTIVE`] scenarios are
/// scheduled or running at once, a start is at most [`MAX_START_AHEAD`] away, and only the newest
/// [`KEEP_ENDED`] ended scenarios stay listed. A scenario is listed only once its thread exists.
pub fn submit<H: Host>(sh: &Arc<H>, req: Request) -> Result<Arc<Scenario>, SubmitError> {
    let device_index = super::device::index_of(&req.device)
        .filter(|&i| i < sh.devices().len())
        .ok_or_else(|| SubmitError::Invalid(RequestError::NoDevice(req.device.clone())))?;
    let now = SystemTime::now();
    let delay = req
        .start_at
        .and_then(|t| t.duration_since(now).ok())
        .filter(|d| !d.is_zero());
    if delay.is_some_and(|d| d > MAX_START_AHEAD) {
        return Err(SubmitError::Invalid(RequestError::StartTooFar));
    }
    // Held across the count, the spawn and the insertion, so concurrent POSTs cannot overshoot.
    let mut items = sh.book().items.lock().unwrap_or_else(|e| e.into_inner());
    let active = |s: &Arc<Scenario>| matches!(s.phase(), Phase::Scheduled | Phase::Running);
    if items.iter().filter(|s| active(s)).count() >= MAX_ACTIVE {
        return Err(SubmitError::TooMany);
    }
    let sc = Arc::new(Scenario {
        id: sh.book().next_id.fetch_add(1, Ordering::Relaxed) + 1,
        request: req,
        device_index,
        created: now,
        progress: Mutex::new(Progress {
            phase: Phase::Scheduled,
            started: None,
            finished: None,
            flaps: 0,
            flow_ticks: 0,
        }),
        cancelled: Default::default(),
    });
    let spawned = match delay {
        None => start(sh, &sc),
        Some(delay) => labels::with(Subsystem::SCENARIO, || {
            let (sh2, sc2) = (sh.clone(), sc.clone());
            let due = Instant::now() + delay;
            // Spawned under `scenario`: the waiting thread inherits it.
            sh.spawn_inheriting_label(
                &format!("scenario-sched-{}", sc.id),
                Box::new(move || match wait_for_start(&*sh2, &sc2, due) {
                    Some(true) => {
                        crate::lab::probe!("scenario.scheduled");
                        let _ = start(&sh2, &sc2);
                    }
                    Some(false) => sc2.lock().phase = Phase::Cancelled,
                    // Cancelled through the API: `cancel` recorded it.
                    None => {}
                }),
            )
        }),
    };
    spawned.map_err(SubmitError::Spawn)?;
    items.push(sc.clone());
    let ended = items.iter().filter(|s| !active(s)).count();
    if ended > KEEP_ENDED {
        let mut forget = ended - KEEP_ENDED;
        items.retain(|s| {
            let drop_it = forget > 0 && !active(s);
            forget -= usize::from(drop_it);
            !drop_it
        });
    }
    Ok(sc)
}

/// A scheduled start's wait: `Some(true)` when `due` came, `Some(false)` when the fleet is stopping,
/// `None` when the scenario was cancelled (looked at every [`CANCEL_POLL`]).
fn wait_for_start<H: Host>(sh: &H, sc: &Scenario, due: Instant) -> Option<bool> {
    loop {
        if sc.cancel_requested() {
            return None;
        }
        let now = Instant::now();
        if now >= due {
            return Some(true);
        }
        if !sh.sleep_until(due.min(now + CANCEL_POLL)) {
            return Some(false);
        }
    }
}

/// Why [`cancel`] did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelError {
    /// No scenario has that id (404).
    Unknown(u64),
    /// It has finished or was cancelled already (409).
    Ended(u64, Phase),
}

impl CancelError {
    /// The HTTP status this refusal answers with.
    pub fn status(&self) -> u16 {
        match self {
            CancelError::Unknown(_) => 404,
            CancelError::Ended(..) => 409,
        }
    }
}

impl std::fmt::Display for CancelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CancelError::Unknown(id) => write!(
                f,
                "no scenario {id} (GET /api/v1/scenarios lists them; the oldest ended ones are forgotten)"
            ),
            CancelError::Ended(id, phase) => {
                write!(f, "scenario {id} is {} already: nothing to cancel", phase.name())
            }
        }
    }
}

/// Cancels scenario `id` if it is scheduled or running: marked cancelled now (its place is free at
/// once), its thread ends at its next look (see the module notes).
pub fn cancel(book: &Book, id: u64) -> Result<Arc<Scenario>, CancelError> {
    let items = book.items.lock().unwrap_or_else(|e| e.into_inner());
    let sc = items
        .iter()
        .find(|s| s.id == id)
        .cloned()
        .ok_or(CancelError::Unknown(id))?;
    drop(items);
    let mut p = sc.lock();
    if !matches!(p.phase, Phase::Scheduled | Phase::Running) {
        return Err(CancelError::Ended(id, p.phase));
    }
    sc.cancelled.store(true, Ordering::SeqCst);
    p.phase = Phase::Cancelled;
    p.finished = Some(SystemTime::now());
    drop(p);
    Ok(sc)
}

/// Starts a scenario now (scoped `scenario`): marks it running and spawns its runner.
pub fn start<H: Host>(sh: &Arc<H>, sc: &Arc<Scenario>) -> std::io::Result<()> {
    labels::with(Subsystem::SCENARIO, || {
        crate::lab::probe!("scenario.start");
        {
            let mut p = sc.lock();
            if sc.cancel_requested() {
                return Ok(());
            }
            p.phase = Phase::Running;
            p.started = Some(SystemTime::now());
        }
        let text = format!(
            "scenario {} #{} started for {}",
            sc.request.name,
            sc.id,
            format_duration(sc.request.duration)
        );
        sh.emit_syslog(sc.device_index, syslog::SEVERITY_NOTICE, "SCENARIO", &text);
        let (sh2, sc2) = (sh.clone(), sc.clone());
        sh.spawn_labelled(
            Subsystem::SCENARIO,
            &format!("scenario-{}", sc.id),
            Box::new(move || run(&*sh2, &sc2)),
        )
    })
}

/// The interface a link-flap toggles.
pub fn flap_interface(sc: &Scenario) -> u32 {
    1 + (sc.id % super::device::INTERFACES_PER_DEVICE as u64) as u32
}

/// The runner (the scenario flow ticker): flaps the interface and ticks flow export until the end.
fn run<H: Host>(sh: &H, sc: &Arc<Scenario>) {
    let begin = Instant::now();
    let end = begin + sc.request.duration;
    let flap_every =
        (sc.request.duration / 6).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let flow_every = sh.flow_interval();
    let mut exporter = sh.flow_exporter();
    let if_index = flap_interface(sc);
    let device = sh.devices()[sc.device_index].clone();
    let (mut next_flap, mut next_flow) = (begin, begin + flow_every);
    let mut up = false;
    let ended = loop {
        crate::lab::probe!("scenario.between_ticks");
        let due = next_flap
            .min(end)
            .min(if exporter.is_some() { next_flow } else { end });
        if !sh.sleep_until(due) {
            break End::Stopping;
        }
        if sc.cancel_requested() {
            break End::Cancelled;
        }
        let now = Instant::now();
        if now >= end {
            break End::Completed;
        }
        if now >= next_flap {
            if sh.set_link(sc.device_index, if_index, up) && !up {
                sc.lock().flaps += 1;
            }
            up = !up;
            next_flap += flap_every;
        }
        if let Some(e) = exporter.as_mut() {
            if now >= next_flow {
                e.tick(&device, now);
                crate::lab::probe!("scenario.after_tick");
                sc.lock().flow_ticks += 1;
                next_flow += flow_every;
            }
        }
    };
    finish(sh, sc, if_index, ended);
}

/// How a runner ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Completed,
    /// The fleet is stopping.
    Stopping,
    /// Through the API ([`cancel`], which recorded the phase).
    Cancelled,
}

/// Ends a scenario (scoped `scenario`): brings the interface back up and records the outcome.
fn finish<H: Host>(sh: &H, sc: &Scenario, if_index: u32, ended: End) {
    labels::with(Subsystem::SCENARIO, || {
        crate::lab::probe!("scenario.finish");
        let word = match ended {
            End::Completed => "finished",
            End::Cancelled => "cancelled",
            End::Stopping => {
                // Stopping: leave the device as it is, only record the outcome.
                let _ = sh.devices()[sc.device_index].set_oper(if_index, true, Instant::now());
                let mut p = sc.lock();
                p.phase = Phase::Cancelled;
                p.finished.get_or_insert_with(SystemTime::now);
                return;
            }
        };
        sh.set_link(sc.device_index, if_index, true);
        let text = format!("scenario {} #{} {word}", sc.request.name, sc.id);
        sh.emit_syslog(sc.device_index, syslog::SEVERITY_NOTICE, "SCENARIO", &text);
        let mut p = sc.lock();
        if ended == End::Completed && !sc.cancel_requested() {
            p.phase = Phase::Finished;
            p.finished = Some(SystemTime::now());
        }
    })
}

#[cfg(test)]
#[path = "scenario_tests.rs"]
mod tests;
