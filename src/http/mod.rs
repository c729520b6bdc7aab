//! HTTP serving: request and reply values ([`Request`], [`Response`]) that handlers take and return, and
//! the bounded server ([`server`]) that alone touches sockets.
//!
//! Handlers never see a socket, so they are tested as plain functions. `unsafe` is denied here and allowed
//! only in [`sys`] (the `poll(2)` and `setrlimit(2)` wrappers std lacks).
#![deny(unsafe_code)]

pub mod server;
pub mod sys;

use std::os::fd::RawFd;
use std::time::Duration;

/// A parsed request: method, path (percent-decoding is the handler's business), raw query, headers
/// (names lower-cased), the whole body, and whether its client is still there ([`Peer`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub peer: Peer,
}

/// The one thing a handler may learn about the connection its request came on: whether the client has
/// gone away, so a long handler (a timed profile) can end early, as Go's request context does. Holds the
/// socket's descriptor, valid for the handler call (the worker keeps the socket until the handler
/// returns; a copy kept longer would probe whatever reuses the number). A request not built by the
/// server watches nothing and is never gone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peer(Option<RawFd>);

impl Peer {
    /// Watches the socket `fd` (the server's worker, for the request it is serving).
    pub fn watching(fd: RawFd) -> Peer {
        Peer(Some(fd))
    }

    /// True once the client closed its side or the connection broke. One `poll` with a zero timeout.
    pub fn is_gone(&self) -> bool {
        self.0.is_some_and(sys::peer_closed)
    }
}

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
            peer: Peer::default(),
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
        self.query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .find_map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (percent_decode(k) == name).then(|| percent_decode(v))
            })
    }
}

/// Decodes `%XX` escapes and `+`; invalid escapes are kept as they are.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
}

impl Response {
    /// A response with a status, one `Content-Type` and a body.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".to_string(), content_type.to_string())],
            body: body.into(),
            extra_write_time: Duration::ZERO,
        }
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
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
