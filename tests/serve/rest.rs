//! The real binary: `/api/v1/profiling` (the seed's examples, every refusal with the state unchanged, a
//! short revert), startup refusals, `--version`, `-h`, SIGTERM.
use crate::common;

use common::{boot, header, json, unused_loopback_url, Nl6};
use serde_json::{json as j, Value};
use std::time::{Duration, Instant};

fn state(n: &Nl6) -> Value {
    let (status, headers, body) = n.http("GET", "/api/v1/profiling", b"");
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    json(&body)["data"].clone()
}

fn post(n: &Nl6, body: &str) -> (u16, Value) {
    let (status, headers, b) = n.http("POST", "/api/v1/profiling", body.as_bytes());
    assert_eq!(
        header(&headers, "content-type"),
        Some("application/json"),
        "{body}"
    );
    (status, json(&b))
}

/// The seed's fields, as the seed's example shows them.
fn seed_fields(v: &Value) -> Value {
    let keys = [
        "enabled",
        "startup_flag",
        "server_address",
        "pushing",
        "pprof_path",
        "revert_pending",
    ];
    Value::Object(
        keys.iter()
            .map(|k| (k.to_string(), v[*k].clone()))
            .collect(),
    )
}

#[test]
fn closed_by_default_with_every_field() {
    let n = boot().start();
    let v = state(&n);
    assert_eq!(
        v,
        j!({"enabled":false,"startup_flag":"","server_address":"","pushing":false,"pprof_path":"/debug/pprof/",
            "revert_pending":false,"sdk_errors":0,"last_error":null,"uploads":0,"last_upload_at":null,
            "last_push":null,"cpu_threads_unarmed":0,"cpu_threads_unarmed_names":[],"sampler_warnings":[]})
    );
    assert!(n
        .stderr()
        .contains("profiling gate closed (open: POST /api/v1/profiling or -profiling-pyroscope)"));
}

#[test]
fn the_seeds_four_curl_examples() {
    let url = unused_loopback_url();
    // Boot with the push on: the state shows the value in force and the startup flag.
    let n = boot().args(&["-profiling-pyroscope", &url]).start();
    assert_eq!(
        seed_fields(&state(&n)),
        j!({"enabled":true,"startup_flag":url,"server_address":url,"pushing":true,"pprof_path":"/debug/pprof/","revert_pending":false})
    );
    // Runtime on, pushing to an address learned at runtime (here: the same address, a no-op).
    let (s, v) = post(
        &n,
        &format!(r#"{{"enabled":true,"server_address":"{url}"}}"#),
    );
    assert_eq!(s, 200);
    assert_eq!(v["data"]["server_address"], j!(url));
    assert_eq!(v["data"]["pushing"], j!(true));
    // Runtime on, pull-only.
    let (s, v) = post(&n, r#"{"enabled":true,"server_address":""}"#);
    assert_eq!(s, 200);
    assert_eq!(
        seed_fields(&v["data"]),
        j!({"enabled":true,"startup_flag":url,"server_address":"","pushing":false,"pprof_path":"/debug/pprof/","revert_pending":false})
    );
    // On for 30 minutes, then back.
    let (s, v) = post(
        &n,
        &format!(r#"{{"enabled":true,"server_address":"{url}","duration":"30m"}}"#),
    );
    assert_eq!(s, 200);
    assert_eq!(v["data"]["revert_pending"], j!(true));
    assert_eq!(v["data"]["pushing"], j!(true));
    let at = v["data"]["revert_at"]
        .as_str()
        .expect("revert_at while pending");
    assert!(
        at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "RFC 3339: {at}"
    );
    // Off.
    let (s, v) = post(&n, r#"{"enabled":false}"#);
    assert_eq!(s, 200);
    assert_eq!(
        seed_fields(&v["data"]),
        j!({"enabled":false,"startup_flag":url,"server_address":"","pushing":false,"pprof_path":"/debug/pprof/","revert_pending":false})
    );
    assert!(
        v["data"].get("revert_at").is_none(),
        "revert_at only while pending"
    );
    // One log line per transition: startup + 4 POSTs (the push's own lines say "push to … failing").
    assert!(n.wait_for_log(
        "POST (pending revert cancelled): gate closed",
        Duration::from_secs(5)
    ));
    let transitions = n
        .log_lines("[profiling] ")
        .into_iter()
        .filter(|l| l.contains(": gate "))
        .count();
    assert_eq!(transitions, 5, "{}", n.stderr());
}

#[test]
fn omitted_address_uses_the_flag_then_keeps_a_runtime_push() {
    let flag = unused_loopback_url();
    let other = unused_loopback_url();
    let n = boot().args(&["-profiling-pyroscope", &flag]).start();
    post(&n, r#"{"enabled":false}"#);
    let (_, v) = post(&n, r#"{"enabled":true}"#);
    assert_eq!(v["data"]["server_address"], j!(flag));
    post(
        &n,
        &format!(r#"{{"enabled":true,"server_address":"{other}"}}"#),
    );
    let (_, v) = post(&n, r#"{"enabled":true,"duration":"30m"}"#);
    assert_eq!(
        v["data"]["server_address"],
        j!(other),
        "omitted keeps the running push"
    );
    assert_eq!(v["data"]["pushing"], j!(true));
}

#[test]
fn every_refusal_answers_its_status_and_leaves_the_state_unchanged() {
    let url = unused_loopback_url();
    let n = boot().args(&["-profiling-pyroscope", &url]).start();
    post(
        &n,
        r#"{"enabled":true,"server_address":"","duration":"1h"}"#,
    );
    // The stderr reader runs behind the process: wait for this POST's line before counting.
    assert!(n.wait_for_log("gate open, pull-only", Duration::from_secs(5)));
    let before = state(&n);
    let transitions = || {
        n.log_lines("[profiling] ")
            .into_iter()
            .filter(|l| l.contains(": gate "))
            .count()
    };
    let logs_before = transitions();
    let big = format!(r#"{{"enabled":true,"pad":"{}"}}"#, "x".repeat(70 * 1024));
    let rows: Vec<(&str, u16, &str)> = vec![
        ("", 400, "not valid JSON"),
        ("{", 400, "not valid JSON"),
        ("[1]", 400, "JSON object"),
        ("{}", 400, "enabled is required"),
        (r#"{"server_address":""}"#, 400, "enabled is required"),
        (r#"{"enabled":"true"}"#, 400, "enabled must be a boolean"),
        (
            r#"{"enabled":true,"server_address":1}"#,
            400,
            "server_address must be a string",
        ),
        (
            r#"{"enabled":true,"duration":5}"#,
            400,
            "duration must be a string",
        ),
        (
            r#"{"enabled":true,"extra":1}"#,
            400,
            "unknown field \"extra\"",
        ),
        (
            r#"{"enabled":true,"basic_auth":"u:p"}"#,
            400,
            "unknown field \"basic_auth\"",
        ),
        (
            r#"{"enabled":false,"server_address":"http://x:1"}"#,
            400,
            "server_address is not accepted with enabled:false",
        ),
        (
            r#"{"enabled":false,"server_address":""}"#,
            400,
            "server_address is not accepted with enabled:false",
        ),
        (
            r#"{"enabled":true,"server_address":"ftp://x"}"#,
            400,
            "must use http:// or https://",
        ),
        (
            r#"{"enabled":true,"server_address":"x:4040"}"#,
            400,
            "not an http:// or https:// URL",
        ),
        (
            r#"{"enabled":true,"server_address":"http://u:pw@x"}"#,
            400,
            "must not embed credentials",
        ),
        (
            r#"{"enabled":true,"server_address":"http://x/?q=1"}"#,
            400,
            "query or a fragment",
        ),
        (
            r#"{"enabled":true,"duration":"30"}"#,
            400,
            "duration: invalid duration \"30\"",
        ),
        (
            r#"{"enabled":true,"duration":"-5m"}"#,
            400,
            "greater than zero",
        ),
        (
            r#"{"enabled":true,"duration":"2562047h47m16.854775808s"}"#,
            400,
            "maximum 2562047h47m16.854775807s",
        ),
        (&big, 413, "the limit is 65536"),
    ];
    for (body, status, want) in &rows {
        let (s, v) = post(&n, body);
        assert_eq!(s, *status, "{}: {v}", &body[..body.len().min(60)]);
        let msg = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error field: {v}"));
        assert!(msg.contains(want), "{}: {msg}", &body[..body.len().min(60)]);
        assert!(
            v.get("data").is_none(),
            "no state attached to a refusal: {v}"
        );
        assert_eq!(state(&n), before, "state changed by {body}");
    }
    // Chunked bodies are refused by the server before the handler.
    let (s, _, b) = n.http_with(
        "POST",
        "/api/v1/profiling",
        &[("Transfer-Encoding", "chunked")],
        b"5\r\nhello\r\n0\r\n\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(s, 411, "{}", String::from_utf8_lossy(&b));
    assert_eq!(state(&n), before);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        transitions(),
        logs_before,
        "refusals log no transition: {}",
        n.stderr()
    );
}

#[test]
fn unknown_paths_and_methods() {
    let n = boot().start();
    let (s, h, b) = n.http("GET", "/nope", b"");
    assert_eq!(s, 404);
    assert_eq!(header(&h, "content-type"), Some("application/json"));
    assert!(json(&b)["error"].as_str().unwrap().contains("/nope"));
    let (s, h, b) = n.http("PUT", "/api/v1/profiling", b"{}");
    assert_eq!(s, 405);
    assert_eq!(header(&h, "allow"), Some("GET, HEAD, POST"));
    assert!(json(&b)["error"].is_string());
}

#[test]
fn credentials_are_bound_withheld_and_never_echoed() {
    let dir = std::env::temp_dir().join(format!("nl6-serve-rest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("auth");
    std::fs::write(&file, "user:fileSecret42\n").unwrap();
    let flag = unused_loopback_url();
    let other = unused_loopback_url();
    let n = boot()
        .args(&[
            "-profiling-pyroscope",
            &flag,
            "-profiling-pyroscope-basic-auth-file",
            file.to_str().unwrap(),
        ])
        .args(&["-profiling-pyroscope-tenant", "tenantX9"])
        .start();
    let (_, v) = post(
        &n,
        &format!(r#"{{"enabled":true,"server_address":"{other}"}}"#),
    );
    assert_eq!(v["data"]["server_address"], j!(other));
    assert!(n.wait_for_log(
        "credentials withheld: address differs from -profiling-pyroscope",
        Duration::from_secs(5)
    ));
    let (_, v) = post(
        &n,
        &format!(
            r#"{{"enabled":true,"server_address":"{}/"}}"#,
            flag.to_uppercase().replace("HTTP", "http")
        ),
    );
    assert_eq!(v["data"]["pushing"], j!(true));
    let (_, _, body) = n.http("GET", "/api/v1/profiling", b"");
    let text = String::from_utf8_lossy(&body);
    let all = format!("{text}\n{}", n.stderr());
    assert!(
        !all.contains("fileSecret42") && !all.contains("tenantX9"),
        "{all}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_short_duration_reverts_and_a_later_post_cancels() {
    let n = boot().start();
    let (s, v) = post(
        &n,
        r#"{"enabled":true,"server_address":"","duration":"300ms"}"#,
    );
    assert_eq!((s, &v["data"]["enabled"]), (200, &j!(true)));
    let started = Instant::now();
    while state(&n)["enabled"] == j!(true) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no revert within 5 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "reverted too early: {:?}",
        started.elapsed()
    );
    let v = state(&n);
    assert_eq!(
        (&v["revert_pending"], v.get("revert_at")),
        (&j!(false), None)
    );
    assert!(n.wait_for_log(
        "[profiling] duration elapsed, reverted: gate closed",
        Duration::from_secs(2)
    ));
    // A later POST cancels a pending revert.
    post(
        &n,
        r#"{"enabled":true,"server_address":"","duration":"300ms"}"#,
    );
    let (_, v) = post(&n, r#"{"enabled":true,"server_address":""}"#);
    assert_eq!(v["data"]["revert_pending"], j!(false));
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(state(&n)["enabled"], j!(true));
}

#[test]
fn adhoc_env_refuses_a_runtime_push_with_the_state_attached() {
    let n = boot()
        .env("PYROSCOPE_ADHOC_SERVER_ADDRESS", "http://127.0.0.1:9")
        .start();
    let url = unused_loopback_url();
    let (s, v) = post(
        &n,
        &format!(r#"{{"enabled":true,"server_address":"{url}"}}"#),
    );
    assert_eq!(s, 500, "{v}");
    assert!(v["error"]
        .as_str()
        .unwrap()
        .contains("PYROSCOPE_ADHOC_SERVER_ADDRESS"));
    assert_eq!(
        (&v["data"]["enabled"], &v["data"]["pushing"]),
        (&j!(true), &j!(false))
    );
    assert!(v["data"]["last_error"]
        .as_str()
        .unwrap()
        .contains("PYROSCOPE_ADHOC_SERVER_ADDRESS"));
    assert!(n.wait_for_log("PYROSCOPE_ADHOC_SERVER_ADDRESS", Duration::from_secs(5)));
    let lines: Vec<String> = n
        .log_lines("[profiling] ")
        .into_iter()
        .filter(|l| l.contains("PYROSCOPE_ADHOC_SERVER_ADDRESS"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    // The pull surface still serves.
    let (s, _, _) = n.http("GET", "/debug/pprof/mutex?debug=1", b"");
    assert_eq!(s, 200);
}

#[test]
fn startup_refusals_exit_2_with_one_line() {
    let url = unused_loopback_url();
    let dir = std::env::temp_dir().join(format!("nl6-serve-refusal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad");
    std::fs::write(&bad, "nocolon\n").unwrap();
    let cases: Vec<(common::Boot, &str)> = vec![
        (
            boot().args(&["-profiling-pyroscope-basic-auth", "u:p"]),
            "requires -profiling-pyroscope",
        ),
        (
            boot().args(&["-profiling-pyroscope-tenant", "t"]),
            "requires -profiling-pyroscope",
        ),
        (
            boot().args(&[
                "-profiling-pyroscope",
                &url,
                "-profiling-pyroscope-basic-auth",
                "user",
            ]),
            "USER:PASS with both parts",
        ),
        (
            boot()
                .args(&[
                    "-profiling-pyroscope",
                    &url,
                    "-profiling-pyroscope-basic-auth",
                    "u:p",
                ])
                .args(&[
                    "-profiling-pyroscope-basic-auth-file",
                    bad.to_str().unwrap(),
                ]),
            "exclusive",
        ),
        (
            boot().args(&[
                "-profiling-pyroscope",
                &url,
                "-profiling-pyroscope-basic-auth-file",
                bad.to_str().unwrap(),
            ]),
            "USER:PASS",
        ),
        (
            boot().args(&[
                "-profiling-pyroscope",
                &url,
                "-profiling-pyroscope-basic-auth-file",
                "/nonexistent/nl6",
            ]),
            "/nonexistent/nl6",
        ),
        (
            boot().args(&["-profiling-pyroscope", "udp://x:1"]),
            "must use http:// or https://",
        ),
        (
            boot().args(&["-profiling-pyroscope", "http://user:topsecret@x:1"]),
            "must not embed credentials",
        ),
        (
            boot().args(&["-profiling-pyroscope", "http://x:1/?a=1"]),
            "query or a fragment",
        ),
        (
            boot().args(&["-profiling-pyroscope", "http://x:1/#f"]),
            "query or a fragment",
        ),
        (
            boot()
                .args(&["-profiling-pyroscope", &url])
                .env("PYROSCOPE_ADHOC_SERVER_ADDRESS", "http://127.0.0.1:9"),
            "PYROSCOPE_ADHOC_SERVER_ADDRESS",
        ),
        (
            boot().args(&["-profiling-upload-interval", "10ms"]),
            "at least 1s",
        ),
        (boot().args(&["-nonsense"]), "nonsense"),
    ];
    for (cmd, want) in cases {
        let out = cmd.run();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("nl6: ") && err.contains(want),
            "{want}: {err}"
        );
        assert!(!err.contains("topsecret"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_help_and_sigterm() {
    let out = boot().arg("--version").run();
    assert_eq!(out.status.code(), Some(0));
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.starts_with("nl6 0.") && v.contains("(commit "), "{v}");
    let out = boot().arg("-h").run();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "-port PORT",
        "-listen ADDR",
        "-profiling-pyroscope URL",
        "-profiling-pyroscope-basic-auth-file PATH",
        "(default 15s)",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    let mut n = boot()
        .args(&["-profiling-pyroscope", &unused_loopback_url()])
        .start();
    let status = n.terminate(Duration::from_secs(25));
    assert_eq!(status.code(), Some(0));
    assert!(
        n.wait_for_log(
            "[profiling] shutdown: gate closed; stopped push to",
            Duration::from_secs(2)
        ),
        "{}",
        n.stderr()
    );
}

/// The lab fleet is mounted in the binary: `-devices` and `-snmp-port 0` give that many devices on
/// ephemeral ports, listed by `GET /api/v1/devices`; a bad fleet flag is refused at startup naming it.
#[test]
fn fleet_flags_boot_devices_listed_by_the_api() {
    let nl6 = common::boot().args(&["-devices", "3"]).start();
    let (status, _, body) = nl6.http("GET", "/api/v1/devices", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v = common::json(&body);
    let devices = v["data"].as_array().expect("data is a list");
    assert_eq!(devices.len(), 3, "{v}");
    for d in devices {
        let port = d["snmp"]["port"].as_u64().unwrap_or(0);
        assert!(port > 0 && port != 16100, "ephemeral port expected: {d}");
    }
    let out = common::boot().args(&["-trap-interval", "soon"]).run();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("nl6: -trap-interval"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
