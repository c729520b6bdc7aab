//! Every HTTP route of nl6, in one function: [`route`] maps `(method, path)` to a [`Route`], and
//! [`Api::handle`] turns a [`Request`] into a [`Response`] through it.
//!
//! Surfaces: the profiling gate's REST ([`rest`], `/api/v1/profiling`, JSON) and the pull surface
//! ([`pprof`], `/debug/pprof/…`, Go's net/http/pprof shapes), and the web console ([`crate::console`],
//! `/` and the flame graph). Other surfaces (the fleet's `/api/v1/devices` and `/api/v1/scenarios`) mount
//! through [`Api::with_extension`]: the extension is asked after the built-in routes and before the 404.
//!
//! Handlers take request values and return response values; only the server touches sockets.
#![forbid(unsafe_code)]

pub mod pprof;
mod pprof_engine;
pub mod rest;

use crate::gate::control::Gate;
use crate::http::{Request, Response};

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET`/`HEAD /api/v1/profiling`.
    ProfilingGet,
    /// `POST /api/v1/profiling`.
    ProfilingPost,
    /// Another method on `/api/v1/profiling` (405, JSON).
    ProfilingMethodNotAllowed,
    /// `/debug/pprof` → `/debug/pprof/`.
    PprofRedirect,
    /// `/debug/pprof/cmdline`: never served (argv can carry the basic-auth secret), gate open or not.
    PprofCmdline,
    /// Anything else under `/debug/pprof/`: gated (503 while closed).
    Pprof(pprof::PprofRoute),
    /// The web console: `/` (the page) and `/api/v1/profiling/flamegraph.svg` (see [`crate::console`]).
    Console(crate::console::ConsoleRoute),
    /// Not a built-in route: the extension, then 404.
    Other,
}

/// The routing table. Every route nl6 serves is listed here.
pub fn route(method: &str, path: &str) -> Route {
    use crate::console::ConsoleRoute as C;
    use pprof::PprofRoute as P;
    let get = matches!(method, "GET" | "HEAD");
    match (method, path) {
        // The console (issue 7): the page and the last CPU profile's flame graph; not gated.
        (_, "/") if get => Route::Console(C::Page),
        (_, crate::console::FLAMEGRAPH_PATH) if get => Route::Console(C::Flamegraph),
        (_, "/" | crate::console::FLAMEGRAPH_PATH) => Route::Console(C::MethodNotAllowed),
        (_, "/api/v1/profiling") if get => Route::ProfilingGet,
        ("POST", "/api/v1/profiling") => Route::ProfilingPost,
        (_, "/api/v1/profiling") => Route::ProfilingMethodNotAllowed,
        (_, "/debug/pprof") => Route::PprofRedirect,
        (_, "/debug/pprof/cmdline") => Route::PprofCmdline,
        (_, "/debug/pprof/symbol") if get || method == "POST" => Route::Pprof(P::Symbol),
        (_, p) if p.starts_with("/debug/pprof/") && !get => Route::Pprof(P::MethodNotAllowed),
        (_, "/debug/pprof/") => Route::Pprof(P::Index),
        (_, "/debug/pprof/profile") => Route::Pprof(P::Cpu),
        (_, "/debug/pprof/trace") => Route::Pprof(P::Trace),
        (_, p) => match p.strip_prefix("/debug/pprof/") {
            Some(name) => Route::Pprof(pprof::lookup(name).map_or(P::Unknown, P::Profile)),
            // MOUNT POINT: the fleet's /api/v1/devices and /api/v1/scenarios are served by
            // the extension given to `Api::with_extension` (asked for every `Route::Other`).
            None => Route::Other,
        },
    }
}

/// A surface mounted beside the built-in routes: answers `Some` for its own paths.
pub type Extension = dyn Fn(&Request) -> Option<Response> + Send + Sync;

/// The request handler the server runs: the gate, the pull surface's state, and an optional extension.
pub struct Api {
    gate: Gate,
    pull: pprof::PullSurface,
    extension: Option<Box<Extension>>,
}

impl Api {
    /// The built-in routes over `gate`.
    pub fn new(gate: Gate) -> Api {
        Api {
            gate,
            pull: pprof::PullSurface::default(),
            extension: None,
        }
    }

    /// Mounts another surface (fleet REST, console): asked for paths the built-in routes do not know.
    pub fn with_extension(mut self, extension: Box<Extension>) -> Api {
        self.extension = Some(extension);
        self
    }

    /// The gate this API controls.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Answers one request.
    pub fn handle(&self, req: &Request) -> Response {
        match route(&req.method, &req.path) {
            Route::ProfilingGet => rest::get(&self.gate),
            Route::ProfilingPost => rest::post(&self.gate, req),
            Route::ProfilingMethodNotAllowed => rest::method_not_allowed(),
            Route::PprofRedirect => pprof::redirect(req),
            Route::PprofCmdline => pprof::cmdline(),
            // Closed, or a close in progress: 503. A timed request ends when the epoch it began in does.
            Route::Pprof(r) => match self.gate.open_epoch() {
                None => pprof::closed(req),
                Some(epoch) => {
                    let gate_open = || self.gate.open_epoch() == Some(epoch);
                    self.pull.handle(r, req, &gate_open)
                }
            },
            Route::Console(r) => crate::console::handle(r, req),
            Route::Other => match self.extension.as_ref().and_then(|ext| ext(req)) {
                Some(resp) => resp,
                None => rest::not_found(&req.path),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pprof::PprofRoute as P;
    use super::*;
    use crate::console::ConsoleRoute as C;

    #[test]
    fn routing_table() {
        let rows: &[(&str, &str, Route)] = &[
            ("GET", "/api/v1/profiling", Route::ProfilingGet),
            ("HEAD", "/api/v1/profiling", Route::ProfilingGet),
            ("POST", "/api/v1/profiling", Route::ProfilingPost),
            ("PUT", "/api/v1/profiling", Route::ProfilingMethodNotAllowed),
            (
                "DELETE",
                "/api/v1/profiling",
                Route::ProfilingMethodNotAllowed,
            ),
            ("GET", "/api/v1/profiling/", Route::Other),
            ("GET", "/debug/pprof", Route::PprofRedirect),
            ("GET", "/debug/pprof/cmdline", Route::PprofCmdline),
            ("POST", "/debug/pprof/cmdline", Route::PprofCmdline),
            ("GET", "/debug/pprof/", Route::Pprof(P::Index)),
            ("GET", "/debug/pprof/profile", Route::Pprof(P::Cpu)),
            ("HEAD", "/debug/pprof/profile", Route::Pprof(P::Cpu)),
            ("GET", "/debug/pprof/symbol", Route::Pprof(P::Symbol)),
            ("POST", "/debug/pprof/symbol", Route::Pprof(P::Symbol)),
            ("GET", "/debug/pprof/trace", Route::Pprof(P::Trace)),
            (
                "POST",
                "/debug/pprof/heap",
                Route::Pprof(P::MethodNotAllowed),
            ),
            ("DELETE", "/debug/pprof/", Route::Pprof(P::MethodNotAllowed)),
            ("GET", "/debug/pprof/heap/x", Route::Pprof(P::Unknown)),
            ("GET", "/debug/pprof/nope", Route::Pprof(P::Unknown)),
            ("GET", "/", Route::Console(C::Page)),
            ("HEAD", "/", Route::Console(C::Page)),
            ("POST", "/", Route::Console(C::MethodNotAllowed)),
            (
                "GET",
                "/api/v1/profiling/flamegraph.svg",
                Route::Console(C::Flamegraph),
            ),
            (
                "PUT",
                "/api/v1/profiling/flamegraph.svg",
                Route::Console(C::MethodNotAllowed),
            ),
            ("GET", "/index.html", Route::Other),
            ("GET", "/api/v1/devices", Route::Other),
        ];
        for (m, p, want) in rows {
            assert_eq!(route(m, p), *want, "{m} {p}");
        }
        for entry in pprof::PROFILES {
            let path = format!("/debug/pprof/{}", entry.name);
            match route("GET", &path) {
                Route::Pprof(P::Profile(e)) => assert_eq!(e.name, entry.name),
                Route::Pprof(P::Cpu | P::Symbol) => {}
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
