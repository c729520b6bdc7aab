//! `GET`/`POST /api/v1/profiling`: the gate's REST, and the JSON shape every REST answer shares
//! (`{"data": …}` on success, `{"error": "…"}` on failure, plus `"data"` with the state when a push could
//! not start).
//!
//! A POST that finds another transition in progress (a closing push flushing to a slow collector can take
//! up to 20 s) waits at most 1 s, then answers 409 `{"error":"a profiling transition is in progress;
//! retry","data":<state>}` with nothing changed; GET never waits. The wait holds no server worker: the
//! POST's answer is a [`Deferred`] one that the server parks until the turn comes or the second is up.
//!
//! Parses the POST body strictly (unknown fields, wrong types and a missing `enabled` are 400s naming the
//! field) and hands a [`PostRequest`] value to the gate. Never echoes credentials: the view has none.
#![forbid(unsafe_code)]

use crate::gate::control::{Gate, GateView, PendingPost, PostError, BUSY_MESSAGE};
use crate::gate::state::{AddressField, PostRequest};
use crate::http::{Deferred, Request, Response, Waker};
use crate::timefmt::parse_positive_go_duration as parse_go_duration;
use crate::timefmt::rfc3339_millis as rfc3339;
use serde::Serialize;
use serde_json::Value;

/// Largest POST body accepted (413 above it).
pub const MAX_BODY: usize = 64 * 1024;

/// The fields a POST may carry.
const FIELDS: &[&str] = &["enabled", "server_address", "duration"];

/// The state as JSON (`data` of GET and POST).
#[derive(Debug, Serialize)]
struct ProfilingState {
    enabled: bool,
    startup_flag: String,
    server_address: String,
    pushing: bool,
    pprof_path: &'static str,
    revert_pending: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    revert_at: Option<String>,
    sdk_errors: u64,
    last_error: Option<String>,
    uploads: u64,
    last_upload_at: Option<String>,
    /// Which push `uploads`/`last_upload_at`/`sdk_errors` belong to once it has stopped (null while a
    /// push runs, or before any).
    last_push: Option<LastPushJson>,
    /// Threads the running (or last) CPU profile could not arm a timer on, and their names.
    cpu_threads_unarmed: usize,
    cpu_threads_unarmed_names: Vec<String>,
    /// What the samplers could not do, as the profiles' comments say it (empty when nothing).
    sampler_warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
struct LastPushJson {
    address: String,
    stopped_at: String,
}

fn state_json(v: &GateView) -> ProfilingState {
    let unarmed = nl6_profile::cpu::coverage().unarmed;
    ProfilingState {
        enabled: v.enabled,
        startup_flag: v.startup_flag.clone().unwrap_or_default(),
        server_address: v.server_address.clone().unwrap_or_default(),
        pushing: v.pushing,
        pprof_path: "/debug/pprof/",
        revert_pending: v.revert_at.is_some(),
        revert_at: v.revert_at.map(rfc3339),
        sdk_errors: v.sdk_errors,
        last_error: v.last_error.clone(),
        uploads: v.uploads,
        last_upload_at: v.last_upload_at.map(rfc3339),
        last_push: v.last_push.as_ref().map(|p| LastPushJson {
            address: p.address.clone(),
            stopped_at: rfc3339(p.stopped_at),
        }),
        cpu_threads_unarmed: unarmed.len(),
        cpu_threads_unarmed_names: unarmed.into_values().map(|t| t.name).collect(),
        sampler_warnings: nl6_profile::sampler_gaps(),
    }
}

/// A JSON response with `Content-Type: application/json`.
pub fn json(status: u16, value: &impl Serialize) -> Response {
    let mut body =
        serde_json::to_vec(value).unwrap_or_else(|_| b"{\"error\":\"encoding failed\"}".to_vec());
    body.push(b'\n');
    Response::new(status, "application/json", body)
}

/// `{"error": msg}`.
pub fn error(status: u16, msg: &str) -> Response {
    json(status, &serde_json::json!({ "error": msg }))
}

/// 404 for a path no surface knows.
pub fn not_found(path: &str) -> Response {
    error(404, &format!("no route for {path}"))
}

/// 405 on `/api/v1/profiling`.
pub fn method_not_allowed() -> Response {
    error(405, "method not allowed: use GET or POST").header("Allow", "GET, HEAD, POST")
}

/// `GET /api/v1/profiling`: the published state, never waiting behind a transition.
pub fn get(gate: &Gate) -> Response {
    json(
        200,
        &serde_json::json!({ "data": state_json(&gate.view()) }),
    )
}

/// `POST /api/v1/profiling`.
pub fn post(gate: &Gate, req: &Request) -> Response {
    if req.body.len() > MAX_BODY {
        return error(
            413,
            &format!(
                "request body is {} bytes; the limit is {MAX_BODY} (64 KiB)",
                req.body.len()
            ),
        );
    }
    let parsed = match parse_post(&req.body) {
        Ok(p) => p,
        Err(e) => return error(400, &e.to_string()),
    };
    match gate.post_or_queue(parsed) {
        Ok(outcome) => post_answer(outcome),
        Err(pending) => Response::deferred(Box::new(QueuedPost(pending))),
    }
}

/// The answer to a POST once the gate has taken it (or refused it).
fn post_answer(outcome: Result<GateView, PostError>) -> Response {
    match outcome {
        Ok(view) => json(200, &serde_json::json!({ "data": state_json(&view) })),
        Err(PostError::Invalid(msg)) => error(400, &msg),
        Err(
            PostError::PushFailed { message, view }
            | PostError::RevertUnavailable { message, view },
        ) => json(
            500,
            &serde_json::json!({ "error": message, "data": state_json(&view) }),
        ),
        Err(PostError::Busy { view }) => json(
            409,
            &serde_json::json!({ "error": BUSY_MESSAGE, "data": state_json(&view) }),
        ),
    }
}

/// A POST behind another transition, parked by the server until its turn comes or its second is up.
struct QueuedPost(PendingPost);

impl Deferred for QueuedPost {
    fn deadline(&self) -> std::time::Instant {
        self.0.deadline()
    }
    fn ready(&self) -> bool {
        self.0.turn_is_free()
    }
    fn set_waker(&mut self, wake: Waker) {
        self.0.wake_when_first(wake);
    }
    fn finish(self: Box<Self>) -> Response {
        post_answer(self.0.finish())
    }
}

/// Why a POST body was refused (a 400 naming the field).
#[derive(Debug)]
pub enum PostBodyError {
    Body(crate::jsonbody::BodyError),
    NotAnObject,
    UnknownField(String),
    MissingEnabled,
    /// A field of the wrong JSON type: the field and the type found.
    Type(&'static str, &'static str),
    Duration(crate::timefmt::DurationError),
}

impl std::fmt::Display for PostBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostBodyError::Body(crate::jsonbody::BodyError::Invalid(e)) => {
                write!(f, "body is not valid JSON: {e}")
            }
            PostBodyError::Body(e) => write!(f, "{e}"),
            PostBodyError::NotAnObject => {
                f.write_str("body must be a JSON object such as {\"enabled\":true}")
            }
            PostBodyError::UnknownField(k) => write!(
                f,
                "unknown field {k:?} (accepted: enabled, server_address, duration)"
            ),
            PostBodyError::MissingEnabled => f.write_str("enabled is required (true or false)"),
            PostBodyError::Type("enabled", found) => {
                write!(f, "enabled must be a boolean, not {found}")
            }
            PostBodyError::Type("duration", found) => write!(
                f,
                "duration must be a string in Go syntax such as \"30m\", not {found}"
            ),
            PostBodyError::Type(field, found) => write!(f, "{field} must be a string, not {found}"),
            PostBodyError::Duration(e) => write!(f, "duration: {e}"),
        }
    }
}

impl std::error::Error for PostBodyError {}

/// Parses a POST body into a request value. Every refusal names the field.
pub fn parse_post(body: &[u8]) -> Result<PostRequest, PostBodyError> {
    let value = crate::jsonbody::parse(body).map_err(PostBodyError::Body)?;
    let Value::Object(map) = value else {
        return Err(PostBodyError::NotAnObject);
    };
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(PostBodyError::UnknownField(unknown.clone()));
    }
    let enabled = match map.get("enabled") {
        None => return Err(PostBodyError::MissingEnabled),
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(PostBodyError::Type("enabled", type_name(other))),
    };
    let server_address = match map.get("server_address") {
        None => AddressField::Omitted,
        Some(Value::String(s)) if s.is_empty() => AddressField::Empty,
        Some(Value::String(s)) => AddressField::Value(s.clone()),
        Some(other) => return Err(PostBodyError::Type("server_address", type_name(other))),
    };
    let duration = match map.get("duration") {
        None => None,
        Some(Value::String(s)) => Some(parse_go_duration(s).map_err(PostBodyError::Duration)?),
        Some(other) => return Err(PostBodyError::Type("duration", type_name(other))),
    };
    Ok(PostRequest {
        enabled,
        server_address,
        duration,
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_the_three_address_shapes_and_duration() {
        let p = parse_post(br#"{"enabled":true}"#).unwrap();
        assert_eq!(
            p,
            PostRequest {
                enabled: true,
                server_address: AddressField::Omitted,
                duration: None
            }
        );
        let p = parse_post(br#"{"enabled":true,"server_address":""}"#).unwrap();
        assert_eq!(p.server_address, AddressField::Empty);
        let p = parse_post(br#"{"enabled":true,"server_address":"http://h:1","duration":"30m"}"#)
            .unwrap();
        assert_eq!(
            p.server_address,
            AddressField::Value("http://h:1".to_string())
        );
        assert_eq!(p.duration, Some(Duration::from_secs(1800)));
    }

    #[test]
    fn refusals_name_the_field() {
        let rows: &[(&str, &str)] = &[
            ("", "not valid JSON"),
            ("not json", "not valid JSON"),
            ("[true]", "JSON object"),
            ("{}", "enabled is required"),
            (r#"{"server_address":""}"#, "enabled is required"),
            (
                r#"{"enabled":"yes"}"#,
                "enabled must be a boolean, not a string",
            ),
            (
                r#"{"enabled":1}"#,
                "enabled must be a boolean, not a number",
            ),
            (r#"{"enabled":null}"#, "enabled must be a boolean, not null"),
            (
                r#"{"enabled":true,"server_address":5}"#,
                "server_address must be a string",
            ),
            (
                r#"{"enabled":true,"server_address":null}"#,
                "server_address must be a string, not null",
            ),
            (
                r#"{"enabled":true,"duration":30}"#,
                "duration must be a string",
            ),
            (
                r#"{"enabled":true,"duration":"30"}"#,
                "duration: invalid duration \"30\"",
            ),
            (r#"{"enabled":true,"duration":"0s"}"#, "greater than zero"),
            (r#"{"enabled":true,"duration":"2562048h"}"#, "maximum"),
            (
                r#"{"enabled":true,"basic_auth":"u:p"}"#,
                "unknown field \"basic_auth\"",
            ),
            (
                r#"{"enabled":true,"Enabled":true}"#,
                "unknown field \"Enabled\"",
            ),
        ];
        for (body, want) in rows {
            let e = parse_post(body.as_bytes()).expect_err(body).to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    /// `{"enabled":true,"enabled":false}` is ambiguous: refused, never the last value winning.
    #[test]
    fn duplicate_keys_are_refused_naming_the_key() {
        for (body, key) in [
            (r#"{"enabled":true,"enabled":false}"#, "enabled"),
            (
                r#"{"enabled":true,"server_address":"http://a:1","server_address":""}"#,
                "server_address",
            ),
        ] {
            let err = parse_post(body.as_bytes()).unwrap_err().to_string();
            assert!(
                err.contains(&format!("duplicate key {key:?}")),
                "{body}: {err}"
            );
        }
    }
}
