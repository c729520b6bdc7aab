//! A minimal service that embeds nl6-profile: Go's `/debug/pprof/` on a std `TcpListener`, the sampling
//! allocator as the global allocator, and one busy thread labelled `subsystem=example`.
//!
//!     cargo run -p nl6-profile --example embed -- 127.0.0.1:6060
//!     go tool pprof -tags http://127.0.0.1:6060/debug/pprof/profile?seconds=5
//!
//! One request per connection, one short-lived thread per connection (a CPU profile holds its
//! connection for its seconds). Request heads are parsed by `httparse` (a dev-dependency: the library
//! itself has no HTTP code); the surface itself is the engine's value-level handler,
//! `nl6_profile::pull`.
use nl6_profile::heap::SamplingAllocator;
use nl6_profile::labels::LabelSet;
use nl6_profile::pull::{PullRequest, PullResponse, PullSurface};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A one-pair label set, `{subsystem = name}` (the engine has no vocabulary of its own).
fn label(name: &str) -> LabelSet {
    LabelSet::new([("subsystem", name)])
}

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

/// Where the surface is mounted.
const MOUNT: &str = "/debug/pprof/";
/// The largest request head and body read (the surface's largest input is a `symbol` POST).
const MAX_HEAD: usize = 16 << 10;
const MAX_BODY: usize = 64 << 10;

fn main() {
    let Some(listen) = std::env::args().nth(1) else {
        eprintln!("usage: embed 127.0.0.1:PORT (the address to serve /debug/pprof/ on)");
        std::process::exit(2);
    };
    // A stray SIGPROF before the first profile must not kill the process.
    if let Err(e) = nl6_profile::install_signal_handlers() {
        eprintln!("embed: profiler signal handlers: {e}");
    }
    nl6_profile::threads::learn_own_stack();
    let listener = match TcpListener::bind(&listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("embed: listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    nl6_profile::threads::spawn_labelled(label("example"), "busy", busy)
        .expect("starting the busy thread");
    eprintln!(
        "embed: serving {MOUNT} on {}",
        listener.local_addr().expect("bound")
    );
    let surface = Arc::new(PullSurface::new());
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let surface = Arc::clone(&surface);
        let spawned = nl6_profile::threads::spawn_recorded("conn", move || serve(conn, &surface));
        if let Err(e) = spawned {
            eprintln!("embed: cannot start a connection thread: {e}");
        }
    }
}

/// The labelled work: hashing in a loop, with a small allocation now and then for the heap profile.
fn busy() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    loop {
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.rotate_left(5) ^ i).wrapping_mul(0x100_0000_01b3);
        }
        std::hint::black_box(vec![x; 64]);
    }
}

/// Reads one request, answers it, closes the connection.
fn serve(mut conn: TcpStream, surface: &PullSurface) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let answer = match read_request(&mut conn) {
        Ok((method, target, body)) => route(surface, &method, &target, &body),
        Err(status) => text(status, "bad request\n"),
    };
    let _ = write_response(&mut conn, &answer);
}

/// The method, the target and the body of one request; the error is the status to answer.
fn read_request(conn: &mut TcpStream) -> Result<(String, String, Vec<u8>), u16> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head_len)) = req.parse(&buf) {
            let length = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .unwrap_or(Some(0))
                .filter(|&n| n <= MAX_BODY)
                .ok_or(400u16)?;
            let method = req.method.unwrap_or("GET").to_string();
            let target = req.path.unwrap_or("/").to_string();
            let mut body = buf[head_len..].to_vec();
            while body.len() < length {
                let n = conn.read(&mut chunk).map_err(|_| 400u16)?;
                if n == 0 {
                    return Err(400);
                }
                body.extend_from_slice(&chunk[..n]);
            }
            body.truncate(length);
            return Ok((method, target, body));
        }
        if buf.len() > MAX_HEAD {
            return Err(431);
        }
        let n = conn.read(&mut chunk).map_err(|_| 400u16)?;
        if n == 0 {
            return Err(400);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `/debug/pprof/…` goes to the surface; anything else is a 404.
fn route(surface: &PullSurface, method: &str, target: &str, body: &[u8]) -> PullResponse {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let Some(below) = path.strip_prefix(MOUNT) else {
        return text(404, "not found: the profiles are under /debug/pprof/\n");
    };
    let req = PullRequest {
        method,
        path: below,
        query,
        body,
    };
    // No reason of this service's own to cut a timed request short.
    surface.handle(&req, &|| None)
}

fn text(status: u16, body: &str) -> PullResponse {
    let mut r = nl6_profile::pull::serve_error(status, body.trim_end());
    r.headers.clear();
    r
}

fn write_response(conn: &mut TcpStream, r: &PullResponse) -> std::io::Result<()> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        r.content_type,
        r.body.len()
    );
    for (name, value) in &r.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    conn.write_all(&r.body)?;
    conn.flush()
}
