//! The client against a hostile collector on loopback: a refusal's body (401/403) is never shown, and a
//! server's reason is escaped and bounded before it reaches `last_error` and the log.
use super::*;
use std::collections::HashMap;

fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

/// A one-shot collector on loopback: reads one request, answers `status` with `body`, closes.
fn one_answer(status: u16, body: &'static [u8]) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 65536];
        // Read the head and the whole multipart body (it ends with the closing boundary).
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if seen.ends_with(b"--\r\n") {
                break;
            }
        }
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
    });
    format!("http://{addr}")
}

/// The error of one upload to `address` within `timeout`, with basic auth set (a user and a password
/// these tests look for).
fn upload_error_within(address: String, timeout: Duration) -> String {
    let target = PushTarget {
        address,
        basic_auth: Some(("alice".into(), "s3cret-pw".into())),
        tenant: None,
        interval: Duration::from_secs(15),
        wall: false,
    };
    let c = Client::new(
        &target,
        "nl6{}".into(),
        "nl6",
        "0.1.0",
        Duration::from_secs(5),
        &env_of(&[]),
    )
    .unwrap();
    let profile = EncodedProfile {
        kind: crate::ProfileKind::Cpu,
        pprof_gz: vec![0x1f, 0x8b],
        from: std::time::SystemTime::now(),
        until: std::time::SystemTime::now(),
    };
    c.upload(&profile, timeout).unwrap_err().to_string()
}

fn upload_error(address: String) -> String {
    upload_error_within(address, Duration::from_secs(5))
}

/// A collector that echoes the password transformed (upper-cased, percent- or JSON-escaped) defeats
/// the exact-copy scrubber: for 401/403 the body is not shown at all.
#[test]
fn refused_credentials_show_the_status_only() {
    for (status, body) in [
        (401, &b"bad password S3CRET-PW for ALICE"[..]),
        (
            403,
            &b"{\"message\":\"s3cret%2Dpw \\u0073\\u0033cret-pw\"}"[..],
        ),
    ] {
        let e = upload_error(one_answer(status, body));
        assert!(e.contains(&status.to_string()), "{e}");
        let lower = e.to_ascii_lowercase();
        assert!(
            !lower.contains("s3cret") && !lower.contains("alice") && !lower.contains("pw"),
            "{e}"
        );
    }
    // Other statuses keep the server's reason, exact copies of secrets scrubbed.
    let e = upload_error(one_answer(500, b"{\"message\":\"disk full, s3cret-pw\"}"));
    assert!(e.contains("disk full") && !e.contains("s3cret"), "{e}");
}

/// A hostile collector's body must not put terminal escapes, CR, BEL or NUL into nl6's log.
#[test]
fn server_reasons_are_escaped_and_bounded() {
    let e = upload_error(one_answer(
        500,
        b"\x1b[2J\x1b]0;owned\x07fake\rline\x00end and more text",
    ));
    assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
    assert!(
        e.contains("\\x1b[2J") && e.contains("\\r") && e.contains("\\0"),
        "{e}"
    );
    static LONG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let long: &'static [u8] = LONG.get_or_init(|| vec![b'x'; 100_000]);
    let e = upload_error(one_answer(500, long));
    assert!(e.len() < 600, "{} bytes", e.len());
}

/// A collector that takes the request and never answers: the error says how long the upload waited
/// (ureq's own "timeout: global" does not).
#[test]
fn a_silent_collector_is_a_time_out_that_says_how_long() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut buf = [0u8; 65536];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    });
    let e = upload_error_within(format!("http://{addr}"), Duration::from_millis(300));
    assert!(e.contains("timed out after 300ms"), "{e}");
    server.join().unwrap();
}
