//! # Go's `net/http/pprof` pull surface, as values
//!
//! [`PullSurface::handle`] takes a [`PullRequest`] (method, the path below the mount point such as
//! `heap` or `profile`, the raw query, the body) and returns a [`PullResponse`] (status, headers, body).
//! It opens no socket and knows no server: mount it at `/debug/pprof/` in whatever serves HTTP, and
//! `go tool pprof`, Grafana Alloy's `pyroscope.scrape` and curl read it as they read a Go program
//! (plus godeltaprof's three delta endpoints).
//!
//! ## Routes
//! | path | what | parameters |
//! |---|---|---|
//! | `` (the mount point itself) | HTML index: every profile, its count and description | |
//! | `profile` | CPU profile for `seconds` (default 30; missing, bad or ≤ 0 → 30; > 300 → 400) | `seconds` |
//! | `fgprof` | wall-clock profile of every thread for `seconds`, fgprof's shape and rules (default 30; bad or ≤ 0 → 400; > 300 → 400); also mount it at `/debug/fgprof`, where Alloy's `profile.fgprof` looks | `seconds` |
//! | `heap` | sampled live and past allocations (`inuse_space` shown by default) | `gc` (accepted, no effect), `debug`, `seconds` |
//! | `allocs` | the same data, `alloc_space` shown by default | `debug`, `seconds` |
//! | `goroutine` | the stack of every thread (a Rust program's goroutines are OS threads) | `debug=1` counts, `debug=2` every thread, `seconds` |
//! | `threadcreate` | where threads were spawned | `debug`, `seconds` |
//! | `block`, `mutex` | always valid and empty: the engine records no contention | `debug`, `seconds` |
//! | `delta_heap` | allocations since the previous request to this path (first: since start); in-use absolute | `gc` (no effect) |
//! | `delta_block`, `delta_mutex` | contention since the previous request (always empty) | |
//! | `symbol` | `GET` → `num_symbols: 1`; `GET ?0x…+0x…` or `POST` a `+`-separated body → `0x… name` lines | |
//! | `trace` | 404: there is no execution tracer | |
//!
//! `cmdline` is not in the table (404 `Unknown profile`): a command line can carry secrets.
//!
//! `seconds=N` on heap, allocs, goroutine, threadcreate, block and mutex returns the difference between
//! two snapshots N seconds apart (`filename="<name>-delta"`), as Go does; with `debug` it is a 400
//! (`seconds and debug params are incompatible`); a value that is not a positive integer is a 400
//! (`invalid value for "seconds" - must be a positive integer`); above 300 it is a 400 naming the limit.
//!
//! Only one CPU profile runs at a time (see [`crate::cpu::start`]): while another runs, `profile` answers
//! **500** `Could not enable CPU profiling: cpu profiling already in use` (never an empty profile that
//! would look like an idle process); `fgprof` likewise, one wall-clock session at a time ([`crate::wall`]). At most 8 timed requests (`profile`, `?seconds=N`) run at once; more
//! answer 503, so they cannot take every thread of a server.
//!
//! A timed request asks its [`Watch`] every 100 ms whether to go on; the caller's watch ends it with
//! the answer it returns ([`client_gone`] when the client has left, as Go's handler ends when the
//! request's context is done; a server may end it for its own reasons). The CPU sampler is then stopped
//! and freed and the timed slot given back. `HEAD` runs the handler as Go does (a `HEAD` on `delta_heap`
//! advances its state; on `profile` it profiles). A timed answer's [`PullResponse::extra_write_time`]
//! says how much longer than usual the server should allow for writing it (Go 1.23+ extends the write
//! deadline by the profiling time).
//!
//! ## Headers
//! Profiles: `Content-Type: application/octet-stream`, `Content-Disposition: attachment;
//! filename="<name>"`. Text: `text/plain; charset=utf-8`. Errors: `text/plain; charset=utf-8` and
//! `X-Go-Pprof: 1` (so `go tool pprof` prints the text), body = message + newline.
//!
//! Invariant: no socket, no server, no global state but the engine's samplers; the table [`PROFILES`]
//! is the one place the index, the routes and `seconds` support come from.
#![forbid(unsafe_code)]

mod profiles;
mod task;
mod wall;

use crate::delta::{ContentionDelta, HeapDelta};
use crate::heap;
pub(crate) use profiles::Kind;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
pub use task::PullFuture;

/// Longest `seconds` accepted on `profile` and on `?seconds=N` deltas.
pub const MAX_SECONDS: i64 = 300;
/// CPU profile length when `seconds` is missing, unparsable or ≤ 0 (Go's default).
pub const DEFAULT_CPU_SECONDS: i64 = 30;
/// Timed requests allowed at once.
pub const MAX_TIMED: usize = 8;
/// How often a timed request asks its [`Watch`].
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// A request to the surface: everything it reads, as values.
#[derive(Debug, Clone, Copy)]
pub struct PullRequest<'a> {
    /// `GET`, `HEAD` or `POST` (`symbol` only); others are 405.
    pub method: &'a str,
    /// The path below the mount point: `""` (the index), `heap`, `profile`, …
    pub path: &'a str,
    /// The raw query, without `?` (percent-encoded as it came).
    pub query: &'a str,
    /// The body (read by `POST symbol` only).
    pub body: &'a [u8],
}

impl<'a> PullRequest<'a> {
    /// A request as a server received it: method, path below the mount point, raw query, body.
    pub fn new(method: &'a str, path: &'a str, query: &'a str, body: &'a [u8]) -> PullRequest<'a> {
        PullRequest {
            method,
            path,
            query,
            body,
        }
    }

    /// A `GET` of `path` (below the mount point) with `query`.
    pub fn get(path: &'a str, query: &'a str) -> PullRequest<'a> {
        PullRequest {
            method: "GET",
            path,
            query,
            body: &[],
        }
    }

    /// The first query parameter named `name`, percent-decoded (`+` is a space).
    pub fn query_param(&self, name: &str) -> Option<String> {
        query_param(self.query, name)
    }
}

/// The first parameter named `name` of a raw query string, percent-decoded (`+` is a space). The one
/// query reader: nl6's HTTP requests use it too.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').filter(|kv| !kv.is_empty()).find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (percent_decode(k) == name).then(|| percent_decode(v))
    })
}

/// Decodes `%XX` escapes and `+`; an invalid escape is kept as it is.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The surface's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` header's value.
    pub content_type: &'static str,
    /// Headers besides `Content-Type` (`Content-Disposition`, `X-Go-Pprof`, `Allow`).
    pub headers: Vec<(&'static str, String)>,
    /// The response body.
    pub body: Vec<u8>,
    /// How long the request profiled: time a server should add to its write deadline for this answer.
    pub extra_write_time: Duration,
}

impl PullResponse {
    fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> PullResponse {
        PullResponse {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            extra_write_time: Duration::ZERO,
        }
    }

    fn with_header(mut self, name: &'static str, value: &str) -> PullResponse {
        self.headers.push((name, value.to_string()));
        self
    }

    /// The value of header `name` (case-insensitive; `content-type` included).
    pub fn header(&self, name: &str) -> Option<&str> {
        if name.eq_ignore_ascii_case("content-type") {
            return Some(self.content_type);
        }
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Asked every [`WATCH_EVERY`] while a timed request waits, and once more before it answers: `None`
/// to go on, `Some(answer)` to end the request with that answer (nothing sampled is then served).
pub type Watch<'a> = &'a dyn Fn() -> Option<PullResponse>;

/// The answer to a timed request whose client has left: Go's text for a cancelled request context
/// (nobody reads it).
pub fn client_gone() -> PullResponse {
    serve_error(500, "context canceled")
}

/// Go's `serveError`: text, `X-Go-Pprof: 1`, message + newline.
pub fn serve_error(status: u16, msg: &str) -> PullResponse {
    PullResponse::new(status, "text/plain; charset=utf-8", format!("{msg}\n"))
        .with_header("X-Go-Pprof", "1")
}

/// Waits `total`, asking `watch` every [`WATCH_EVERY`]; `watch` is asked last before `Ok`, so a profile
/// is never served across what it reports.
fn wait_out(total: Duration, watch: Watch) -> Result<(), PullResponse> {
    let end = Instant::now() + total;
    loop {
        if let Some(cut) = watch() {
            return Err(cut);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(WATCH_EVERY));
    }
}

/// One row of the profile table: the index page, the routes and `seconds` support come from it.
#[derive(Debug, PartialEq, Eq)]
pub struct ProfileEntry {
    /// The path below the mount point (`heap`, `profile`…).
    pub name: &'static str,
    pub(crate) kind: Kind,
    /// Whether `?seconds=N` gives a delta (Go's `profileSupportsDelta`).
    pub delta: bool,
    /// The index page's description of the profile (Go's wording where Go has the profile).
    pub description: &'static str,
}

/// Every profile the surface serves, sorted by name (the index order).
#[rustfmt::skip]
pub const PROFILES: &[ProfileEntry] = &[
    ProfileEntry { name: "allocs", kind: Kind::Allocs, delta: true, description: "A sampling of all past memory allocations." },
    ProfileEntry { name: "block", kind: Kind::Block, delta: true, description: "Stack traces that led to blocking on synchronization primitives. Always empty: this profiler records no contention." },
    ProfileEntry { name: "delta_block", kind: Kind::DeltaBlock, delta: false, description: "Block profile since the previous request to this path (godeltaprof). Always empty." },
    ProfileEntry { name: "delta_heap", kind: Kind::DeltaHeap, delta: false, description: "Allocations since the previous request to this path, in-use memory absolute (godeltaprof). The first request is cumulative." },
    ProfileEntry { name: "delta_mutex", kind: Kind::DeltaMutex, delta: false, description: "Mutex profile since the previous request to this path (godeltaprof). Always empty." },
    ProfileEntry { name: "fgprof", kind: Kind::Wall, delta: false, description: "Wall-clock profile of every thread, running or waiting (fgprof's shape; also at /debug/fgprof). Set the duration with the seconds GET parameter (default 30, at most 300)." },
    ProfileEntry { name: "goroutine", kind: Kind::Goroutine, delta: true, description: "Stack traces of all current threads (a Rust program's goroutines). Use debug=2 as a query parameter to print every thread." },
    ProfileEntry { name: "heap", kind: Kind::Heap, delta: true, description: "A sampling of memory allocations of live objects. The gc GET parameter is accepted and has no effect (a Rust program has no garbage collector)." },
    ProfileEntry { name: "mutex", kind: Kind::Mutex, delta: true, description: "Stack traces of holders of contended mutexes. Always empty: this profiler records no contention." },
    ProfileEntry { name: "profile", kind: Kind::Cpu, delta: false, description: "CPU profile. Set the duration with the seconds GET parameter (default 30, at most 300). Read the file with go tool pprof." },
    ProfileEntry { name: "symbol", kind: Kind::Symbol, delta: false, description: "Maps program counters to function names: counters in a GET raw query or a POST body, separated by +." },
    ProfileEntry { name: "threadcreate", kind: Kind::ThreadCreate, delta: true, description: "Stack traces that led to the creation of new OS threads." },
];

/// The entry for a profile name.
pub fn lookup(name: &str) -> Option<&'static ProfileEntry> {
    PROFILES.iter().find(|e| e.name == name)
}

/// What a request below the mount point asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PullRoute {
    /// The index page (`/debug/pprof/`).
    Index,
    /// `profile`: a CPU profile of `?seconds=N`.
    Cpu,
    /// `fgprof`: a wall-clock profile of `?seconds=N`.
    Wall,
    /// `symbol`: program counters to function names.
    Symbol,
    /// `trace`: Go's execution trace, answered 404 (there is no tracer).
    Trace,
    /// A profile from [`PROFILES`] other than `profile` and `symbol`.
    Profile(&'static ProfileEntry),
    /// A name not in [`PROFILES`].
    Unknown,
    /// A method other than GET/HEAD (POST is allowed on `symbol` only).
    MethodNotAllowed,
}

/// The route of `method` on `path` (below the mount point).
pub fn route(method: &str, path: &str) -> PullRoute {
    let get = matches!(method, "GET" | "HEAD");
    match path {
        "symbol" if get || method == "POST" => PullRoute::Symbol,
        _ if !get => PullRoute::MethodNotAllowed,
        "" => PullRoute::Index,
        "profile" => PullRoute::Cpu,
        "fgprof" => PullRoute::Wall,
        "trace" => PullRoute::Trace,
        name => lookup(name).map_or(PullRoute::Unknown, PullRoute::Profile),
    }
}

/// What a CPU profile served is handed to (the encoded profile), e.g. to keep it for a flame graph.
pub type CpuHook = Box<dyn Fn(&[u8]) + Send + Sync>;

/// The surface's own state: the godeltaprof previous snapshots (one per endpoint), the count of timed
/// requests in flight, and what is told of each CPU profile served.
#[derive(Default)]
pub struct PullSurface {
    delta_heap: HeapDelta,
    delta_block: ContentionDelta,
    delta_mutex: ContentionDelta,
    timed: AtomicUsize,
    on_cpu_profile: Option<CpuHook>,
    on_wall_profile: Option<CpuHook>,
}

fn attachment(filename: &str, body: Vec<u8>) -> PullResponse {
    PullResponse::new(200, "application/octet-stream", body).with_header(
        "Content-Disposition",
        &format!("attachment; filename=\"{filename}\""),
    )
}

fn text(body: String) -> PullResponse {
    PullResponse::new(200, "text/plain; charset=utf-8", body)
}

/// Decrements the timed-request count when the request ends (even by panic).
struct TimedSlot<'a>(&'a AtomicUsize);

impl Drop for TimedSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for PullSurface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullSurface")
            .field("timed_in_flight", &self.timed.load(Ordering::Relaxed))
            .field("on_cpu_profile", &self.on_cpu_profile.is_some())
            .finish_non_exhaustive()
    }
}

impl PullSurface {
    /// A surface with no CPU hook.
    pub fn new() -> PullSurface {
        PullSurface::default()
    }

    /// Hands every CPU profile served (encoded, as sent) to `hook` before it is answered.
    pub fn on_cpu_profile(mut self, hook: CpuHook) -> PullSurface {
        self.on_cpu_profile = Some(hook);
        self
    }

    /// Hands every wall-clock profile served (encoded, as sent) to `hook` before it is answered.
    pub fn on_wall_profile(mut self, hook: CpuHook) -> PullSurface {
        self.on_wall_profile = Some(hook);
        self
    }

    /// Answers one request: routes it ([`route`]) and serves it ([`PullSurface::serve`]).
    pub fn handle(&self, req: &PullRequest, watch: Watch) -> PullResponse {
        self.serve(route(req.method, req.path), req, watch)
    }

    /// Serves a request already routed. A timed request ends early with what `watch` returns.
    pub fn serve(&self, route: PullRoute, req: &PullRequest, watch: Watch) -> PullResponse {
        match route {
            PullRoute::Index => index(),
            PullRoute::Cpu => self.cpu(req, watch),
            PullRoute::Wall => self.wall(req, watch),
            PullRoute::Symbol => symbol(req),
            PullRoute::Trace => serve_error(
                404,
                "no execution tracer here: /debug/pprof/trace is Go-only; use profile (CPU) or goroutine instead",
            ),
            PullRoute::Unknown => serve_error(404, "Unknown profile"),
            PullRoute::MethodNotAllowed => {
                PullResponse::new(405, "text/plain; charset=utf-8", "Method Not Allowed\n")
                    .with_header("Allow", "GET, HEAD")
            }
            PullRoute::Profile(entry) => self.named(entry, req, watch),
        }
    }

    fn take_timed_slot(&self) -> Option<TimedSlot<'_>> {
        if self.timed.fetch_add(1, Ordering::SeqCst) >= MAX_TIMED {
            self.timed.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(TimedSlot(&self.timed))
    }

    fn too_many() -> PullResponse {
        serve_error(
            503,
            &format!("too many timed profile requests at once (at most {MAX_TIMED}); retry later"),
        )
    }

    fn cpu(&self, req: &PullRequest, watch: Watch) -> PullResponse {
        let seconds = req
            .query_param("seconds")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_CPU_SECONDS);
        if seconds > MAX_SECONDS {
            return serve_error(
                400,
                &format!("seconds={seconds} exceeds the limit of {MAX_SECONDS} seconds"),
            );
        }
        let Some(_slot) = self.take_timed_slot() else {
            return Self::too_many();
        };
        let session = match profiles::cpu_start() {
            Ok(s) => s,
            // Busy (another profile, or a push's window) and OS refusals alike; never an empty profile.
            Err(e) => return serve_error(500, &format!("Could not enable CPU profiling: {e}")),
        };
        if let Err(cut) = wait_out(Duration::from_secs(seconds as u64), watch) {
            drop(session); // stops sampling: no collector thread, no timer
            return cut;
        }
        let body = profiles::cpu_encode(session);
        if let Some(hook) = &self.on_cpu_profile {
            hook(&body);
        }
        let mut r = attachment("profile", body);
        r.extra_write_time = Duration::from_secs(seconds as u64);
        r
    }

    fn named(&self, entry: &'static ProfileEntry, req: &PullRequest, watch: Watch) -> PullResponse {
        let debug = req
            .query_param("debug")
            .and_then(|d| d.parse::<i64>().ok())
            .unwrap_or(0);
        match entry.kind {
            Kind::DeltaHeap => {
                return attachment("heap.pprof.gz", self.delta_heap.next(&heap::snapshot()))
            }
            Kind::DeltaBlock => return attachment("block.pprof.gz", self.delta_block.next()),
            Kind::DeltaMutex => return attachment("mutex.pprof.gz", self.delta_mutex.next()),
            _ => {}
        }
        if let Some(seconds) = req.query_param("seconds").filter(|s| !s.is_empty()) {
            return self.delta(entry, &seconds, debug != 0, watch);
        }
        if debug != 0 {
            return text(profiles::text(entry.kind, debug));
        }
        attachment(entry.name, profiles::proto(entry.kind))
    }

    /// Go's `serveDeltaProfile`, checks in Go's order.
    fn delta(
        &self,
        entry: &'static ProfileEntry,
        seconds: &str,
        debug: bool,
        watch: Watch,
    ) -> PullResponse {
        let seconds = match seconds.parse::<i64>() {
            Ok(n) if n > 0 => n,
            _ => {
                return serve_error(
                    400,
                    "invalid value for \"seconds\" - must be a positive integer",
                )
            }
        };
        if !entry.delta {
            return serve_error(
                400,
                "\"seconds\" parameter is not supported for this profile type",
            );
        }
        if seconds > MAX_SECONDS {
            return serve_error(
                400,
                &format!("seconds={seconds} exceeds the limit of {MAX_SECONDS} seconds"),
            );
        }
        if debug {
            return serve_error(400, "seconds and debug params are incompatible");
        }
        let Some(_slot) = self.take_timed_slot() else {
            return Self::too_many();
        };
        let first = profiles::snapshot(entry.kind);
        let started = Instant::now();
        if let Err(cut) = wait_out(Duration::from_secs(seconds as u64), watch) {
            return cut;
        }
        let body = profiles::delta_since(entry.kind, first, started.elapsed());
        let mut r = attachment(&format!("{}-delta", entry.name), body);
        r.extra_write_time = Duration::from_secs(seconds as u64);
        r
    }
}

/// The index page, generated from [`PROFILES`].
fn index() -> PullResponse {
    let mut rows = String::new();
    let mut descriptions = String::new();
    for e in PROFILES {
        let count = profiles::count(e.kind);
        let link = match e.kind {
            Kind::Wall => format!("{}?seconds=5", e.name),
            Kind::Cpu | Kind::Symbol | Kind::DeltaHeap | Kind::DeltaBlock | Kind::DeltaMutex => {
                e.name.to_string()
            }
            _ => format!("{}?debug=1", e.name),
        };
        let _ = writeln!(
            rows,
            "<tr><td>{count}</td><td><a href=\"{link}\">{}</a></td></tr>",
            e.name
        );
        let _ = writeln!(
            descriptions,
            "<li><div class=profile-name>{}: </div> {}</li>",
            e.name,
            html_escape(e.description)
        );
    }
    let body = format!(
        "<html>\n<head>\n<title>/debug/pprof/</title>\n<style>\n.profile-name{{\n\tdisplay:inline-block;\n\twidth:6rem;\n}}\n</style>\n</head>\n<body>\n\
         /debug/pprof/\n<br>\n<p>Set debug=1 as a query parameter to export in legacy text format</p>\n<br>\n\
         Types of profiles available:\n<table>\n<thead><td>Count</td><td>Profile</td></thead>\n{rows}</table>\n\
         <a href=\"goroutine?debug=2\">full goroutine stack dump</a>\n<br>\n<p>\nProfile Descriptions:\n<ul>\n{descriptions}</ul>\n</p>\n</body>\n</html>"
    );
    PullResponse::new(200, "text/html; charset=utf-8", body)
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
}

/// `/debug/pprof/symbol`: Go's format, always 200.
fn symbol(req: &PullRequest) -> PullResponse {
    let input = if req.method == "POST" {
        String::from_utf8_lossy(req.body).into_owned()
    } else {
        req.query.to_string()
    };
    let mut out = String::from("num_symbols: 1\n");
    for word in input.split('+') {
        let Some(addr) = parse_uint_auto(word.trim()) else {
            continue;
        };
        if addr == 0 {
            continue;
        }
        if let Some(name) = profiles::symbolize(addr) {
            let _ = writeln!(out, "{addr:#x} {name}");
        }
    }
    text(out)
}

/// Go's `ParseUint(s, 0, 64)`: `0x` hex, `0o`/leading-`0` octal, `0b` binary, else decimal.
fn parse_uint_auto(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    let lower = s.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        u64::from_str_radix(b, 2).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        u64::from_str_radix(o, 8).ok()
    } else if lower.len() > 1 && lower.starts_with('0') {
        u64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse().ok()
    }
}

#[cfg(test)]
mod tests;
