//! The wire side of [`super`]: framing one request out of received bytes with `httparse` (heads only;
//! `Content-Length` bodies, chunked refused with 411) and writing a response by a deadline. Plain functions
//! over byte slices and a stream; never owns a socket or a thread.
#![deny(unsafe_code)]

use crate::http::{Request, Response};
use std::io::{self, ErrorKind, Write};
use std::net::TcpStream;
use std::time::Instant;

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
    Framed::Refused(Refusal {
        status,
        message: message.into(),
        path: path.map(|p| p.split('?').next().unwrap_or(p).to_string()),
    })
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
    let mut content_length: usize = 0;
    let mut close = version == 0;
    let mut headers_out = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value).trim().to_string();
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "transfer-encoding" => {
                return refused(
                    411,
                    "chunked request bodies are not accepted; send Content-Length",
                    Some(target),
                )
            }
            "content-length" => match value.parse::<usize>() {
                Ok(n) if n > max_body => {
                    let kib = if max_body >= 1024 && max_body.is_multiple_of(1024) {
                        format!(" ({} KiB)", max_body / 1024)
                    } else {
                        String::new()
                    };
                    return refused(
                        413,
                        format!("request body is {n} bytes; the limit is {max_body}{kib}"),
                        Some(target),
                    );
                }
                Ok(n) => content_length = n,
                Err(_) => return refused(400, "invalid Content-Length", Some(target)),
            },
            "connection" => {
                let v = value.to_ascii_lowercase();
                if v.split(',').any(|t| t.trim() == "close") {
                    close = true;
                } else if v.split(',').any(|t| t.trim() == "keep-alive") {
                    close = false;
                }
            }
            _ => {}
        }
        headers_out.push((name, value));
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
        headers: headers_out,
        body: buf[head_len..head_len + content_length].to_vec(),
        peer: Default::default(),
    };
    Framed::Complete {
        request,
        consumed: head_len + content_length,
        keep_alive: !close,
    }
}

/// The reason phrase of the statuses nl6 answers.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Serialises a response (head, then body unless HEAD) and writes it by `deadline`.
pub(crate) fn write_response(
    stream: &mut TcpStream,
    resp: &Response,
    keep_alive: bool,
    head_only: bool,
    deadline: Instant,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(256 + if head_only { 0 } else { resp.body.len() });
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
    if !head_only {
        out.extend_from_slice(&resp.body);
    }
    write_all_by(stream, &out, deadline)
}

/// `write_all` with one deadline for the whole buffer: each `write` gets the time that is left.
fn write_all_by(stream: &mut TcpStream, mut data: &[u8], deadline: Instant) -> io::Result<()> {
    while !data.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(ErrorKind::TimedOut, "write deadline passed"));
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(data) {
            Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "peer closed")),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
