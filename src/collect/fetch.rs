//! The collector's HTTP client: one GET of a pprof endpoint with explicit connect and overall timeouts,
//! the answer kept whatever its status (a closed nl6 gate answers 503 with a reason worth keeping).
//!
//! The only outbound network code in the collector. No proxy is used (targets are reached directly,
//! whatever `HTTP_PROXY` says); redirects are not followed; bodies are capped at [`BODY_LIMIT`].
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// Largest profile body accepted.
pub const BODY_LIMIT: u64 = 256 << 20;

/// Time allowed to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The outcome of one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub url: String,
    /// The HTTP status, when an answer arrived.
    pub http_status: Option<u16>,
    /// The body of a 200 answer, or why there is none (`HTTP 503: profiling is disabled`).
    pub body: Result<Vec<u8>, String>,
    pub elapsed: Duration,
}

/// GETs `url`, giving up after `timeout` overall.
pub fn fetch(url: &str, timeout: Duration) -> Fetched {
    let start = Instant::now();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(CONNECT_TIMEOUT.min(timeout)))
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("nl6-collect/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let (http_status, body) = match agent.get(url).call() {
        Err(e) => (None, Err(describe(&e, timeout))),
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let body = resp
                .body_mut()
                .with_config()
                .limit(BODY_LIMIT)
                .read_to_vec();
            match (status, body) {
                (200, Ok(b)) => (Some(status), Ok(b)),
                (200, Err(e)) => (
                    Some(status),
                    Err(format!("reading body: {}", describe(&e, timeout))),
                ),
                (s, b) => {
                    let text = b
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default();
                    // The target chose this text; it goes into meta.json and the log line.
                    let text = crate::logtext::remote(text.trim());
                    let reason = resp.status().canonical_reason().unwrap_or("");
                    let msg = if text.is_empty() {
                        format!("HTTP {s} {reason}")
                    } else {
                        format!("HTTP {s}: {text}")
                    };
                    (Some(s), Err(msg))
                }
            }
        }
    };
    Fetched {
        url: url.to_string(),
        http_status,
        body,
        elapsed: start.elapsed(),
    }
}

/// ureq's message, which can quote what the target sent (a malformed status line or header).
fn describe(e: &ureq::Error, timeout: Duration) -> String {
    let text = crate::logtext::remote(&e.to_string());
    match e {
        ureq::Error::Timeout(_) => format!("timed out after {timeout:?} ({text})"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrape target on loopback that answers one GET with `status` and `body`.
    fn one_answer(status: u16, body: Vec<u8>) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        });
        format!("http://{addr}/debug/pprof/heap")
    }

    /// A target's error body reaches nl6 collect's log line: control characters are escaped, length bounded.
    #[test]
    fn error_bodies_are_escaped_and_bounded() {
        let body = b"\x1b[31mred\x07\r\x00 \xe2\x80\xae".to_vec();
        let f = fetch(&one_answer(500, body), Duration::from_secs(5));
        let e = f.body.unwrap_err();
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        assert!(e.contains("\\x1b[31mred\\x07\\r\\0"), "{e}");
        assert!(!e.contains('\u{202e}'), "bidi overrides are escaped: {e}");
        let f = fetch(&one_answer(503, vec![b'y'; 50_000]), Duration::from_secs(5));
        assert!(f.body.unwrap_err().len() < 700);
    }
}
