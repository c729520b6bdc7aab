//! HTTP serving: request and reply values ([`Request`], [`Response`]) that handlers take and return, and
//! the bounded server ([`server`]) that alone touches sockets.
//!
//! Handlers never see a socket, so they are tested as plain functions. Two values let a handler deal with
//! time without holding a server worker or a socket: [`ClientProbe`] (has the client gone away?) and
//! [`Deferred`] (an answer that is not ready yet; the server parks the connection until it is). `unsafe` is
//! denied here and allowed only in [`sys`] (the `poll(2)` and `setrlimit(2)` wrappers std lacks).
#![deny(unsafe_code)]

pub mod server;
pub mod sys;

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A parsed request: method, path (percent-decoding is the handler's business), raw query, headers
/// (names lower-cased), the whole body, and a probe of the client's connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the client is still there (Go's request context): a long handler asks it now and then.
    pub client: ClientProbe,
}

/// Tells a handler whether the client that sent the request has gone away: closed or reset its
/// connection, or shut down its sending side (as Go's server does, a half-close counts as gone). Cheap to
/// clone and to ask (one `poll(2)` with no wait); the server builds it, and a request made in-process has
/// one that never reports gone. Holding it keeps the socket open, so a handler drops it when it returns.
#[derive(Clone, Default)]
pub struct ClientProbe(Option<Arc<TcpStream>>);

impl ClientProbe {
    /// A probe of `stream` (the server's side of the client's connection).
    pub fn of(stream: Arc<TcpStream>) -> ClientProbe {
        ClientProbe(Some(stream))
    }

    /// True once the client has closed, reset or half-closed its connection.
    pub fn gone(&self) -> bool {
        use std::os::fd::AsRawFd;
        self.0
            .as_ref()
            .is_some_and(|s| sys::peer_gone(s.as_raw_fd()))
    }
}

impl std::fmt::Debug for ClientProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientProbe(socket)"
        } else {
            "ClientProbe(none)"
        })
    }
}

/// A probe is not part of what a request says: any two compare equal.
impl PartialEq for ClientProbe {
    fn eq(&self, _: &ClientProbe) -> bool {
        true
    }
}
impl Eq for ClientProbe {}

impl Request {
    /// A request with no headers or body, for tests and internal calls.
    pub fn new(method: &str, target: &str) -> Request {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (target.to_string(), String::new()),
        };
        Request {
            method: method.to_string(),
            path,
            query,
            headers: Vec::new(),
            body: Vec::new(),
            client: ClientProbe::default(),
        }
    }

    /// The same request with a body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The first query parameter named `name`, percent-decoded (`+` is a space).
    pub fn query_param(&self, name: &str) -> Option<String> {
        nl6_profile::pull::query_param(&self.query, name)
    }
}

/// A reply: status, headers and body. The server adds `Content-Length`, `Date`-free framing, `Connection`
/// and `X-Content-Type-Options: nosniff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Extra time the server grants the write on top of its write timeout (unused by most handlers).
    pub extra_write_time: Duration,
    /// Set by [`Response::deferred`]: the real answer comes later (status, headers and body are then only
    /// a placeholder that the server never sends).
    pub later: Option<Later>,
}

/// How the server wakes its poll thread: a [`Deferred`] calls it when `ready` may have become true.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// An answer that is not ready yet, such as a `POST` queued behind a gate transition. The server parks
/// the connection (no worker waits for it, and no further request of that connection is read), asks
/// [`Deferred::ready`] on its poll thread whenever the waker is called, and runs [`Deferred::finish`] on a
/// worker once it is ready or its deadline has passed.
pub trait Deferred: Send {
    /// When `finish` is called even if `ready` never said so.
    fn deadline(&self) -> Instant;
    /// True when `finish` would not wait. Called on the server's poll thread: quick, never blocking.
    fn ready(&self) -> bool;
    /// The server's waker, given once before the first `ready`.
    fn set_waker(&mut self, wake: Waker);
    /// The answer (on a worker; may take as long as the work it stands for).
    fn finish(self: Box<Self>) -> Response;
}

/// The deferred part of a [`Response`]: taken once, by the server (or by [`Response::settle`]).
#[derive(Clone)]
pub struct Later(Arc<Mutex<Option<Box<dyn Deferred>>>>);

impl Later {
    /// The job, the first time only.
    pub fn take(&self) -> Option<Box<dyn Deferred>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for Later {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Later")
    }
}

impl PartialEq for Later {
    fn eq(&self, other: &Later) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Later {}

impl Response {
    /// A response with a status, one `Content-Type` and a body.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".to_string(), content_type.to_string())],
            body: body.into(),
            extra_write_time: Duration::ZERO,
            later: None,
        }
    }

    /// An answer that comes later (see [`Deferred`]); the server parks the connection until then.
    pub fn deferred(job: Box<dyn Deferred>) -> Response {
        Response {
            later: Some(Later(Arc::new(Mutex::new(Some(job))))),
            ..Response::new(503, "text/plain; charset=utf-8", "the answer is deferred\n")
        }
    }

    /// The final answer for a caller without a server (tests, in-process use): a deferred response is
    /// waited for here, on the calling thread, until it is ready or its deadline passes.
    pub fn settle(self) -> Response {
        let Some(job) = self.later.as_ref().and_then(Later::take) else {
            return self;
        };
        while !job.ready() && Instant::now() < job.deadline() {
            std::thread::sleep(Duration::from_millis(2));
        }
        job.finish()
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The first header named `name` (case-insensitive).
    pub fn get_header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy), for tests and logs.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_are_decoded() {
        let r = Request::new("GET", "/x?seconds=5&name=a%20b+c&flag");
        assert_eq!(r.query_param("seconds").as_deref(), Some("5"));
        assert_eq!(r.query_param("name").as_deref(), Some("a b c"));
        assert_eq!(r.query_param("flag").as_deref(), Some(""));
        assert_eq!(r.query_param("missing"), None);
        // Invalid escapes are kept as they are.
        let q = |query: &str| nl6_profile::pull::query_param(query, "a");
        assert_eq!(q("a=100%").as_deref(), Some("100%"));
        assert_eq!(q("a=%zz%41").as_deref(), Some("%zzA"));
    }
}
