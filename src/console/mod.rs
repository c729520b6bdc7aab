//! The web console: one HTML page served at `/` and the flame graph of the last CPU profile at
//! `/api/v1/profiling/flamegraph.svg` (of the last wall-clock profile with `?profile=wall`).
//!
//! The page (`page.html`, with `console.css` and `console.js` inlined into it once, at first use) is
//! embedded in the binary: no build step, no framework, no request leaves the page's origin (lab VMs are
//! offline). It drives the same REST and pull routes a script would use — `GET`/`POST
//! /api/v1/profiling`, `/debug/pprof/heap`, `/debug/pprof/profile?seconds=5`, `/debug/fgprof?seconds=5`
//! (the wall-clock profile), and the fleet's
//! `/api/v1/devices` and `/api/v1/scenarios` when they answer — and shows the server's own error text.
//!
//! Owns one small slot type, [`CpuSlot`]: the last CPU profile with samples that the pull surface served
//! or the push encoded (each told through the [`cpu_hook`] the composition root, `cli/run.rs`, hands it;
//! there is no global), and beside it, by the same rule, the last wall-clock profile the pull surface
//! served or the push encoded ([`wall_hook`]) — an idle one never replaces one with samples, it is only
//! mentioned — and the SVGs rendered from it (by [`crate::report::flamegraph_svg`],
//! lazily, once per profile; whole, or split by `subsystem` with `?by=subsystem`), titled with where and
//! when the profile was taken. The flame graph is not gated: it only shows a profile already taken while
//! the gate was open. Never touches a socket.
//!
//! Sits above [`crate::api`]: the API names the console's routes ([`ConsoleRoute`]) and serves them
//! with the handler [`mount`] gives it.
#![forbid(unsafe_code)]

use crate::http::{Request, Response};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

/// The page's skeleton; `/*CONSOLE_CSS*/` and `/*CONSOLE_JS*/` are replaced by the two files below.
const PAGE_HTML: &str = include_str!("page.html");
const CONSOLE_CSS: &str = include_str!("console.css");
const CONSOLE_JS: &str = include_str!("console.js");

pub use crate::api::{ConsoleRoute, FLAMEGRAPH_PATH};

/// A console handler over `slot`, for [`Api::with_console`](crate::api::Api::with_console).
pub fn handler(slot: Arc<CpuSlot>) -> Box<crate::api::ConsoleHandler> {
    Box::new(move |route, req| handle(route, req, &slot))
}

/// What the pull surface and the push call with each CPU profile they produce: `slot` keeps it for the
/// flame graph, saying it came from `source`. The composition root (`cli/run.rs`) hands one to each.
pub fn cpu_hook(slot: Arc<CpuSlot>, source: CpuSource) -> nl6_profile::pull::CpuHook {
    Box::new(move |pprof_gz| slot.remember(pprof_gz, SystemTime::now(), source))
}

/// The same for each wall-clock profile: `slot` keeps it for the wall-clock flame graph.
pub fn wall_hook(slot: Arc<CpuSlot>, source: CpuSource) -> nl6_profile::pull::CpuHook {
    Box::new(move |pprof_gz| slot.remember_wall(pprof_gz, SystemTime::now(), source))
}

/// Mounts the console on `api` over `slot`: its routes, and every CPU and wall-clock profile the pull
/// surface serves.
pub fn mount(api: crate::api::Api, slot: &Arc<CpuSlot>) -> crate::api::Api {
    api.with_console(handler(Arc::clone(slot)))
        .on_cpu_profile(cpu_hook(Arc::clone(slot), CpuSource::Pull))
        .on_wall_profile(wall_hook(Arc::clone(slot), CpuSource::Pull))
}

/// Answers one console request; the flame graph is `slot`'s.
pub fn handle(route: ConsoleRoute, req: &Request, slot: &CpuSlot) -> Response {
    match route {
        ConsoleRoute::Page => page(),
        ConsoleRoute::Flamegraph => match wanted_kind(&req.query) {
            Ok(kind) => slot.flamegraph_of(kind, wants_split(&req.query)),
            Err(bad) => crate::api::rest::error(400, &bad.to_string()),
        },
        ConsoleRoute::MethodNotAllowed => crate::api::rest::error(
            405,
            &format!("method {} not allowed on {}: use GET", req.method, req.path),
        )
        .header("Allow", "GET, HEAD"),
    }
}

/// A flame graph query's `profile=` that names no profile the console keeps (the value as given).
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnknownProfile(String);

impl std::fmt::Display for UnknownProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "profile={:?}: the flame graph shows profile=cpu (the default) or profile=wall",
            self.0
        )
    }
}

/// Which profile the flame graph's query asks for (`profile=cpu`, the default, or `profile=wall`); `Err`
/// names anything else.
fn wanted_kind(query: &str) -> Result<ProfileKind, UnknownProfile> {
    match query.split('&').find_map(|kv| kv.strip_prefix("profile=")) {
        None | Some("cpu") => Ok(ProfileKind::Cpu),
        Some("wall") => Ok(ProfileKind::Wall),
        Some(other) => Err(UnknownProfile(other.to_string())),
    }
}

/// Whether the flame graph's query asks for one tower per subsystem (`by=subsystem`).
fn wants_split(query: &str) -> bool {
    query.split('&').any(|kv| kv == "by=subsystem")
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

/// The page's Content-Security-Policy: nothing but its own inline script and style (by their SHA-256),
/// same-origin fetches and images (the flame graph; `data:` for the empty icon), no framing by anyone,
/// no form posts, no `<base>`.
pub fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            source_hash(CONSOLE_JS),
            source_hash(CONSOLE_CSS)
        )
    })
}

/// A CSP hash source: `sha256-` and the base64 of the digest of `text` as the page carries it.
fn source_hash(text: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

/// `GET /`.
pub fn page() -> Response {
    Response::new(200, "text/html; charset=utf-8", page_html())
        // The page is small and changes with the binary: always fetch it anew.
        .header("Cache-Control", "no-cache")
        .header("Referrer-Policy", "no-referrer")
        // No other site may frame the page (clickjacking the gate's buttons); older browsers read the
        // first, newer ones the CSP's frame-ancestors.
        .header("X-Frame-Options", "DENY")
        .header("Content-Security-Policy", content_security_policy())
}

/// The CPU profile the flame graph shows, and its flame graphs (whole, and split by `subsystem`) once
/// rendered; the same for the last wall-clock profile. The composition root makes one and hands it to the
/// routes ([`handler`]) and to the pull surface and the push ([`cpu_hook`]); tests make their own.
pub struct CpuSlot {
    cpu: Mutex<LastCpu>,
    wall: Mutex<LastCpu>,
}

/// Which of the slot's two profiles (`?profile=` of the flame graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// The last CPU profile (the default).
    Cpu,
    /// The last wall-clock profile (`/debug/fgprof`).
    Wall,
}

impl ProfileKind {
    fn title_words(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "CPU profile",
            ProfileKind::Wall => "wall-clock profile",
        }
    }
}

/// Where a remembered profile came from, said in the flame graph's title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuSource {
    /// `GET /debug/pprof/profile` (a person, the console's button, a scraper).
    Pull,
    /// One of the push's upload windows.
    Push,
}

impl CpuSource {
    fn words(self, kind: ProfileKind) -> &'static str {
        match (self, kind) {
            (CpuSource::Pull, ProfileKind::Cpu) => "GET /debug/pprof/profile",
            (CpuSource::Pull, ProfileKind::Wall) => "GET /debug/fgprof",
            (CpuSource::Push, _) => "the push's upload window",
        }
    }
}

struct KeptProfile {
    pprof: Arc<Vec<u8>>,
    taken_at: SystemTime,
    source: CpuSource,
    /// False for an idle window: such a profile never replaces one with samples.
    has_samples: bool,
}

struct LastCpu {
    /// Changes whenever what the flame graph shows changes; a cached SVG is current when it matches.
    generation: u64,
    kept: Option<KeptProfile>,
    /// The newest profile without samples that did not replace `kept` (said in the title).
    newer_empty: Option<(SystemTime, CpuSource)>,
    /// Cached renders: (generation, SVG, title).
    svg: Option<(u64, Arc<Vec<u8>>, String)>,
    svg_by_subsystem: Option<(u64, Arc<Vec<u8>>, String)>,
}

impl CpuSlot {
    /// An empty slot.
    pub const fn new() -> CpuSlot {
        const EMPTY: LastCpu = LastCpu {
            generation: 0,
            kept: None,
            newer_empty: None,
            svg: None,
            svg_by_subsystem: None,
        };
        CpuSlot {
            cpu: Mutex::new(EMPTY),
            wall: Mutex::new(EMPTY),
        }
    }

    /// One profile's slot, even if a panicking renderer poisoned it (its values stay consistent: each is
    /// set whole).
    fn lock(&self, kind: ProfileKind) -> MutexGuard<'_, LastCpu> {
        let m = match kind {
            ProfileKind::Cpu => &self.cpu,
            ProfileKind::Wall => &self.wall,
        };
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a CPU profile taken at `taken_at` from `source`. One without samples (an idle scrape or
    /// window) replaces only a kept profile that has none either; otherwise it is only mentioned in the
    /// title.
    pub fn remember(&self, pprof_gz: &[u8], taken_at: SystemTime, source: CpuSource) {
        self.remember_kind(ProfileKind::Cpu, pprof_gz, taken_at, source)
    }

    /// Keeps a wall-clock profile, by the same rule as [`CpuSlot::remember`].
    pub fn remember_wall(&self, pprof_gz: &[u8], taken_at: SystemTime, source: CpuSource) {
        self.remember_kind(ProfileKind::Wall, pprof_gz, taken_at, source)
    }

    fn remember_kind(
        &self,
        kind: ProfileKind,
        pprof_gz: &[u8],
        taken_at: SystemTime,
        source: CpuSource,
    ) {
        // An undecodable profile counts as having samples, so the route reports the decode error.
        let has_samples = nl6_profile::proto::decode(pprof_gz)
            .map(|p| !p.sample.is_empty())
            .unwrap_or(true);
        let mut slot = self.lock(kind);
        slot.generation += 1;
        if !has_samples && slot.kept.as_ref().is_some_and(|k| k.has_samples) {
            slot.newer_empty = Some((taken_at, source));
            return;
        }
        slot.kept = Some(KeptProfile {
            pprof: Arc::new(pprof_gz.to_vec()),
            taken_at,
            source,
            has_samples,
        });
        slot.newer_empty = None;
    }

    /// The title: when the profile was taken, its window, where it came from, and any newer idle one.
    fn title(
        kind: ProfileKind,
        taken: (SystemTime, CpuSource),
        window_nanos: i64,
        newer_empty: Option<(SystemTime, CpuSource)>,
    ) -> String {
        // To the millisecond: the window's length, not the timer's jitter.
        let window_millis = (window_nanos.max(0) as u64 + 500_000) / 1_000_000;
        let window =
            crate::timefmt::format_go_duration(std::time::Duration::from_millis(window_millis));
        let mut title = format!(
            "nl6 {}, {}, {window} from {}",
            kind.title_words(),
            crate::timefmt::rfc3339_millis(taken.0),
            taken.1.words(kind)
        );
        if let Some((t, source)) = newer_empty {
            title.push_str(&format!(
                " (a newer one from {}, {}, had no samples)",
                source.words(kind),
                crate::timefmt::rfc3339_millis(t)
            ));
        }
        title
    }

    /// The flame graph of the kept profile, whole or with one tower per `subsystem` (rendered once per
    /// profile); 404 JSON when none is kept, 500 JSON when it does not decode. The title is also sent as
    /// `X-Nl6-Flame-Source` for the page's caption.
    pub fn flamegraph(&self, by_subsystem: bool) -> Response {
        self.flamegraph_of(ProfileKind::Cpu, by_subsystem)
    }

    /// [`CpuSlot::flamegraph`] of either profile.
    pub fn flamegraph_of(&self, kind: ProfileKind, by_subsystem: bool) -> Response {
        let (generation, profile, taken, newer_empty) = {
            let slot = self.lock(kind);
            let cache = if by_subsystem {
                &slot.svg_by_subsystem
            } else {
                &slot.svg
            };
            if let Some((g, svg, title)) = cache {
                if *g == slot.generation {
                    return svg_response(svg, title);
                }
            }
            let Some(kept) = &slot.kept else {
                let none = match kind {
                    ProfileKind::Cpu => NO_PROFILE_YET,
                    ProfileKind::Wall => NO_WALL_PROFILE_YET,
                };
                return crate::api::rest::error(404, none);
            };
            (
                slot.generation,
                Arc::clone(&kept.pprof),
                (kept.taken_at, kept.source),
                slot.newer_empty,
            )
        };
        // Rendered outside the lock: a slow render never holds up the pull surface remembering a new one.
        let decoded = match crate::report::decode_untrusted(&profile) {
            Ok(p) => p,
            Err(e) => {
                return crate::api::rest::error(
                    500,
                    &format!("the last {} could not be decoded: {e}", kind.title_words()),
                )
            }
        };
        let title = Self::title(kind, taken, decoded.duration_nanos, newer_empty);
        let svg = if by_subsystem {
            crate::report::flamegraph_svg(&split_by_subsystem(&decoded), &title)
        } else {
            crate::report::flamegraph_svg(&decoded, &title)
        };
        let svg = Arc::new(svg);
        let mut slot = self.lock(kind);
        if slot.generation == generation {
            let cache = if by_subsystem {
                &mut slot.svg_by_subsystem
            } else {
                &mut slot.svg
            };
            *cache = Some((generation, Arc::clone(&svg), title.clone()));
        }
        svg_response(&svg, &title)
    }
}

/// `p` with one more root frame per sample, `subsystem=<name>` (`subsystem=none` when unlabelled), so the
/// flame graph has one tower per subsystem, as `go tool pprof -tagroot=subsystem` draws it.
pub fn split_by_subsystem(p: &nl6_profile::proto::Profile) -> nl6_profile::proto::Profile {
    use nl6_profile::proto::{Function, Line, Location};
    let mut out = p.clone();
    let key = p.string_table.iter().position(|s| s == "subsystem");
    let mut next_id = p
        .location
        .iter()
        .map(|l| l.id)
        .chain(p.function.iter().map(|f| f.id))
        .max()
        .unwrap_or(0)
        + 1;
    let mut roots: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for sample in &mut out.sample {
        let value = key
            .and_then(|k| sample.label.iter().find(|l| l.key == k as i64))
            .and_then(|l| p.string_table.get(l.str as usize))
            .map_or("none", String::as_str);
        let name = format!("subsystem={value}");
        let id = *roots.entry(name.clone()).or_insert_with(|| {
            let id = next_id;
            next_id += 1;
            out.string_table.push(name);
            let s = out.string_table.len() as i64 - 1;
            out.function.push(Function {
                id,
                name: s,
                system_name: s,
                ..Default::default()
            });
            out.location.push(Location {
                id,
                line: vec![Line {
                    function_id: id,
                    ..Default::default()
                }],
                ..Default::default()
            });
            id
        });
        sample.location_id.push(id);
    }
    out
}

impl Default for CpuSlot {
    fn default() -> CpuSlot {
        CpuSlot::new()
    }
}

/// The 404 before any CPU profile.
pub const NO_PROFILE_YET: &str = "no CPU profile has been taken yet: take one with \
GET /debug/pprof/profile?seconds=5 (the console's \"CPU profile\" button) while the profiling gate is open";

/// The 404 before any wall-clock profile.
pub const NO_WALL_PROFILE_YET: &str = "no wall-clock profile has been taken yet: take one with \
GET /debug/fgprof?seconds=5 (the console's \"wall-clock profile\" button) while the profiling gate is open";

fn svg_response(svg: &[u8], title: &str) -> Response {
    Response::new(200, "image/svg+xml", svg.to_vec())
        .header("Cache-Control", "no-store")
        .header("X-Nl6-Flame-Source", title)
}

#[cfg(test)]
mod tests;
