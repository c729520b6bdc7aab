//! # The pull surface: `/debug/pprof/`
//!
//! nl6 serves Go's `net/http/pprof` surface (plus godeltaprof's three delta endpoints) from its own
//! in-process profiler, so `go tool pprof`, Grafana Alloy's `pyroscope.scrape` and curl read it as they
//! would read a Go program. It is mounted at the root, not under `/api/v1`. The surface itself — the
//! routes, parameters, Go's wording, the timed-request cap — is the engine's value-level handler
//! ([`nl6_profile::pull`], documented there); this module is its glue to nl6's server: the gate check,
//! the console's hook, the client probe, and what nl6 never serves.
//!
//! ## The gate rule
//! Every path under `/debug/pprof/` (and `/debug/fgprof`, the wall-clock profile) answers **503** while the profiling gate is closed (the default) or
//! closing (from the moment a close begins, through the push's flush), with a body saying how to open it:
//! `POST /api/v1/profiling` with `{"enabled":true}` (add `"server_address":""` for pull-only), or start
//! nl6 with `-profiling-pyroscope URL`. The 503 carries
//! `X-Go-Pprof: 1`, so `go tool pprof` prints that text. `/debug/pprof/cmdline` is **never** served (404
//! open or closed): the command line can carry `-profiling-pyroscope-basic-auth`. `/debug/pprof`
//! redirects to `/debug/pprof/`.
//!
//! ## Timed requests and the gate
//! A timed request (`profile`, `?seconds=N`) looks every 100 ms at its client and at the gate. When the
//! client has gone away (closed or half-closed its connection) it ends at once with Go's **500**
//! `context canceled`. When the gate closes (or closes and reopens) while it runs, it ends within 100 ms
//! with **503** `profiling gate closed while the profile ran …`: nothing profiled is served after a
//! close, not even the part taken before it. Every response also gets `X-Content-Type-Options: nosniff`
//! (added by the server, for every surface).
//!
//! ## Examples
//! ```text
//! curl -s -X POST localhost:8080/api/v1/profiling -H 'Content-Type: application/json' -d '{"enabled":true,"server_address":""}'
//! go tool pprof -top http://localhost:8080/debug/pprof/heap
//! go tool pprof -top http://localhost:8080/debug/pprof/profile?seconds=10
//! go tool pprof -seconds 30 http://localhost:8080/debug/pprof/allocs      # a 30 s allocation delta
//! curl -s localhost:8080/debug/pprof/goroutine?debug=2
//! curl -s -o heap.pb.gz localhost:8080/debug/pprof/delta_heap
//! ```
//!
//! Never opens a socket; handlers take a request value and return a response value.
#![forbid(unsafe_code)]

use crate::http::{Request, Response};
use nl6_profile::pull::{self, PullRequest, PullResponse, PullRoute, PullSurface};

/// Whether the gate is still open for the request in progress (false from the moment a close begins).
pub type GateOpen<'a> = &'a dyn Fn() -> bool;

/// Serves a gated route (the gate is open) through the engine's surface. A timed request ends early when
/// `gate_open` turns false or the client leaves.
pub fn serve(
    surface: &PullSurface,
    route: PullRoute,
    req: &Request,
    gate_open: GateOpen,
) -> Response {
    let path = match req.path.strip_prefix("/debug/pprof/") {
        Some(p) => p,
        None if req.path == super::FGPROF_PATH => "fgprof",
        None => "",
    };
    let pull_req = PullRequest {
        method: &req.method,
        path,
        query: &req.query,
        body: &req.body,
    };
    // The gate first: a close is reported as such even when the client left at the same moment.
    let watch = || {
        if !gate_open() {
            Some(gate_closed_while_running())
        } else if req.client.gone() {
            Some(pull::client_gone())
        } else {
            None
        }
    };
    to_response(surface.serve(route, &pull_req, &watch))
}

/// The engine's answer as the server's value.
pub fn to_response(r: PullResponse) -> Response {
    let mut out = Response::new(r.status, r.content_type, r.body);
    for (name, value) in &r.headers {
        out = out.header(name, value);
    }
    out.extra_write_time = r.extra_write_time;
    out
}

fn gate_closed_while_running() -> PullResponse {
    pull::serve_error(
        503,
        "profiling gate closed while the profile ran: nothing profiled is served after the gate \
         closes; open it again (POST /api/v1/profiling) and repeat the request",
    )
}

/// Go's `serveError` in the server's shape.
fn serve_error(status: u16, msg: &str) -> Response {
    to_response(pull::serve_error(status, msg))
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
             POST /api/v1/profiling (curl -X POST {host}/api/v1/profiling -H 'Content-Type: application/json' -d '{{\"enabled\":true,\"server_address\":\"\"}}') \
             or start nl6 with -profiling-pyroscope URL"
        ),
    )
}

/// A thread dump refused by [`super::dumps`]: Go's 503 with `Retry-After`.
pub fn dumps_busy(why: &super::dumps::Refused) -> Response {
    serve_error(503, &why.to_string())
        .header("Retry-After", &super::dumps::RETRY_AFTER_SECS.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn assert_go_error(r: &Response, status: u16, body: &str) {
        assert_eq!(r.status, status, "{}", r.text());
        assert_eq!(r.text(), format!("{body}\n"));
        assert_eq!(
            r.get_header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(r.get_header("x-go-pprof"), Some("1"));
    }

    #[test]
    fn cmdline_is_never_served() {
        assert_go_error(
            &cmdline(),
            404,
            "/debug/pprof/cmdline is not served by nl6: the command line can carry -profiling-pyroscope-basic-auth",
        );
    }

    #[test]
    fn redirect_keeps_the_query() {
        let r = redirect(&Request::new("GET", "/debug/pprof?debug=1"));
        assert_eq!(r.status, 301);
        assert_eq!(r.get_header("location"), Some("/debug/pprof/?debug=1"));
    }

    #[test]
    fn closed_names_the_post_and_the_flag() {
        let mut req = Request::new("GET", "/debug/pprof/heap");
        req.headers
            .push(("host".to_string(), "10.0.0.5:8080".to_string()));
        let r = closed(&req);
        assert_eq!(r.status, 503);
        assert_eq!(r.get_header("x-go-pprof"), Some("1"));
        let t = r.text();
        assert!(
            t.contains("POST /api/v1/profiling") && t.contains("-profiling-pyroscope"),
            "{t}"
        );
        assert!(
            t.contains("curl -X POST 10.0.0.5:8080/api/v1/profiling"),
            "{t}"
        );
    }

    fn delta(path: &str, req: &Request, gate_open: GateOpen) -> Response {
        let name = path.trim_start_matches("/debug/pprof/");
        let route = PullRoute::Profile(pull::lookup(name).unwrap());
        serve(&PullSurface::new(), route, req, gate_open)
    }

    #[test]
    fn a_delta_ends_when_the_gate_closes() {
        let closes_at = Instant::now() + Duration::from_millis(150);
        let started = Instant::now();
        let req = Request::new("GET", "/debug/pprof/block?seconds=30");
        let r = delta("/debug/pprof/block", &req, &|| Instant::now() < closes_at);
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(r
            .text()
            .starts_with("profiling gate closed while the profile ran"));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_delta_ends_when_its_client_is_gone() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server_side, _) = listener.accept().unwrap();
        drop(client);
        let mut req = Request::new("GET", "/debug/pprof/mutex?seconds=30");
        req.client = crate::http::ClientProbe::of(std::sync::Arc::new(server_side));
        let started = Instant::now();
        let r = delta("/debug/pprof/mutex", &req, &|| true);
        assert_go_error(&r, 500, "context canceled");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn the_query_reaches_the_engine_and_headers_come_back() {
        let req = Request::new("GET", "/debug/pprof/block?debug=1");
        let route = PullRoute::Profile(pull::lookup("block").unwrap());
        let r = serve(&PullSurface::new(), route, &req, &|| true);
        assert_eq!(r.status, 200);
        assert!(r.text().starts_with("--- contention:"), "{}", r.text());
        let req = Request::new("GET", "/debug/pprof/block");
        let r = serve(&PullSurface::new(), route, &req, &|| true);
        assert_eq!(
            r.get_header("content-disposition"),
            Some("attachment; filename=\"block\"")
        );
        assert_eq!(
            r.get_header("content-type"),
            Some("application/octet-stream")
        );
    }
}
