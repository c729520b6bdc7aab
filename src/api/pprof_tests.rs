//! Pull-surface handlers that do not need a profile: the table, errors and their exact wording, headers.
//! (Handlers that take real profiles are covered by tests/serve_pull_profiles.rs against the binary.)
use super::*;

fn get(path_and_query: &str) -> Response {
    let req = Request::new("GET", path_and_query);
    let name = req.path.trim_start_matches("/debug/pprof/").to_string();
    let route = match name.as_str() {
        "profile" => PprofRoute::Cpu,
        "symbol" => PprofRoute::Symbol,
        "trace" => PprofRoute::Trace,
        n => lookup(n).map_or(PprofRoute::Unknown, PprofRoute::Profile),
    };
    PullSurface::default().handle(route, &req, &|| true)
}

fn assert_go_error(r: &Response, status: u16, body: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.text(), format!("{body}\n"));
    assert_eq!(
        r.get_header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(r.get_header("x-go-pprof"), Some("1"));
    assert_eq!(r.get_header("content-disposition"), None);
}

#[test]
fn profile_table_is_sorted_unique_and_complete() {
    let names: Vec<&str> = PROFILES.iter().map(|e| e.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted, "sorted by name, no duplicates");
    for kind in [
        Kind::Cpu,
        Kind::Heap,
        Kind::Allocs,
        Kind::Goroutine,
        Kind::ThreadCreate,
        Kind::Block,
        Kind::Mutex,
        Kind::DeltaHeap,
        Kind::DeltaBlock,
        Kind::DeltaMutex,
        Kind::Symbol,
    ] {
        assert_eq!(
            PROFILES.iter().filter(|e| e.kind == kind).count(),
            1,
            "{kind:?}"
        );
    }
    let delta: Vec<&str> = PROFILES
        .iter()
        .filter(|e| e.delta)
        .map(|e| e.name)
        .collect();
    assert_eq!(
        delta,
        [
            "allocs",
            "block",
            "goroutine",
            "heap",
            "mutex",
            "threadcreate"
        ],
        "Go's profileSupportsDelta"
    );
    assert!(PROFILES
        .iter()
        .all(|e| e.description.ends_with('.') && !e.description.contains('<')));
    assert!(lookup("cmdline").is_none() && lookup("trace").is_none());
}

#[test]
fn seconds_errors_use_gos_wording_in_gos_order() {
    let rows: &[(&str, u16, &str)] = &[
        (
            "/debug/pprof/heap?seconds=abc",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "/debug/pprof/heap?seconds=0",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "/debug/pprof/allocs?seconds=-3",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "/debug/pprof/goroutine?seconds=1.5",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "/debug/pprof/mutex?seconds=2&debug=1",
            400,
            "seconds and debug params are incompatible",
        ),
        (
            "/debug/pprof/threadcreate?seconds=abc&debug=1",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "/debug/pprof/block?seconds=301",
            400,
            "seconds=301 exceeds nl6's limit of 300 seconds",
        ),
        (
            "/debug/pprof/profile?seconds=301",
            400,
            "seconds=301 exceeds nl6's limit of 300 seconds",
        ),
        ("/debug/pprof/nope", 404, "Unknown profile"),
        ("/debug/pprof/heap/x", 404, "Unknown profile"),
    ];
    for (path, status, body) in rows {
        assert_go_error(&get(path), *status, body);
    }
    let t = get("/debug/pprof/trace");
    assert_eq!(t.status, 404);
    assert!(t.text().contains("no execution tracer"));
    assert_go_error(
        &cmdline(),
        404,
        "/debug/pprof/cmdline is not served by nl6: the command line can carry -profiling-pyroscope-basic-auth",
    );
}

#[test]
fn seconds_not_supported_where_the_table_says_so() {
    let entry = ProfileEntry {
        name: "custom",
        kind: Kind::Block,
        delta: false,
        description: "x.",
    };
    let leaked: &'static ProfileEntry = Box::leak(Box::new(entry));
    let r = PullSurface::default().handle(
        PprofRoute::Profile(leaked),
        &Request::new("GET", "/x?seconds=5"),
        &|| true,
    );
    assert_go_error(
        &r,
        400,
        "\"seconds\" parameter is not supported for this profile type",
    );
}

#[test]
fn contention_profiles_need_no_engine_for_their_text() {
    let b = get("/debug/pprof/block?debug=1");
    assert_eq!(b.status, 200);
    assert_eq!(
        b.get_header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert!(b.text().starts_with("--- contention:\ncycles/second="));
    assert!(get("/debug/pprof/mutex?debug=1")
        .text()
        .starts_with("--- mutex:\n"));
}

#[test]
fn symbol_without_addresses_is_num_symbols_one() {
    let r = get("/debug/pprof/symbol");
    assert_eq!((r.status, r.text().as_str()), (200, "num_symbols: 1\n"));
    assert_eq!(
        r.get_header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // Zero and unparsable words are skipped without a lookup.
    assert_eq!(
        get("/debug/pprof/symbol?0+zz+0x").text(),
        "num_symbols: 1\n"
    );
    let post = Request::new("POST", "/debug/pprof/symbol").with_body("0");
    assert_eq!(
        PullSurface::default()
            .handle(PprofRoute::Symbol, &post, &|| true)
            .text(),
        "num_symbols: 1\n"
    );
}

#[test]
fn parses_addresses_like_go_parse_uint_base_0() {
    let rows: &[(&str, Option<u64>)] = &[
        ("0x4a1b2c", Some(0x4a1b2c)),
        ("0X10", Some(16)),
        ("010", Some(8)),
        ("0b11", Some(3)),
        ("0o17", Some(15)),
        ("42", Some(42)),
        ("0", Some(0)),
        ("", None),
        ("0x", None),
        ("-1", None),
        ("0xffffffffffffffffff", None),
    ];
    for (s, want) in rows {
        assert_eq!(parse_uint_auto(s), *want, "{s}");
    }
}

#[test]
fn timed_requests_are_capped() {
    let surface = PullSurface::default();
    let slots: Vec<_> = (0..MAX_TIMED)
        .map(|_| surface.take_timed_slot().expect("slot"))
        .collect();
    assert!(surface.take_timed_slot().is_none());
    let r = surface.handle(
        PprofRoute::Cpu,
        &Request::new("GET", "/debug/pprof/profile?seconds=1"),
        &|| true,
    );
    assert_go_error(
        &r,
        503,
        "too many timed profile requests at once (at most 8); retry later",
    );
    drop(slots);
    assert!(surface.take_timed_slot().is_some());
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

#[test]
fn a_delta_ends_when_the_gate_closes() {
    let closes_at = Instant::now() + Duration::from_millis(150);
    let started = Instant::now();
    let r = PullSurface::default().handle(
        PprofRoute::Profile(lookup("block").unwrap()),
        &Request::new("GET", "/debug/pprof/block?seconds=30"),
        &|| Instant::now() < closes_at,
    );
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
    let surface = PullSurface::default();
    let r = surface.handle(PprofRoute::Profile(lookup("mutex").unwrap()), &req, &|| {
        true
    });
    assert_go_error(&r, 500, "context canceled");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        surface.timed.load(Ordering::SeqCst),
        0,
        "the slot is given back"
    );
}
