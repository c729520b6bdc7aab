//! The wire side of [`super`]: framing one request out of received bytes with `httparse` (heads only;
//! `Content-Length` bodies, any `Transfer-Encoding` refused with 411) and serialising a response head.
//! Plain functions over byte slices; never owns a socket or a thread.
//!
//! Framing refuses, and the server then closes, every shape that a proxy in front could frame differently
//! (RFC 9112 §6.3 and §3.2): `Content-Length` given twice with different values, or not plain digits
//! (`+0`, `0x10`, `1, 2`); `Transfer-Encoding` of any kind (so it never disagrees with a length); an
//! HTTP/1.1 request without `Host`, or any request with two. Repeated identical lengths are one length,
//! as in Go.
#![deny(unsafe_code)]

use crate::http::{Request, Response};

/// Largest request head accepted (431 above it).
pub const MAX_HEAD: usize = 16 * 1024;

/// What the bytes received so far hold.
#[derive(Debug, PartialEq)]
pub(crate) enum Framed {
    /// More bytes are needed.
    Incomplete,
    /// A whole request of `consumed` bytes.
    Complete {
        request: Request,
        consumed: usize,
        keep_alive: bool,
    },
    /// The request cannot be served: answer this status and close.
    Refused(Refusal),
}

/// A request the server answers itself, before any handler, then closes: framing it failed or it is over
/// a limit. [`super::ServerConfig::refusal`] decides how the answer looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 411, 413 or 431.
    pub status: u16,
    /// What was wrong, one line.
    pub message: String,
    /// The request's path when the head was readable far enough to have one.
    pub path: Option<String>,
}

/// The default refusal answer: `text/plain`, the message and a newline.
pub fn plain_refusal(r: &Refusal) -> Response {
    Response::new(
        r.status,
        "text/plain; charset=utf-8",
        format!("{}\n", r.message),
    )
}

fn refused(status: u16, message: impl Into<String>, path: Option<&str>) -> Framed {
    Framed::Refused(refusal(status, message, path))
}

fn refusal(status: u16, message: impl Into<String>, path: Option<&str>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        path: path.map(|p| p.split('?').next().unwrap_or(p).to_string()),
    }
}

/// Frames one request out of `buf` with httparse.
pub(crate) fn frame(buf: &[u8], max_body: usize) -> Framed {
    if buf.is_empty() {
        return Framed::Incomplete;
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return refused(431, "request header fields too large", None)
        }
        Ok(httparse::Status::Partial) => return Framed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => {
            return refused(431, "too many request header fields", None)
        }
        Err(_) => return refused(400, "malformed HTTP request", None),
    };
    if head_len > MAX_HEAD {
        return refused(431, "request header fields too large", req.path);
    }
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("");
    let version = req.version.unwrap_or(1);
    let fields = match head_fields(req.headers, version == 0, max_body, target) {
        Ok(f) => f,
        Err(r) => return Framed::Refused(r),
    };
    let (hosts, content_length) = (fields.hosts, fields.content_length);
    if hosts > 1 {
        return refused(400, "more than one Host header", Some(target));
    }
    if hosts == 0 && version == 1 {
        return refused(
            400,
            "an HTTP/1.1 request needs a Host header; none was sent",
            Some(target),
        );
    }
    if !target.starts_with('/') {
        return refused(400, "request target must be an absolute path", None);
    }
    if buf.len() < head_len + content_length {
        return Framed::Incomplete;
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let request = Request {
        method,
        path,
        query,
        headers: fields.headers,
        body: buf[head_len..head_len + content_length].to_vec(),
        client: Default::default(),
    };
    Framed::Complete {
        request,
        consumed: head_len + content_length,
        keep_alive: !fields.close,
    }
}

/// What framing needs from a head's fields, read in one pass.
struct HeadFields {
    /// Every field, its name lowercased and its value trimmed.
    headers: Vec<(String, String)>,
    content_length: usize,
    hosts: usize,
    /// The connection closes after this request.
    close: bool,
}

/// Reads a head's fields: the body length, the `Host` count and whether the connection closes after
/// this request (`close` is the version's default: true for HTTP/1.0). `Err` is the refusal: any
/// `Transfer-Encoding`, a `Content-Length` that is not plain digits, over `max_body` or given twice with
/// different values.
fn head_fields(
    fields: &[httparse::Header<'_>],
    close: bool,
    max_body: usize,
    target: &str,
) -> Result<HeadFields, Refusal> {
    let mut content_length: Option<(usize, String)> = None;
    let mut out = HeadFields {
        headers: Vec::with_capacity(fields.len()),
        content_length: 0,
        hosts: 0,
        close,
    };
    for h in fields {
        let value = String::from_utf8_lossy(h.value).trim().to_string();
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "transfer-encoding" => {
                return Err(refusal(
                    411,
                    "chunked request bodies are not accepted; send Content-Length",
                    Some(target),
                ))
            }
            "content-length" => match &content_length {
                Some((_, first)) if *first == value => {}
                Some(_) => {
                    return Err(refusal(
                        400,
                        "Content-Length is given twice with different values",
                        Some(target),
                    ))
                }
                None => match body_length(&value, max_body) {
                    Ok(n) => content_length = Some((n, value.clone())),
                    Err((status, message)) => return Err(refusal(status, message, Some(target))),
                },
            },
            "host" => out.hosts += 1,
            "connection" => {
                let v = value.to_ascii_lowercase();
                if v.split(',').any(|t| t.trim() == "close") {
                    out.close = true;
                } else if v.split(',').any(|t| t.trim() == "keep-alive") {
                    out.close = false;
                }
            }
            _ => {}
        }
        out.headers.push((name, value));
    }
    out.content_length = content_length.map_or(0, |(n, _)| n);
    Ok(out)
}

/// A `Content-Length` value: plain digits (RFC 9110 §8.6: no sign, no list), at most `max_body`. The
/// refusal is (status, message).
fn body_length(value: &str, max_body: usize) -> Result<usize, (u16, String)> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err((400, "invalid Content-Length: digits only".to_string()));
    }
    match value.parse::<usize>() {
        Ok(n) if n <= max_body => Ok(n),
        // Too many digits for usize is over any limit too.
        parsed => {
            let shown = parsed.map_or_else(|_| value.to_string(), |n| n.to_string());
            let kib = if max_body >= 1024 && max_body.is_multiple_of(1024) {
                format!(" ({} KiB)", max_body / 1024)
            } else {
                String::new()
            };
            Err((
                413,
                format!("request body is {shown} bytes; the limit is {max_body}{kib}"),
            ))
        }
    }
}

/// The reason phrase of the statuses nl6 answers.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        301 => "Moved Permanently",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// The response head: status line, the handler's headers (less the framing ones the server owns),
/// `X-Content-Type-Options`, `Content-Length` and `Connection`. The body is written after it unless the
/// request was `HEAD`.
pub(crate) fn response_head(resp: &Response, keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(
        format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status)).as_bytes(),
    );
    for (k, v) in &resp.headers {
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if resp.get_header("x-content-type-options").is_none() {
        out.extend_from_slice(b"X-Content-Type-Options: nosniff\r\n");
    }
    let conn = if keep_alive { "keep-alive" } else { "close" };
    out.extend_from_slice(
        format!(
            "Content-Length: {}\r\nConnection: {conn}\r\n\r\n",
            resp.body.len()
        )
        .as_bytes(),
    );
    out
}
