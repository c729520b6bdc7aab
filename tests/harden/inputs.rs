//! The real binary against inputs that must agree with the rest of the world: duplicate JSON keys, push
//! addresses the client cannot use, impossible scenario dates, and a hostile collector whose answers
//! carry terminal escapes or a transformed echo of the password.
//! Everything stays on 127.0.0.1; every wait is bounded; only processes started here are killed.
use crate::common;

use common::{boot, json, wait_until, Nl6};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn state(n: &Nl6) -> Value {
    let (status, _, body) = n.http("GET", "/api/v1/profiling", b"");
    assert_eq!(status, 200);
    json(&body)["data"].clone()
}

fn post(n: &Nl6, path: &str, body: &str) -> (u16, String) {
    let (status, _, b) = n.http("POST", path, body.as_bytes());
    (status, json(&b)["error"].as_str().unwrap_or("").to_string())
}

#[test]
fn bodies_addresses_and_dates_are_refused_naming_the_field() {
    let n = boot().start();
    // Duplicate keys: refused, never the last value winning (200, gate closed).
    let (status, err) = post(
        &n,
        "/api/v1/profiling",
        r#"{"enabled":false,"enabled":true}"#,
    );
    assert_eq!(status, 400, "{err}");
    assert!(err.contains("duplicate key \"enabled\""), "{err}");
    assert_eq!(state(&n)["enabled"], false);
    // Addresses the push cannot use: refused, never 200 with pushing:true and every upload failing.
    let long = format!("http://{}.example", "a".repeat(60_000));
    for address in [
        "http://bücher.example",
        "http://a%40b",
        "http://a:1:2",
        "http://127.0.0.1:0",
        "http://127.0.0.1:+80",
        "http://;:1",
        long.as_str(),
    ] {
        let body = serde_json::json!({"enabled": true, "server_address": address}).to_string();
        let (status, err) = post(&n, "/api/v1/profiling", &body);
        assert_eq!(status, 400, "{address:.60}: {err}");
        assert!(err.starts_with("server_address: "), "{err:.200}");
        assert!(
            err.len() < 400,
            "the error stays short: {} bytes",
            err.len()
        );
        let v = state(&n);
        assert_eq!(
            (v["enabled"].clone(), v["pushing"].clone()),
            (false.into(), false.into())
        );
    }
    // Impossible dates: refused, never 201 moved to another date.
    for start_at in [
        "2030-02-30T00:00:00Z",
        "2030-11-31T00:00:00Z",
        "2030-01-01T00:00:00+99:99",
        "2030-01-01T00:00:60Z",
    ] {
        let body = format!(
            r#"{{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","start_at":"{start_at}"}}"#
        );
        let (status, err) = post(&n, "/api/v1/scenarios", &body);
        assert_eq!(status, 400, "{start_at}: {err}");
        assert!(err.starts_with("field \"start_at\""), "{err}");
    }
    let (status, err) = post(
        &n,
        "/api/v1/scenarios",
        r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1s","device":"nl6-dev-0001"}"#,
    );
    assert_eq!(status, 400, "{err}");
    assert!(err.contains("duplicate key \"device\""), "{err}");
    // The startup flag goes through the same check.
    let out = boot().args(&["-profiling-pyroscope", "http://a:1:2"]).run();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-profiling-pyroscope: server address"),
        "{err}"
    );
}

/// A collector that answers its first upload 500 with terminal escapes, CR, BEL and NUL, and every
/// later one 401 with the password echoed upper-cased and percent-encoded.
fn hostile_collector() -> (u16, Arc<AtomicUsize>) {
    let ln = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = ln.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for conn in ln.incoming().take(200) {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut seen = Vec::new();
            let mut buf = [0u8; 65536];
            while let Ok(k) = s.read(&mut buf) {
                if k == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..k]);
                if seen.ends_with(b"--\r\n") {
                    break;
                }
            }
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            let (status, body): (&str, &[u8]) = if first {
                ("500 Oops", b"\x1b[2J\x1b]0;pwned\x07forged\rline\x00tail")
            } else {
                (
                    "401 Unauthorized",
                    b"wrong password HUNTER2-SECRET (hunter2%2Dsecret)",
                )
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body);
        }
    });
    (port, served)
}

#[test]
fn a_hostile_collector_cannot_write_escapes_or_echo_the_password() {
    let (port, served) = hostile_collector();
    let address = format!("http://127.0.0.1:{port}");
    let n = boot()
        .args(&[
            "-profiling-pyroscope",
            &address,
            "-profiling-pyroscope-basic-auth",
            "alice:hunter2-secret",
            "-profiling-upload-interval",
            "1s",
        ])
        .start();
    assert!(
        n.wait_for_log("failing:", Duration::from_secs(30)),
        "no failure logged: {}",
        n.stderr()
    );
    let line = n
        .log_lines("[profiling] push to")
        .into_iter()
        .find(|l| l.contains("failing:"))
        .unwrap();
    assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    assert!(line.contains("\\x1b[2J") && line.contains("\\r"), "{line}");
    assert!(
        wait_until(Duration::from_secs(30), || {
            served.load(Ordering::SeqCst) >= 3
                && state(&n)["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("401"))
        }),
        "no 401 reached last_error: {}",
        state(&n)
    );
    let last_error = state(&n)["last_error"].as_str().unwrap().to_string();
    let everything = format!("{last_error}\n{}", n.stderr()).to_ascii_lowercase();
    assert!(
        !everything.contains("hunter2"),
        "the echoed password leaked: {everything}"
    );
}
