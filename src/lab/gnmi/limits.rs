//! What one gNMI request, stream and connection may cost the target, in one place (docs/gnmi.md
//! lists them): a request over a limit is refused with the status gNMI names and a message
//! naming the limit, and counted in the device's `gnmi_refused`.
//!
//! The figures: a device has a few dozen leaves, so a request naming more than [`MAX_PATHS`] of them is
//! not a real client's; [`MAX_RESPONSE_BYTES`] keeps an answer far below gRPC clients' default 4 MiB
//! receive limit; connection deadlines are a few seconds because real clients answer HTTP/2 pings at
//! once.
#![forbid(unsafe_code)]

use super::path::Elem;
use std::fmt;
use std::time::Duration;
use tonic::{Code, Status};

/// Paths in one Get.
pub const MAX_PATHS: usize = 256;
/// Subscriptions in one SubscriptionList.
pub const MAX_SUBSCRIPTIONS: usize = 256;
/// Updates (replace, update and union_replace together) in one Set.
pub const MAX_SET_UPDATES: usize = 256;
/// Elements of one path, prefix included.
pub const MAX_ELEMS: usize = 32;
/// Keys of one element.
pub const MAX_KEYS: usize = 8;
/// Bytes of one path's names, keys and values together.
pub const MAX_PATH_BYTES: usize = 1024;
/// Encoded bytes of one Get answer or one Subscribe snapshot.
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Encoded bytes of one request message.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Bytes of a refusal's message (gRPC clients take 8 KiB of metadata by default).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Bytes of a hostile part (a path, a value) quoted in a refusal.
pub const MAX_QUOTE_BYTES: usize = 200;
/// Concurrent streams (RPCs) on one HTTP/2 connection.
pub const MAX_STREAMS: u32 = 100;
/// HTTP/2 flow-control windows: what a connection or a stream may hold unread by its client.
pub const STREAM_WINDOW: u32 = 64 * 1024 - 1;
pub const CONNECTION_WINDOW: u32 = 1 << 20;
/// HTTP/2 ping after this long without a frame from the client, and close without its answer.
pub const KEEPALIVE: Duration = Duration::from_secs(2);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// A connection from which nothing arrives this long is closed: before its TLS or HTTP/2 handshake
/// ends, or after it when it answers no ping (6 s after the ping: room for a client on a busy machine).
pub const IDLE_LIMIT: Duration = Duration::from_secs(8);

/// Which limit a request went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    Paths(usize),
    Subscriptions(usize),
    SetUpdates(usize),
    Elems(usize),
    Keys(usize),
    PathBytes(usize),
    Response,
}

impl fmt::Display for Over {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Over::Paths(n) => write!(f, "a Get of {n} paths: at most {MAX_PATHS} paths a Get; send several Gets"),
            Over::Subscriptions(n) => write!(
                f,
                "{n} subscriptions in one list: at most {MAX_SUBSCRIPTIONS} subscriptions a Subscribe; \
                 subscribe to a path above the leaves instead"
            ),
            Over::SetUpdates(n) => write!(f, "a Set of {n} updates: at most {MAX_SET_UPDATES} updates a Set"),
            Over::Elems(n) => write!(f, "a path of {n} elements: at most {MAX_ELEMS} elements a path"),
            Over::Keys(n) => write!(f, "an element with {n} keys: at most {MAX_KEYS} keys an element"),
            Over::PathBytes(n) => write!(f, "a path of {n} bytes: at most {MAX_PATH_BYTES} bytes a path"),
            Over::Response => write!(
                f,
                "the answer would be over {} MiB: at most {} MiB an answer; ask for fewer or narrower paths",
                MAX_RESPONSE_BYTES >> 20,
                MAX_RESPONSE_BYTES >> 20
            ),
        }
    }
}

impl From<Over> for Status {
    fn from(o: Over) -> Status {
        let code = match o {
            Over::Response => Code::ResourceExhausted,
            _ => Code::InvalidArgument,
        };
        Status::new(code, o.to_string())
    }
}

/// `n` items against `max`: `Err(over(n))` when over.
pub fn count(n: usize, max: usize, over: fn(usize) -> Over) -> Result<(), Over> {
    if n > max {
        Err(over(n))
    } else {
        Ok(())
    }
}

/// The elements of a request path checked against [`MAX_ELEMS`], [`MAX_KEYS`] and [`MAX_PATH_BYTES`].
pub fn path(elems: &[Elem]) -> Result<(), Over> {
    count(elems.len(), MAX_ELEMS, Over::Elems)?;
    let mut bytes = 0;
    for e in elems {
        count(e.keys.len(), MAX_KEYS, Over::Keys)?;
        bytes += e.name.len() + e.keys.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    }
    count(bytes, MAX_PATH_BYTES, Over::PathBytes)
}

/// `text` for a message: control characters escaped, cut to about `max` bytes (the cut said).
pub fn quote(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() >= max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` with its message quoted to [`MAX_MESSAGE_BYTES`]: the last guard before a status leaves.
pub fn clip(s: Status) -> Status {
    let m = s.message();
    if m.len() <= MAX_MESSAGE_BYTES && !m.chars().any(char::is_control) {
        return s;
    }
    Status::new(s.code(), quote(m, MAX_MESSAGE_BYTES - 40))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_cut_and_escaped() {
        let q = quote(&format!("a\n{}", "x".repeat(10_000)), 100);
        assert!(
            q.len() < 140 && q.starts_with("a\\nx") && q.ends_with("(10002 bytes in all)"),
            "{q}"
        );
        assert_eq!(quote("eth0", 100), "eth0");
        let s = clip(Status::not_found("y".repeat(400_000)));
        assert!(s.message().len() <= MAX_MESSAGE_BYTES && s.code() == Code::NotFound);
        let big = vec![Elem::default(); MAX_ELEMS + 1];
        assert_eq!(path(&big), Err(Over::Elems(MAX_ELEMS + 1)));
        assert!(Status::from(Over::Paths(9999))
            .message()
            .contains("256 paths"));
    }
}
