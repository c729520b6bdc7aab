//! Hardening: bad input never panics, never yields an undocumented status, and never
//! changes state when refused.
//!
//! - `POST /api/v1/profiling`: 120 000 generated bodies (see `harden_support::post_body`) through
//!   [`nl6::api::Api::handle`] in-process over a gate with a fake pusher, from four base states; then 3 000
//!   over real HTTP to the binary. Documented statuses: 200, 400 (naming the field or the body), 413, and
//!   500 only as "the push could not start" with the state attached.
//! - malformed SNMP datagrams to a device socket: counted as malformed, loop alive, answers still right.
//! - bad scenario bodies: 400 naming the field, scenario list unchanged.
//! - malformed `/debug/pprof/symbol` input and absurd `seconds` on every profile path.
//!
//! Seeds are fixed; a failure prints the seed and the case.
use crate::common;
use crate::harden_support;

use harden_support::{post_body, Rng};
use nl6::api::Api;
use nl6::gate::control::Gate;
use nl6::gate::port::{PushRun, PushStatus, PushTarget, Pusher, StartError};
use nl6::gate::state::Startup;
use nl6::http::{Request, Response};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

const SEED: u64 = 0x6e6c_3668_6172_6465;
const IN_PROCESS_BODIES: usize = 120_000;
const HTTP_BODIES: usize = 3_000;

/// Starts instantly; refuses hosts containing `fail` (the documented 500 path).
struct FakePusher;
struct FakeRun;

impl Pusher for FakePusher {
    fn start(&self, target: PushTarget) -> Result<Box<dyn PushRun>, StartError> {
        if target.address.contains("fail") {
            return Err(StartError::Refused("fake: cannot start".into()));
        }
        Ok(Box::new(FakeRun))
    }
}

impl PushRun for FakeRun {
    fn status(&self) -> PushStatus {
        PushStatus::default()
    }
    fn stop(self: Box<Self>, _budget: Duration) -> bool {
        true
    }
}

fn api() -> Api {
    let startup = Startup::new(
        Some("http://flag.example:4040".into()),
        Some(("fuzzuser".into(), "fuzzpass".into())),
        Some("fuzztenant".into()),
        Duration::from_secs(15),
    );
    let gate = Gate::with_hooks(
        startup,
        Box::new(FakePusher),
        Box::new(|| false),
        Box::new(|_line| {}),
        Duration::from_secs(1),
    );
    // As the binary composes it: the console mounted.
    let flame = std::sync::Arc::new(nl6::console::CpuSlot::new());
    nl6::console::mount(Api::new(gate), &flame)
}

const BASE_STATES: &[&str] = &[
    r#"{"enabled":false}"#,
    r#"{"enabled":true,"server_address":""}"#,
    r#"{"enabled":true}"#,
    r#"{"enabled":true,"server_address":"http://other.example:4040"}"#,
];

fn post(body: &[u8]) -> Request {
    Request::new("POST", "/api/v1/profiling").with_body(body.to_vec())
}

/// Checks one POST answer against the documented contract; `before`/`after` are GET bodies.
fn check_post(body: &[u8], resp: &Response, before: &[u8], after: &[u8], limit: usize) {
    let what = || {
        format!(
            "body {:?}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    };
    assert_eq!(
        resp.get_header("content-type"),
        Some("application/json"),
        "{}",
        what()
    );
    let v: Value = serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("{}: answer is not JSON ({e})", what()));
    let error = v["error"].as_str().unwrap_or("");
    match resp.status {
        200 => assert!(v["data"]["enabled"].is_boolean(), "{}: {v}", what()),
        400 | 413 => {
            assert!(!error.is_empty(), "{}: {v}", what());
            assert_eq!(
                String::from_utf8_lossy(before),
                String::from_utf8_lossy(after),
                "{}: state changed by a refusal ({error})",
                what()
            );
        }
        500 => {
            // The documented one: the gate opened but the push could not start; the state rides along.
            assert!(!error.is_empty(), "{}: {v}", what());
            if String::from_utf8_lossy(body).contains("duration") {
                // A tiny duration ("1µs") may revert before the answer is built: the state attached is then
                // the reverted one (newer, so still consistent). Only the error is checked.
                return;
            }
            assert_eq!(v["data"]["enabled"], true, "{}: {v}", what());
            assert_eq!(v["data"]["pushing"], false, "{}: {v}", what());
            assert!(v["data"]["last_error"].is_string(), "{}: {v}", what());
            let now: Value = serde_json::from_slice(after).unwrap();
            assert_eq!(now["data"], v["data"], "{}", what());
        }
        s => panic!("{}: undocumented status {s}: {v}", what()),
    }
    assert_eq!(
        resp.status == 413,
        body.len() > limit,
        "{}: {} bytes answered {}",
        what(),
        body.len(),
        resp.status
    );
    if resp.status == 400 {
        // The error names what was wrong: the body, or a field.
        // A key repeated in any object is refused first, naming the key (serde_json keeps the last).
        let named = error.contains("duplicate key")
            || match serde_json::from_slice::<Value>(body) {
                Err(_) => error.contains("JSON"),
                Ok(Value::Object(_)) => ["enabled", "server_address", "duration", "unknown field"]
                    .iter()
                    .any(|f| error.contains(f)),
                Ok(_) => error.contains("JSON object"),
            };
        assert!(named, "{}: 400 does not name the field: {error}", what());
    }
}

#[test]
fn post_bodies_in_process() {
    let api = api();
    let mut r = Rng::new(SEED);
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    let started = std::time::Instant::now();
    for i in 0..IN_PROCESS_BODIES {
        let base = BASE_STATES[i % BASE_STATES.len()];
        // In process there is no server to park a POST queued behind the revert timer: wait here.
        let reset = api.handle(&post(base.as_bytes())).settle();
        assert_eq!(reset.status, 200, "base state {base}: {}", reset.text());
        let body = post_body(&mut r, 2);
        let before = api.handle(&Request::new("GET", "/api/v1/profiling")).body;
        let resp = catch_unwind(AssertUnwindSafe(|| api.handle(&post(&body)).settle()))
            .unwrap_or_else(|_| {
                panic!(
                    "case {i} (seed {SEED:#x}) panicked on {:?}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                )
            });
        let after = api.handle(&Request::new("GET", "/api/v1/profiling")).body;
        check_post(&body, &resp, &before, &after, nl6::api::rest::MAX_BODY);
        *counts.entry(resp.status).or_default() += 1;
    }
    eprintln!(
        "FIGURE fuzz in-process: {IN_PROCESS_BODIES} bodies in {:?}, statuses {counts:?}",
        started.elapsed()
    );
    // The generator reaches every documented outcome (else it is not testing them).
    for s in [200, 400, 413, 500] {
        assert!(
            counts.get(&s).copied().unwrap_or(0) > 0,
            "no {s} among {counts:?}"
        );
    }
}

#[test]
fn post_bodies_over_http() {
    let n = common::boot().start();
    // Push targets must stay on loopback: a body naming any other address is not sent.
    let refused = common::unused_loopback_url();
    let allowed = ["", refused.as_str()];
    let mut r = Rng::new(SEED ^ 0x4854_5450);
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    let mut sent = 0;
    let started = std::time::Instant::now();
    while sent < HTTP_BODIES {
        let mut body = post_body(&mut r, 5);
        if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(&body) {
            match m.get("server_address") {
                Some(Value::String(s)) if !allowed.contains(&s.as_str()) => {
                    // Re-point valid-looking addresses at the refused loopback port.
                    let mut m = m.clone();
                    m.insert("server_address".into(), Value::String(refused.clone()));
                    body = serde_json::to_vec(&m).unwrap();
                }
                _ => {}
            }
        }
        sent += 1;
        let (_, _, before) = n.http("GET", "/api/v1/profiling", b"");
        let (status, headers, answer) = n.http("POST", "/api/v1/profiling", &body);
        let (_, _, after) = n.http("GET", "/api/v1/profiling", b"");
        *counts.entry(status).or_default() += 1;
        if status == 413 && body.len() > 1024 * 1024 {
            continue; // the server's own framing limit answers before the REST handler (text/plain)
        }
        let mut resp = Response::new(status, "", answer);
        resp.headers = headers;
        check_post(&body, &resp, &before, &after, nl6::api::rest::MAX_BODY);
        if status == 200
            && serde_json::from_slice::<Value>(&after).unwrap()["data"]["revert_pending"] == true
        {
            // Cancel the revert (a later POST does) so it cannot fire during the next refusal's check.
            let (s, _, _) = n.http(
                "POST",
                "/api/v1/profiling",
                BASE_STATES[sent % 2].as_bytes(),
            );
            assert_eq!(s, 200);
        }
    }
    // Still serving, no panic logged.
    assert_eq!(n.http("GET", "/api/v1/profiling", b"").0, 200);
    assert!(!n.stderr().contains("panicked"), "{}", n.stderr());
    eprintln!(
        "FIGURE fuzz over HTTP: {HTTP_BODIES} bodies in {:?}, statuses {counts:?}",
        started.elapsed()
    );
}
