//! Shared helpers of the gNMI tests: boot nl6 with gNMI on, read each device's gNMI address from
//! `/api/v1/devices`, and run the real gNMI client (pygnmi, `client.py` beside this file) bounded in
//! time, returning its JSON answer; `stream` is a Rust client for checks at a scale pygnmi cannot reach;
//! `collector` runs the good dial-out collector, `hostile_collector` the bad ones.
#![allow(dead_code)]

pub mod collector;
pub mod hostile_collector;
pub mod stream;

use crate::common::{self, Nl6};
use serde_json::Value;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The longest one client run may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(60);

/// Boots nl6 with `devices` devices, gNMI on ephemeral ports and `extra` flags.
pub fn boot(devices: usize, extra: &[&str]) -> Nl6 {
    let n = devices.to_string();
    common::boot()
        .args(&["-devices", &n, "-snmp-port", "0", "-gnmi-port", "0"])
        .args(extra)
        .start()
}

/// Device `i`'s record in `/api/v1/devices`.
pub fn device(nl6: &Nl6, i: usize) -> Value {
    let (s, _, body) = nl6.http("GET", &format!("/api/v1/devices?offset={i}&limit=1"), b"");
    assert_eq!(s, 200);
    common::json(&body)["data"][0].clone()
}

/// Device `i`'s gNMI address.
pub fn gnmi_addr(nl6: &Nl6, i: usize) -> SocketAddr {
    let d = device(nl6, i);
    let g = &d["gnmi"];
    format!("{}:{}", g["address"].as_str().unwrap(), g["port"])
        .parse()
        .unwrap_or_else(|e| panic!("gnmi address of {d}: {e}"))
}

/// Device `i`'s SNMP address.
pub fn snmp_addr(nl6: &Nl6, i: usize) -> String {
    let d = device(nl6, i);
    format!(
        "{}:{}",
        d["snmp"]["address"].as_str().unwrap(),
        d["snmp"]["port"]
    )
}

/// Runs the client's `action` against `at` with `args`; its JSON answer.
pub fn client(at: SocketAddr, action: &str, args: Value) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gnmi_support/client.py");
    let out = Command::new("timeout")
        .arg(CLIENT_LIMIT.as_secs().to_string())
        .args([
            "python3",
            script,
            &at.ip().to_string(),
            &at.port().to_string(),
            action,
        ])
        .arg(args.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run python3 (scripts/setup.sh installs pygnmi)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {action} failed ({}): {}{}",
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    // pygnmi logs its errors on stdout too: the answer is the last line.
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("client {action}: {e}: {text}"))
}

/// The gRPC status code name of a refused call (panics when the call succeeded).
pub fn refusal(v: &Value) -> (String, String) {
    let e = &v["error"];
    assert!(e.is_object(), "want a refusal, got {v}");
    (
        e["code"].as_str().unwrap().into(),
        e["details"].as_str().unwrap_or("").into(),
    )
}

/// Every `(path, value)` of a Get answer.
pub fn updates(get: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for n in get["notification"]
        .as_array()
        .unwrap_or_else(|| panic!("not a Get answer: {get}"))
    {
        for u in n["update"].as_array().unwrap() {
            out.push((u["path"].as_str().unwrap().to_string(), u["val"].clone()));
        }
    }
    out
}

/// A counter value as JSON_IETF (a string) or PROTO (a number) gives it.
pub fn number(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not a number: {v}")),
        v => v.as_u64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}
