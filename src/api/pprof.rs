//! # The pull surface: `/debug/pprof/`
//!
//! nl6 serves Go's `net/http/pprof` surface (plus godeltaprof's three delta endpoints) from its own
//! in-process profiler, so `go tool pprof`, Grafana Alloy's `pyroscope.scrape` and curl read it as they
//! would read a Go program. It is mounted at the root, not under `/api/v1`.
//!
//! ## The gate rule
//! Every path under `/debug/pprof/` answers **503** while the profiling gate is closed (the default) or
//! closing (from the moment a close begins, through the push's flush), with a body saying how to open it:
//! `POST /api/v1/profiling` with `{"enabled":true}` (add `"server_address":""` for pull-only), or start
//! nl6 with `-profiling-pyroscope URL`. The 503 carries
//! `X-Go-Pprof: 1`, so `go tool pprof` prints that text. `/debug/pprof/cmdline` is **never** served (404
//! open or closed): the command line can carry `-profiling-pyroscope-basic-auth`. `/debug/pprof`
//! redirects to `/debug/pprof/`.
//!
//! ## Routes (gate open)
//! | path | what | parameters |
//! |---|---|---|
//! | `/debug/pprof/` | HTML index: every profile, its count and description | |
//! | `profile` | CPU profile for `seconds` (default 30; missing, bad or ≤ 0 → 30; > 300 → 400) | `seconds` |
//! | `heap` | sampled live and past allocations (`inuse_space` shown by default) | `gc` (accepted, no effect), `debug`, `seconds` |
//! | `allocs` | the same data, `alloc_space` shown by default | `debug`, `seconds` |
//! | `goroutine` | the stack of every thread (nl6's goroutines are OS threads) | `debug=1` counts, `debug=2` every thread, `seconds` |
//! | `threadcreate` | where threads were spawned | `debug`, `seconds` |
//! | `block`, `mutex` | always valid and empty: nl6 records no contention | `debug`, `seconds` |
//! | `delta_heap` | allocations since the previous request to this path (first: since start); in-use absolute | `gc` (no effect) |
//! | `delta_block`, `delta_mutex` | contention since the previous request (always empty) | |
//! | `symbol` | `GET` → `num_symbols: 1`; `GET ?0x…+0x…` or `POST` a `+`-separated body → `0x… name` lines | |
//! | `trace` | 404: nl6 has no execution tracer | |
//!
//! `seconds=N` on heap, allocs, goroutine, threadcreate, block and mutex returns the difference between
//! two snapshots N seconds apart (`filename="<name>-delta"`), as Go does; with `debug` it is a 400
//! (`seconds and debug params are incompatible`); a value that is not a positive integer is a 400
//! (`invalid value for "seconds" - must be a positive integer`); above 300 it is a 400 naming the limit.
//!
//! Only one CPU profile runs at a time, and the push takes one per upload window: while either runs,
//! `profile` answers **500** `Could not enable CPU profiling: cpu profiling already in use` (never an empty
//! profile that would look like an idle process). To scrape CPU, open the gate pull-only. At most 8 timed
//! requests (`profile`, `?seconds=N`) run at once; more answer 503, so they cannot take every server worker.
//!
//! A timed request (`profile`, `?seconds=N`) looks every 100 ms at its client and at the gate. When the
//! client has gone away (closed or half-closed its connection) it ends at once, as Go's handler does when
//! the request's context is done: the CPU sampler is stopped and freed, the timed slot given back, and
//! the answer is Go's **500** `context canceled` (nobody reads it). When the gate closes (or closes and
//! reopens) while it runs, it ends within 100 ms with **503** `profiling gate closed while the profile
//! ran …`: nothing profiled is served after a close, not even the part taken before it.
//!
//! `HEAD` runs the handler as Go does (a `HEAD` on `delta_heap` advances its state; on `profile` it profiles);
//! only the body is left out.
//!
//! Unlike Go before 1.23 (which refused `seconds` ≥ the server's 30 s write timeout), the write deadline
//! is extended by the profiling time, as Go 1.23+ does.
//!
//! ## Headers
//! Profiles: `Content-Type: application/octet-stream`, `Content-Disposition: attachment;
//! filename="<name>"`. Text: `text/plain; charset=utf-8`. Errors: `text/plain; charset=utf-8` and
//! `X-Go-Pprof: 1`, body = message + newline. Every response: `X-Content-Type-Options: nosniff` (added by
//! the server, for every surface).
//!
//! ## Examples
//! ```text
//! curl -s -X POST localhost:8080/api/v1/profiling -d '{"enabled":true,"server_address":""}'
//! go tool pprof -top http://localhost:8080/debug/pprof/heap
//! go tool pprof -top http://localhost:8080/debug/pprof/profile?seconds=10
//! go tool pprof -seconds 30 http://localhost:8080/debug/pprof/allocs      # a 30 s allocation delta
//! curl -s localhost:8080/debug/pprof/goroutine?debug=2
//! curl -s -o heap.pb.gz localhost:8080/debug/pprof/delta_heap
//! ```
//!
//! Never opens a socket; handlers take a request value and return a response value.
#![forbid(unsafe_code)]

use super::pprof_engine as engine;
use crate::http::{Request, Response};
use nl6_profile::delta::{ContentionDelta, HeapDelta};
use nl6_profile::heap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest `seconds` accepted on `profile` and on `?seconds=N` deltas.
pub const MAX_SECONDS: i64 = 300;
/// CPU profile length when `seconds` is missing, unparsable or ≤ 0 (Go's default).
pub const DEFAULT_CPU_SECONDS: i64 = 30;
/// Timed requests allowed at once.
pub const MAX_TIMED: usize = 8;
/// How often a timed request looks at its client and the gate.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Whether the gate is still open for the request in progress (false from the moment a close begins).
pub type GateOpen<'a> = &'a dyn Fn() -> bool;

/// Why a timed request ended before its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    ClientGone,
    GateClosed,
}

impl Cut {
    fn response(self) -> Response {
        match self {
            // Go's text for a request whose context was cancelled; the client is gone anyway.
            Cut::ClientGone => serve_error(500, "context canceled"),
            Cut::GateClosed => serve_error(
                503,
                "profiling gate closed while the profile ran: nothing profiled is served after the gate \
                 closes; open it again (POST /api/v1/profiling) and repeat the request",
            ),
        }
    }
}

/// Waits `total`, looking at the gate and the client every [`WATCH_EVERY`]; the gate is looked at last
/// before `Ok`, so a profile is never served across a close.
fn wait_out(total: Duration, req: &Request, gate_open: GateOpen) -> Result<(), Cut> {
    let end = Instant::now() + total;
    loop {
        if !gate_open() {
            return Err(Cut::GateClosed);
        }
        if req.client.gone() {
            return Err(Cut::ClientGone);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(WATCH_EVERY));
    }
}

/// What a profile path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Heap,
    Allocs,
    Goroutine,
    ThreadCreate,
    Block,
    Mutex,
    DeltaHeap,
    DeltaBlock,
    DeltaMutex,
    Symbol,
}

/// One row of the profile table: the index page, the routes and `seconds` support come from it.
#[derive(Debug, PartialEq, Eq)]
pub struct ProfileEntry {
    pub name: &'static str,
    pub kind: Kind,
    /// Whether `?seconds=N` gives a delta (Go's `profileSupportsDelta`).
    pub delta: bool,
    pub description: &'static str,
}

/// Every profile the surface serves, sorted by name (the index order).
pub const PROFILES: &[ProfileEntry] = &[
    ProfileEntry { name: "allocs", kind: Kind::Allocs, delta: true, description: "A sampling of all past memory allocations." },
    ProfileEntry { name: "block", kind: Kind::Block, delta: true, description: "Stack traces that led to blocking on synchronization primitives. Always empty: nl6 records no contention." },
    ProfileEntry { name: "delta_block", kind: Kind::DeltaBlock, delta: false, description: "Block profile since the previous request to this path (godeltaprof). Always empty." },
    ProfileEntry { name: "delta_heap", kind: Kind::DeltaHeap, delta: false, description: "Allocations since the previous request to this path, in-use memory absolute (godeltaprof). The first request is cumulative." },
    ProfileEntry { name: "delta_mutex", kind: Kind::DeltaMutex, delta: false, description: "Mutex profile since the previous request to this path (godeltaprof). Always empty." },
    ProfileEntry { name: "goroutine", kind: Kind::Goroutine, delta: true, description: "Stack traces of all current threads (nl6's goroutines). Use debug=2 as a query parameter to print every thread." },
    ProfileEntry { name: "heap", kind: Kind::Heap, delta: true, description: "A sampling of memory allocations of live objects. The gc GET parameter is accepted and has no effect (nl6 has no garbage collector)." },
    ProfileEntry { name: "mutex", kind: Kind::Mutex, delta: true, description: "Stack traces of holders of contended mutexes. Always empty: nl6 records no contention." },
    ProfileEntry { name: "profile", kind: Kind::Cpu, delta: false, description: "CPU profile. Set the duration with the seconds GET parameter (default 30, at most 300). Read the file with go tool pprof." },
    ProfileEntry { name: "symbol", kind: Kind::Symbol, delta: false, description: "Maps program counters to function names: counters in a GET raw query or a POST body, separated by +." },
    ProfileEntry { name: "threadcreate", kind: Kind::ThreadCreate, delta: true, description: "Stack traces that led to the creation of new OS threads." },
];

/// The entry for a profile name.
pub fn lookup(name: &str) -> Option<&'static ProfileEntry> {
    PROFILES.iter().find(|e| e.name == name)
}

/// A route under `/debug/pprof/` (cmdline and the redirect are routed before the gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PprofRoute {
    Index,
    Cpu,
    Symbol,
    Trace,
    Profile(&'static ProfileEntry),
    /// A name not in [`PROFILES`].
    Unknown,
    /// A method other than GET/HEAD (POST is allowed on `symbol` only).
    MethodNotAllowed,
}

/// The pull surface's own state: the godeltaprof previous snapshots (one per endpoint) and the count of
/// timed requests in flight.
#[derive(Default)]
pub struct PullSurface {
    delta_heap: HeapDelta,
    delta_block: ContentionDelta,
    delta_mutex: ContentionDelta,
    timed: AtomicUsize,
}

/// Go's `serveError`: text, `X-Go-Pprof: 1`, message + newline.
pub fn serve_error(status: u16, msg: &str) -> Response {
    Response::new(status, "text/plain; charset=utf-8", format!("{msg}\n")).header("X-Go-Pprof", "1")
}

fn attachment(filename: &str, body: Vec<u8>) -> Response {
    Response::new(200, "application/octet-stream", body).header(
        "Content-Disposition",
        &format!("attachment; filename=\"{filename}\""),
    )
}

fn text(body: String) -> Response {
    Response::new(200, "text/plain; charset=utf-8", body)
}

/// The 503 every gated path answers while the gate is closed.
pub fn closed(req: &Request) -> Response {
    let host = req
        .header("host")
        .filter(|h| !h.is_empty())
        .unwrap_or("localhost:8080");
    serve_error(
        503,
        &format!(
            "profiling is off: /debug/pprof/ is served only while the profiling gate is open. Open it with \
             POST /api/v1/profiling (curl -X POST {host}/api/v1/profiling -d '{{\"enabled\":true,\"server_address\":\"\"}}') \
             or start nl6 with -profiling-pyroscope URL"
        ),
    )
}

/// `/debug/pprof/cmdline`: never served.
pub fn cmdline() -> Response {
    serve_error(
        404,
        "/debug/pprof/cmdline is not served by nl6: the command line can carry -profiling-pyroscope-basic-auth",
    )
}

/// `/debug/pprof` → `/debug/pprof/` (query kept).
pub fn redirect(req: &Request) -> Response {
    let location = if req.query.is_empty() {
        "/debug/pprof/".to_string()
    } else {
        format!("/debug/pprof/?{}", req.query)
    };
    Response::new(
        301,
        "text/html; charset=utf-8",
        format!("<a href=\"{location}\">Moved Permanently</a>.\n"),
    )
    .header("Location", &location)
}

/// Decrements the timed-request count when the request ends (even by panic).
struct TimedSlot<'a>(&'a AtomicUsize);

impl Drop for TimedSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PullSurface {
    /// Serves a gated route (the gate is open). A timed request ends early when `gate_open` turns false.
    pub fn handle(&self, route: PprofRoute, req: &Request, gate_open: GateOpen) -> Response {
        match route {
            PprofRoute::Index => index(),
            PprofRoute::Cpu => self.cpu(req, gate_open),
            PprofRoute::Symbol => symbol(req),
            PprofRoute::Trace => serve_error(
                404,
                "nl6 has no execution tracer: /debug/pprof/trace is Go-only; use profile (CPU) or goroutine instead",
            ),
            PprofRoute::Unknown => serve_error(404, "Unknown profile"),
            PprofRoute::MethodNotAllowed => {
                Response::new(405, "text/plain; charset=utf-8", "Method Not Allowed\n").header("Allow", "GET, HEAD")
            }
            PprofRoute::Profile(entry) => self.named(entry, req, gate_open),
        }
    }

    fn take_timed_slot(&self) -> Option<TimedSlot<'_>> {
        if self.timed.fetch_add(1, Ordering::SeqCst) >= MAX_TIMED {
            self.timed.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(TimedSlot(&self.timed))
    }

    fn too_many() -> Response {
        serve_error(
            503,
            &format!("too many timed profile requests at once (at most {MAX_TIMED}); retry later"),
        )
    }

    fn cpu(&self, req: &Request, gate_open: GateOpen) -> Response {
        let seconds = req
            .query_param("seconds")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_CPU_SECONDS);
        if seconds > MAX_SECONDS {
            return serve_error(
                400,
                &format!("seconds={seconds} exceeds nl6's limit of {MAX_SECONDS} seconds"),
            );
        }
        let Some(_slot) = self.take_timed_slot() else {
            return Self::too_many();
        };
        let session = match engine::cpu_start() {
            Ok(s) => s,
            // Busy (another profile, or the push's window) and OS refusals alike; never an empty profile.
            Err(e) => return serve_error(500, &format!("Could not enable CPU profiling: {e}")),
        };
        if let Err(cut) = wait_out(Duration::from_secs(seconds as u64), req, gate_open) {
            drop(session); // stops sampling: no collector thread, no timer
            return cut.response();
        }
        let body = engine::cpu_encode(session);
        // The console's flame graph shows the last CPU profile served (issue 7).
        crate::console::remember_cpu_profile(&body);
        let mut r = attachment("profile", body);
        r.extra_write_time = Duration::from_secs(seconds as u64);
        r
    }

    fn named(&self, entry: &'static ProfileEntry, req: &Request, gate_open: GateOpen) -> Response {
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
            return self.delta(entry, &seconds, debug != 0, req, gate_open);
        }
        if debug != 0 {
            return text(engine::text(entry.kind, debug));
        }
        attachment(entry.name, engine::proto(entry.kind))
    }

    /// Go's `serveDeltaProfile`, checks in Go's order.
    fn delta(
        &self,
        entry: &'static ProfileEntry,
        seconds: &str,
        debug: bool,
        req: &Request,
        gate_open: GateOpen,
    ) -> Response {
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
                &format!("seconds={seconds} exceeds nl6's limit of {MAX_SECONDS} seconds"),
            );
        }
        if debug {
            return serve_error(400, "seconds and debug params are incompatible");
        }
        let Some(_slot) = self.take_timed_slot() else {
            return Self::too_many();
        };
        let first = engine::snapshot(entry.kind);
        let started = Instant::now();
        if let Err(cut) = wait_out(Duration::from_secs(seconds as u64), req, gate_open) {
            return cut.response();
        }
        let body = engine::delta_since(entry.kind, first, started.elapsed());
        let mut r = attachment(&format!("{}-delta", entry.name), body);
        r.extra_write_time = Duration::from_secs(seconds as u64);
        r
    }
}

/// The index page, generated from [`PROFILES`].
fn index() -> Response {
    let mut rows = String::new();
    let mut descriptions = String::new();
    for e in PROFILES {
        let count = engine::count(e.kind);
        let link = match e.kind {
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
    Response::new(200, "text/html; charset=utf-8", body)
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
}

/// `/debug/pprof/symbol`: Go's format, always 200.
fn symbol(req: &Request) -> Response {
    let input = if req.method == "POST" {
        String::from_utf8_lossy(&req.body).into_owned()
    } else {
        req.query.clone()
    };
    let mut out = String::from("num_symbols: 1\n");
    for word in input.split('+') {
        let Some(addr) = parse_uint_auto(word.trim()) else {
            continue;
        };
        if addr == 0 {
            continue;
        }
        if let Some(name) = engine::symbolize(addr) {
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
#[path = "pprof_tests.rs"]
mod tests;
