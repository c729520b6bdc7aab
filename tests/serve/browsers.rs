//! What a browser may do to nl6, over raw HTTP against the real binary (the headless-Chromium half is in
//! `tests/console/browser.rs`):
//!
//! - a state-changing request under `/api/` without `Content-Type: application/json` is 415 (a
//!   cross-site form or a `text/plain` fetch cannot send that type without a preflight nl6 never grants);
//! - a request whose `Origin` is not nl6's own is 403 naming the origin and `-allowed-origins`;
//! - a `Host` that is not one of the names nl6 listens as is 421 naming the host and `-allowed-hosts`, on
//!   every route (the pull surface too: what DNS rebinding needs);
//! - the console page forbids framing (`X-Frame-Options: DENY`, CSP `frame-ancestors 'none'`);
//! - what tools send (no `Origin`, `Host` = the address, or no `Host` at all as HTTP/1.0 allows) is
//!   served as before, and the two flags let a named host or origin in.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One raw request (`head` lines without the request line's CRLF end) and its answer.
fn raw(
    addr: SocketAddr,
    request_line: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> common::Reply {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{request_line}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).expect("send");
    common::read_reply(&mut s, request_line.starts_with("HEAD "))
}

fn text(r: &common::Reply) -> String {
    String::from_utf8_lossy(&r.2).into_owned()
}

fn gate_enabled(n: &common::Nl6) -> bool {
    common::json(&n.http("GET", "/api/v1/profiling", b"").2)["data"]["enabled"] == true
}

const OPEN: &str = r#"{"enabled":true,"server_address":""}"#;

#[test]
fn state_changes_need_json_and_a_foreign_origin_is_refused() {
    let n = common::boot().start();
    let host = n.addr.to_string();
    let post = "POST /api/v1/profiling HTTP/1.1";
    // What the attack sent: a simple text/plain POST from another origin, and the form shape.
    for (ct, origin) in [
        ("text/plain", None),
        ("text/plain;charset=UTF-8", Some("http://evil.example")),
        ("application/x-www-form-urlencoded", None),
        ("multipart/form-data; boundary=x", None),
    ] {
        let mut h = vec![("Host", host.as_str()), ("Content-Type", ct)];
        if let Some(o) = origin {
            h.push(("Origin", o));
        }
        let r = raw(n.addr, post, &h, OPEN);
        assert!(r.0 == 415 || r.0 == 403, "{ct}: {} {}", r.0, text(&r));
        assert!(!gate_enabled(&n), "{ct} opened the gate");
    }
    // No Content-Type at all (curl -X POST without -H) is 415 too, and says what to send.
    let r = raw(n.addr, post, &[("Host", &host)], OPEN);
    assert_eq!(r.0, 415, "{}", text(&r));
    let msg = common::json(&r.2)["error"].as_str().unwrap().to_string();
    assert!(
        msg.contains("Content-Type: application/json") && msg.contains("POST /api/v1/profiling"),
        "{msg}"
    );
    // A JSON POST from a foreign origin: 403 naming the origin and the flag; nothing changed.
    let r = raw(
        n.addr,
        post,
        &[
            ("Host", &host),
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        OPEN,
    );
    assert_eq!(r.0, 403, "{}", text(&r));
    let msg = text(&r);
    assert!(
        msg.contains("http://evil.example") && msg.contains("-allowed-origins"),
        "{msg}"
    );
    assert!(!gate_enabled(&n));
    // A foreign origin cannot read either (a fetch sends Origin on a cross-origin GET).
    let r = raw(
        n.addr,
        "GET /api/v1/profiling HTTP/1.1",
        &[("Host", &host), ("Origin", "null")],
        "",
    );
    assert_eq!(r.0, 403, "{}", text(&r));
    // The scenario API is held to the same rule.
    let r = raw(
        n.addr,
        "POST /api/v1/scenarios HTTP/1.1",
        &[("Host", &host), ("Content-Type", "text/plain")],
        r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"1s"}"#,
    );
    assert_eq!(r.0, 415, "{}", text(&r));
    // nl6's own origin (what the console sends) and a JSON type with parameters are served.
    let r = raw(
        n.addr,
        post,
        &[
            ("Host", &host),
            ("Content-Type", "application/json; charset=utf-8"),
            ("Origin", &format!("http://{host}")),
        ],
        OPEN,
    );
    assert_eq!(r.0, 200, "{}", text(&r));
    assert!(gate_enabled(&n));
    // The symbol POST is what `go tool pprof` sends (application/octet-stream): not a state change.
    let r = raw(
        n.addr,
        "POST /debug/pprof/symbol HTTP/1.1",
        &[
            ("Host", &host),
            ("Content-Type", "application/octet-stream"),
        ],
        "0x1",
    );
    assert_eq!(r.0, 200, "{}", text(&r));
}

#[test]
fn a_host_nl6_does_not_listen_as_is_refused_on_every_route() {
    let n = common::boot().start();
    n.open_pull_only();
    let port = n.addr.port();
    for path in [
        "/debug/pprof/heap",
        "/debug/pprof/",
        "/debug/pprof/goroutine?debug=2",
        "/api/v1/profiling",
        "/api/v1/devices",
        "/",
        "/nope",
    ] {
        let r = raw(
            n.addr,
            &format!("GET {path} HTTP/1.1"),
            &[("Host", &format!("rebind.evil.example:{port}"))],
            "",
        );
        assert_eq!(r.0, 421, "{path}: {}", text(&r));
        let msg = text(&r);
        assert!(
            msg.contains("rebind.evil.example") && msg.contains("-allowed-hosts"),
            "{path}: {msg}"
        );
    }
    // The names a loopback listen answers as, and no Host at all (HTTP/1.0): served.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let r = raw(
            n.addr,
            "GET /debug/pprof/heap?debug=1 HTTP/1.1",
            &[("Host", &host)],
            "",
        );
        assert_eq!(r.0, 200, "{host}: {}", text(&r));
    }
    let r = raw(n.addr, "GET /debug/pprof/heap?debug=1 HTTP/1.0", &[], "");
    assert_eq!(r.0, 200, "{}", text(&r));
    // What tools send is untouched: a GET with the address as Host and no Origin.
    let (s, _, _) = n.http("GET", "/debug/pprof/heap", b"");
    assert_eq!(s, 200);
}

#[test]
fn the_flags_let_a_named_host_and_origin_in() {
    let n = common::boot()
        .args(&[
            "-allowed-hosts",
            "nl6.lab.example,proxy.example:8443",
            "-allowed-origins",
            "https://nl6.lab.example",
        ])
        .start();
    let ok = |host: &str, origin: Option<&str>| {
        let mut h = vec![("Host", host), ("Content-Type", "application/json")];
        if let Some(o) = origin {
            h.push(("Origin", o));
        }
        raw(n.addr, "POST /api/v1/profiling HTTP/1.1", &h, OPEN).0
    };
    assert_eq!(ok("nl6.lab.example", None), 200);
    assert_eq!(ok("NL6.lab.example.:9999", None), 200);
    assert_eq!(ok("proxy.example:8443", None), 200);
    assert_eq!(ok("proxy.example:8444", None), 421);
    assert_eq!(ok("other.example", None), 421);
    // Behind a TLS proxy the browser's origin is https://NAME while Host is NAME.
    assert_eq!(ok("nl6.lab.example", Some("https://nl6.lab.example")), 200);
    assert_eq!(
        ok("proxy.example:8443", Some("https://nl6.lab.example")),
        200
    );
    assert_eq!(ok("proxy.example:8443", Some("https://evil.example")), 403);
    // Bad flag values are refused at startup, naming the flag.
    for (flag, value) in [
        ("-allowed-hosts", "http://x.example"),
        ("-allowed-hosts", "a.example/x"),
        ("-allowed-origins", "evil.example"),
        ("-allowed-origins", "http://evil.example/path"),
    ] {
        let out = common::boot().args(&[flag, value]).run();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag.trim_start_matches('-')), "{err}");
    }
}

#[test]
fn the_console_forbids_framing_and_names_its_own_code() {
    let n = common::boot().start();
    let (s, h, body) = n.http("GET", "/", b"");
    assert_eq!(s, 200);
    assert_eq!(common::header(&h, "x-frame-options"), Some("DENY"));
    let csp = common::header(&h, "content-security-policy").expect("CSP");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    // No 'unsafe-inline': the inline script and style are allowed by their hashes only.
    assert!(!csp.contains("unsafe"), "{csp}");
    assert!(
        csp.contains("script-src 'sha256-") && csp.contains("style-src 'sha256-"),
        "{csp}"
    );
    assert!(String::from_utf8_lossy(&body).contains("<script>"));
}
