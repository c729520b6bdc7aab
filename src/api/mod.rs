//! Every HTTP route of nl6, in one function: [`route`] maps `(method, path)` to a [`Route`], and
//! [`Api::handle`] turns a [`Request`] into a [`Response`] through it.
//!
//! Surfaces: the profiling gate's REST ([`rest`], `/api/v1/profiling`, JSON) and the pull surface
//! ([`pprof`], `/debug/pprof/…`: the engine's [`nl6_profile::pull`] behind the gate). The web console's
//! routes (`/` and the flame graph) are named here and served by the handler given to
//! [`Api::with_console`] (`crate::console`, which sits above this module). Other surfaces (the fleet's
//! `/api/v1/devices` and `/api/v1/scenarios`) mount through [`Api::with_extension`]: the extension is
//! asked after the built-in routes and before the 404.
//!
//! Before any route, a request passes the [`browser`] checks (Host, Origin, Content-Type) when the
//! composition root gives a policy ([`Api::with_browser_policy`]; the binary always does).
//!
//! Handlers take request values and return response values; only the server touches sockets.
#![forbid(unsafe_code)]

pub mod browser;
pub mod dumps;
pub mod pprof;
pub mod rest;

use crate::gate::control::Gate;
use crate::http::{Request, Response};
use nl6_profile::pull::{self, CpuHook, PullRoute, PullSurface};

/// The flame graph's path (a console route).
pub const FLAMEGRAPH_PATH: &str = "/api/v1/profiling/flamegraph.svg";

/// The wall-clock profile's path, as fgprof mounts it (also served as `/debug/pprof/fgprof`).
pub const FGPROF_PATH: &str = "/debug/fgprof";

/// The console's routes, as [`route`] resolves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRoute {
    /// `GET`/`HEAD /`: the page.
    Page,
    /// `GET`/`HEAD /api/v1/profiling/flamegraph.svg`.
    Flamegraph,
    /// Another method on either path (405, JSON).
    MethodNotAllowed,
}

/// What serves the console's routes (given by the composition root).
pub type ConsoleHandler = dyn Fn(ConsoleRoute, &Request) -> Response + Send + Sync;

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
    Pprof(PullRoute),
    /// The web console: `/` (the page) and `/api/v1/profiling/flamegraph.svg` (see [`ConsoleHandler`]).
    Console(ConsoleRoute),
    /// Not a built-in route: the extension, then 404.
    Other,
}

/// The routing table. Every route nl6 serves is listed here.
pub fn route(method: &str, path: &str) -> Route {
    use ConsoleRoute as C;
    let get = matches!(method, "GET" | "HEAD");
    match (method, path) {
        // The console: the page and the last CPU profile's flame graph; not gated.
        (_, "/") if get => Route::Console(C::Page),
        (_, FLAMEGRAPH_PATH) if get => Route::Console(C::Flamegraph),
        (_, "/" | FLAMEGRAPH_PATH) => Route::Console(C::MethodNotAllowed),
        (_, "/api/v1/profiling") if get => Route::ProfilingGet,
        ("POST", "/api/v1/profiling") => Route::ProfilingPost,
        (_, "/api/v1/profiling") => Route::ProfilingMethodNotAllowed,
        (_, "/debug/pprof") => Route::PprofRedirect,
        (_, "/debug/pprof/cmdline") => Route::PprofCmdline,
        // fgprof's own mount point (where Alloy's `profile.fgprof` scrapes), served as the table's `fgprof`.
        (_, FGPROF_PATH) => Route::Pprof(pull::route(method, "fgprof")),
        // The rest of /debug/pprof/ is the engine's table.
        (_, p) => match p.strip_prefix("/debug/pprof/") {
            Some(name) => Route::Pprof(pull::route(method, name)),
            // MOUNT POINT: the fleet's /api/v1/devices and /api/v1/scenarios are served by
            // the extension given to `Api::with_extension` (asked for every `Route::Other`).
            None => Route::Other,
        },
    }
}

/// An error in the shape of the surface `path` belongs to: JSON `{"error": …}` under `/api/`, plain
/// text elsewhere (as the pull surface's errors are).
pub fn error_for(path: &str, status: u16, message: &str) -> Response {
    if path.starts_with("/api/") {
        rest::error(status, message)
    } else {
        Response::new(status, "text/plain; charset=utf-8", format!("{message}\n"))
    }
}

/// A surface mounted beside the built-in routes: answers `Some` for its own paths.
pub type Extension = dyn Fn(&Request) -> Option<Response> + Send + Sync;

/// The request handler the server runs: the gate, the pull surface's state, the console and an optional
/// extension.
pub struct Api {
    gate: Gate,
    pull: PullSurface,
    console: Option<Box<ConsoleHandler>>,
    extension: Option<Box<Extension>>,
    browser: Option<browser::BrowserPolicy>,
    dumps: dumps::DumpQueue,
}

impl Api {
    /// The built-in routes over `gate` (no console: its routes answer 404 until one is given).
    pub fn new(gate: Gate) -> Api {
        Api {
            gate,
            pull: PullSurface::new(),
            console: None,
            extension: None,
            browser: None,
            dumps: dumps::DumpQueue::default(),
        }
    }

    /// Serves the console's routes with `console`.
    pub fn with_console(mut self, console: Box<ConsoleHandler>) -> Api {
        self.console = Some(console);
        self
    }

    /// Hands every CPU profile the pull surface serves to `hook` (the console keeps the last one).
    pub fn on_cpu_profile(mut self, hook: CpuHook) -> Api {
        self.pull = std::mem::take(&mut self.pull).on_cpu_profile(hook);
        self
    }

    /// Hands every wall-clock profile the pull surface serves to `hook` (the console keeps the last one).
    pub fn on_wall_profile(mut self, hook: CpuHook) -> Api {
        self.pull = std::mem::take(&mut self.pull).on_wall_profile(hook);
        self
    }

    /// Mounts another surface (fleet REST, console): asked for paths the built-in routes do not know.
    pub fn with_extension(mut self, extension: Box<Extension>) -> Api {
        self.extension = Some(extension);
        self
    }

    /// Refuses, before any route, what `policy` says a browser must not do (see [`browser`]).
    pub fn with_browser_policy(mut self, policy: browser::BrowserPolicy) -> Api {
        self.browser = Some(policy);
        self
    }

    /// The gate this API controls.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Answers one request.
    pub fn handle(&self, req: &Request) -> Response {
        if let Some(refusal) = self.browser.as_ref().and_then(|p| p.refuse(req)) {
            return refusal;
        }
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
                    // Thread dumps take turns, each waiting a bounded time (see `dumps`).
                    let _turn = match r {
                        PullRoute::Profile(e) if e.name == "goroutine" => {
                            match self.dumps.admit() {
                                Ok(turn) => Some(turn),
                                Err(refused) => return pprof::dumps_busy(&refused),
                            }
                        }
                        _ => None,
                    };
                    let gate_open = || self.gate.open_epoch() == Some(epoch);
                    pprof::serve(&self.pull, r, req, &gate_open)
                }
            },
            Route::Console(r) => match &self.console {
                Some(console) => console(r, req),
                None => rest::not_found(&req.path),
            },
            Route::Other => match self.extension.as_ref().and_then(|ext| ext(req)) {
                Some(resp) => resp,
                None => rest::not_found(&req.path),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nl6_profile::pull::PullRoute as P;
    use ConsoleRoute as C;

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
            ("GET", "/debug/fgprof", Route::Pprof(P::Wall)),
            ("GET", "/debug/pprof/fgprof", Route::Pprof(P::Wall)),
            ("POST", "/debug/fgprof", Route::Pprof(P::MethodNotAllowed)),
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
        for entry in pull::PROFILES {
            let path = format!("/debug/pprof/{}", entry.name);
            match route("GET", &path) {
                Route::Pprof(P::Profile(e)) => assert_eq!(e.name, entry.name),
                Route::Pprof(P::Cpu | P::Wall | P::Symbol) => {}
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
