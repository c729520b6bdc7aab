//! The collector's HTTP client: one GET of a pprof endpoint with explicit connect and overall timeouts,
//! the answer kept whatever its status (a closed nl6 gate answers 503 with a reason worth keeping).
//!
//! The only outbound network code in the collector. No proxy is used (targets are reached directly,
//! whatever `HTTP_PROXY` says); redirects are not followed; bodies are capped at [`BODY_LIMIT`].
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// Largest profile body accepted.
pub const BODY_LIMIT: u64 = 256 << 20;

/// Longest error body kept in meta.json.
const ERROR_BODY_LIMIT: usize = 512;

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
                    let text = text.trim();
                    let text: String = text.chars().take(ERROR_BODY_LIMIT).collect();
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

fn describe(e: &ureq::Error, timeout: Duration) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("timed out after {timeout:?} ({e})"),
        other => other.to_string(),
    }
}
