//! The web console: one HTML page served at `/` and the flame graph of the last CPU profile at
//! `/api/v1/profiling/flamegraph.svg`.
//!
//! The page (`page.html`, with `console.css` and `console.js` inlined into it once, at first use) is
//! embedded in the binary: no build step, no framework, no request leaves the page's origin (lab VMs are
//! offline). It drives the same REST and pull routes a script would use — `GET`/`POST
//! /api/v1/profiling`, `/debug/pprof/heap`, `/debug/pprof/profile?seconds=5`, and the fleet's
//! `/api/v1/devices` and `/api/v1/scenarios` when they answer — and shows the server's own error text.
//!
//! Owns one small slot: the last CPU profile the pull surface served ([`remember_cpu_profile`]) and the
//! SVG rendered from it (by [`crate::report::flamegraph_svg`], lazily, once per profile); the push
//! remembers each CPU window it encodes too. The flame graph is not gated: it only shows a profile
//! already taken while the gate was open. Never touches a socket.
#![forbid(unsafe_code)]

use crate::http::{Request, Response};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

/// The page's skeleton; `/*CONSOLE_CSS*/` and `/*CONSOLE_JS*/` are replaced by the two files below.
const PAGE_HTML: &str = include_str!("page.html");
const CONSOLE_CSS: &str = include_str!("console.css");
const CONSOLE_JS: &str = include_str!("console.js");

/// The flame graph's path (also listed in [`crate::api::route`]).
pub const FLAMEGRAPH_PATH: &str = "/api/v1/profiling/flamegraph.svg";

/// The console's routes, as [`crate::api::route`] resolves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRoute {
    /// `GET`/`HEAD /`: the page.
    Page,
    /// `GET`/`HEAD /api/v1/profiling/flamegraph.svg`.
    Flamegraph,
    /// Another method on either path (405, JSON).
    MethodNotAllowed,
}

/// Answers one console request.
pub fn handle(route: ConsoleRoute, req: &Request) -> Response {
    match route {
        ConsoleRoute::Page => page(),
        ConsoleRoute::Flamegraph => flamegraph(),
        ConsoleRoute::MethodNotAllowed => crate::api::rest::error(
            405,
            &format!("method {} not allowed on {}: use GET", req.method, req.path),
        )
        .header("Allow", "GET, HEAD"),
    }
}

/// The page with its stylesheet and script inlined (built once).
pub fn page_html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| {
        PAGE_HTML
            .replacen("/*CONSOLE_CSS*/", CONSOLE_CSS, 1)
            .replacen("/*CONSOLE_JS*/", CONSOLE_JS, 1)
    })
}

/// `GET /`.
pub fn page() -> Response {
    Response::new(200, "text/html; charset=utf-8", page_html())
        // The page is small and changes with the binary: always fetch it anew.
        .header("Cache-Control", "no-cache")
        .header("Referrer-Policy", "no-referrer")
}

/// The last CPU profile served, and its flame graph once rendered. One process-wide instance backs the
/// routes ([`remember_cpu_profile`], [`flamegraph`]); tests make their own.
pub struct CpuSlot(Mutex<LastCpu>);

struct LastCpu {
    /// Counts profiles remembered; an SVG is current when it was rendered from this one.
    generation: u64,
    profile: Option<Arc<Vec<u8>>>,
    taken_at: Option<SystemTime>,
    svg: Option<(u64, Arc<Vec<u8>>)>,
}

static LAST_CPU: CpuSlot = CpuSlot::new();

/// Keeps `pprof_gz` (an encoded CPU profile, gzipped or not) as the one the flame graph shows. Called by
/// the pull surface after each successful `/debug/pprof/profile`; cheap: one copy, no decoding.
pub fn remember_cpu_profile(pprof_gz: &[u8]) {
    LAST_CPU.remember(pprof_gz, SystemTime::now());
}

/// `GET /api/v1/profiling/flamegraph.svg`: the last CPU profile's flame graph; 404 JSON before any.
pub fn flamegraph() -> Response {
    LAST_CPU.flamegraph()
}

impl CpuSlot {
    /// An empty slot.
    pub const fn new() -> CpuSlot {
        CpuSlot(Mutex::new(LastCpu {
            generation: 0,
            profile: None,
            taken_at: None,
            svg: None,
        }))
    }

    /// The slot, even if a panicking renderer poisoned it (its values stay consistent: each is set whole).
    fn lock(&self) -> MutexGuard<'_, LastCpu> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a profile taken at `taken_at`, replacing the previous one and its SVG.
    pub fn remember(&self, pprof_gz: &[u8], taken_at: SystemTime) {
        let mut slot = self.lock();
        slot.generation += 1;
        slot.profile = Some(Arc::new(pprof_gz.to_vec()));
        slot.taken_at = Some(taken_at);
        slot.svg = None;
    }

    /// The flame graph of the kept profile (rendered once per profile); 404 JSON when none is kept, 500
    /// JSON when it does not decode.
    pub fn flamegraph(&self) -> Response {
        let (generation, profile, taken_at) = {
            let slot = self.lock();
            if let Some((g, svg)) = &slot.svg {
                if *g == slot.generation {
                    return svg_response(svg);
                }
            }
            match &slot.profile {
                Some(p) => (slot.generation, Arc::clone(p), slot.taken_at),
                None => return crate::api::rest::error(404, NO_PROFILE_YET),
            }
        };
        // Rendered outside the lock: a slow render never holds up the pull surface remembering a new one.
        let decoded = match crate::report::decode_untrusted(&profile) {
            Ok(p) => p,
            Err(e) => {
                return crate::api::rest::error(
                    500,
                    &format!("the last CPU profile could not be decoded: {e}"),
                )
            }
        };
        let title = match taken_at {
            Some(t) => format!("nl6 CPU profile, {}", crate::gate::rfc3339(t)),
            None => "nl6 CPU profile".to_string(),
        };
        let svg = Arc::new(crate::report::flamegraph_svg(&decoded, &title));
        let mut slot = self.lock();
        if slot.generation == generation {
            slot.svg = Some((generation, Arc::clone(&svg)));
        }
        svg_response(&svg)
    }
}

impl Default for CpuSlot {
    fn default() -> CpuSlot {
        CpuSlot::new()
    }
}

/// The 404 before any CPU profile.
pub const NO_PROFILE_YET: &str = "no CPU profile has been taken yet: take one with \
GET /debug/pprof/profile?seconds=5 (the console's \"CPU profile\" button) while the profiling gate is open";

fn svg_response(svg: &[u8]) -> Response {
    Response::new(200, "image/svg+xml", svg.to_vec()).header("Cache-Control", "no-store")
}

#[cfg(test)]
mod tests;
