//! The collector's HTTP client: one GET of a pprof endpoint with explicit connect and overall timeouts,
//! the answer kept whatever its status (a closed nl6 gate answers 503 with a reason worth keeping).
//!
//! The only outbound network code in the collector. No proxy is used (targets are reached directly,
//! whatever `HTTP_PROXY` says); redirects are not followed; bodies are capped at [`BODY_LIMIT`] and charged to the cycle's memory
//! budget ([`super::budget`]) as they arrive.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::budget::{Budget, Held, OverBudget};

/// Largest profile body accepted: a compressed profile is never larger than the inflated profile
/// nl6 accepts ([`crate::report::limits::LIMITS`]), plus a few header bytes.
pub const BODY_LIMIT: u64 = crate::report::limits::LIMITS.inflated_bytes + 1024;

/// Bytes read from the socket at a time (each charged to the cycle's memory budget first).
const READ_CHUNK: usize = 64 << 10;

/// Time allowed to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The outcome of one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub url: String,
    /// The HTTP status, when an answer arrived.
    pub http_status: Option<u16>,
    /// The body of a 200 answer, or why there is none (`HTTP 503: profiling is disabled`).
    pub body: Result<Vec<u8>, FetchError>,
    pub elapsed: Duration,
}

/// Why a fetch brought no profile body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// The request failed before an answer.
    Request(Transport),
    /// A 200 answer's body stopped before its end.
    Body(Transport),
    /// An answer other than 200: its status, the status's reason and the start of its body (escaped
    /// and bounded, possibly empty).
    Answer {
        status: u16,
        reason: &'static str,
        text: String,
    },
    /// The body passed [`BODY_LIMIT`].
    TooLarge,
    /// The cycle's memory budget was spent.
    Budget(OverBudget),
}

/// The transport's words (escaped: they can quote what the target sent), and the time-out when that
/// was what ended the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    pub text: String,
    pub timed_out: Option<Duration>,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.timed_out {
            Some(t) => write!(f, "timed out after {t:?} ({})", self.text),
            None => f.write_str(&self.text),
        }
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Request(t) => write!(f, "{t}"),
            FetchError::Body(t) => write!(f, "reading body: {t}"),
            FetchError::Answer {
                status,
                reason,
                text,
            } if text.is_empty() => {
                write!(f, "HTTP {status} {reason}")
            }
            FetchError::Answer { status, text, .. } => write!(f, "HTTP {status}: {text}"),
            FetchError::TooLarge => write!(
                f,
                "the body is larger than {} MiB (nl6's limit for a profile)",
                BODY_LIMIT >> 20
            ),
            FetchError::Budget(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FetchError {}

/// GETs `url`, giving up after `timeout` overall, with a budget of its own.
pub fn fetch(url: &str, timeout: Duration) -> Fetched {
    let budget = Budget::new(BODY_LIMIT);
    let mut held = budget.holder();
    fetch_within(url, timeout, &mut held)
}

/// GETs `url`, giving up after `timeout` overall; the body's bytes are charged to `held` as they
/// arrive, and the fetch fails when the budget is spent.
pub fn fetch_within(url: &str, timeout: Duration, held: &mut Held) -> Fetched {
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
        Err(e) => (None, Err(FetchError::Request(describe(&e, timeout)))),
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            if status == 200 {
                let body = read_body(resp.body_mut(), held)
                    .map_err(|e| FetchError::Body(describe(&e, timeout)));
                return Fetched {
                    url: url.to_string(),
                    http_status: Some(status),
                    body: body.and_then(|b| b),
                    elapsed: start.elapsed(),
                };
            }
            (Some(status), Err(error_answer(&mut resp)))
        }
    };
    Fetched {
        url: url.to_string(),
        http_status,
        body,
        elapsed: start.elapsed(),
    }
}

/// Most bytes of an error answer read (its start is shown, escaped and bounded).
const ERROR_BODY_READ: u64 = 64 << 10;

/// Most characters of an error answer kept in meta.json and the log line (a 503's remedy fits).
const ERROR_TEXT_LIMIT: usize = 512;

/// `HTTP 503: profiling is disabled…`: the status and the start of the body. The target chose that
/// text; it goes into meta.json and the log line, so it is escaped and bounded ([`nl6_text::logtext`]).
fn error_answer(resp: &mut ureq::http::Response<ureq::Body>) -> FetchError {
    let status = resp.status();
    let text = resp
        .body_mut()
        .with_config()
        .limit(ERROR_BODY_READ)
        .read_to_vec()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    FetchError::Answer {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or(""),
        text: nl6_text::logtext::remote_within(text.trim(), ERROR_TEXT_LIMIT),
    }
}

/// A 200 answer's body, at most [`BODY_LIMIT`] bytes, each chunk charged to `held` before it is kept.
/// The outer `Err` is the transport's; the inner one a refused charge.
fn read_body(
    body: &mut ureq::Body,
    held: &mut Held,
) -> Result<Result<Vec<u8>, FetchError>, ureq::Error> {
    use std::io::Read;
    // Room for the announced length up front (address space only until bytes arrive): growing by
    // doubling would copy, and hold up to twice the body at once.
    let announced = body.content_length().unwrap_or(0).min(BODY_LIMIT) as usize;
    // ureq's own limit is a backstop; the check below names nl6's limit first.
    let mut reader = body
        .with_config()
        .limit(BODY_LIMIT + READ_CHUNK as u64)
        .reader();
    let mut out = Vec::with_capacity(announced);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(Ok(out)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // ureq's own error (its time-out) comes back inside the io::Error: unwrapped, so the time-out
            // is told as such, with how long it waited.
            Err(e) => return Err(ureq::Error::from(e)),
        };
        if (out.len() + n) as u64 > BODY_LIMIT {
            return Ok(Err(FetchError::TooLarge));
        }
        if let Err(e) = held.charge(n as u64) {
            return Ok(Err(FetchError::Budget(e)));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// ureq's message, which can quote what the target sent (a malformed status line or header).
fn describe(e: &ureq::Error, timeout: Duration) -> Transport {
    Transport {
        text: nl6_text::logtext::remote(&e.to_string()),
        timed_out: matches!(e, ureq::Error::Timeout(_)).then_some(timeout),
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
        let e = f.body.unwrap_err().to_string();
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        assert!(e.contains("\\x1b[31mred\\x07\\r\\0"), "{e}");
        assert!(!e.contains('\u{202e}'), "bidi overrides are escaped: {e}");
        let f = fetch(&one_answer(503, vec![b'y'; 50_000]), Duration::from_secs(5));
        let e = f.body.unwrap_err().to_string();
        assert!(e.len() < 600 && e.ends_with('…'), "{} bytes", e.len());
    }

    /// A body that stops arriving: the error says how long the fetch waited (it used to say only
    /// "timeout: global").
    #[test]
    fn a_stalled_body_says_how_long_it_waited() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes.");
            // Hold the connection open, sending nothing more, past the client's time-out.
            std::thread::sleep(Duration::from_millis(1500));
        });
        let f = fetch(
            &format!("http://{addr}/debug/pprof/heap"),
            Duration::from_millis(400),
        );
        let e = f.body.unwrap_err().to_string();
        assert!(e.contains("timed out after 400ms"), "{e}");
        server.join().unwrap();
    }
}
