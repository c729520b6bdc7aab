//! Pull-surface handlers that do not need a profile: the table, errors and their exact wording, headers.
//! (Handlers that take real profiles are covered by nl6's tests/serve/pull_profiles.rs against its
//! binary and by tests/engine/embed_example.rs against the `embed` example.)
use super::*;

/// A watch that never ends a request.
fn go_on() -> Option<PullResponse> {
    None
}

/// `GET /debug/pprof/<path>?<query>` through [`PullSurface::handle`].
fn get(path_and_query: &str) -> PullResponse {
    let below = path_and_query.trim_start_matches("/debug/pprof/");
    let (path, query) = below.split_once('?').unwrap_or((below, ""));
    PullSurface::new().handle(&PullRequest::get(path, query), &go_on)
}

fn assert_go_error(r: &PullResponse, status: u16, body: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.text(), format!("{body}\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-go-pprof"), Some("1"));
    assert_eq!(r.header("content-disposition"), None);
}

#[test]
fn routes_come_from_the_table() {
    let rows: &[(&str, &str, PullRoute)] = &[
        ("GET", "", PullRoute::Index),
        ("HEAD", "profile", PullRoute::Cpu),
        ("GET", "symbol", PullRoute::Symbol),
        ("POST", "symbol", PullRoute::Symbol),
        ("GET", "trace", PullRoute::Trace),
        ("POST", "heap", PullRoute::MethodNotAllowed),
        ("DELETE", "", PullRoute::MethodNotAllowed),
        ("GET", "heap/x", PullRoute::Unknown),
        ("GET", "cmdline", PullRoute::Unknown),
    ];
    for (m, p, want) in rows {
        assert_eq!(route(m, p), *want, "{m} {p}");
    }
    for e in PROFILES {
        match route("GET", e.name) {
            PullRoute::Profile(found) => assert_eq!(found.name, e.name),
            PullRoute::Cpu | PullRoute::Wall | PullRoute::Symbol => {}
            other => panic!("{}: {other:?}", e.name),
        }
    }
}

#[test]
fn query_params_are_decoded() {
    let r = PullRequest::get("x", "seconds=5&name=a%20b+c&flag&bad=%zz%41&end=100%");
    assert_eq!(r.query_param("seconds").as_deref(), Some("5"));
    assert_eq!(r.query_param("name").as_deref(), Some("a b c"));
    assert_eq!(r.query_param("flag").as_deref(), Some(""));
    assert_eq!(r.query_param("bad").as_deref(), Some("%zzA"));
    assert_eq!(r.query_param("end").as_deref(), Some("100%"));
    assert_eq!(r.query_param("missing"), None);
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
        Kind::Wall,
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
            "seconds=301 exceeds the limit of 300 seconds",
        ),
        (
            "/debug/pprof/profile?seconds=301",
            400,
            "seconds=301 exceeds the limit of 300 seconds",
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
    assert_go_error(&get("/debug/pprof/cmdline"), 404, "Unknown profile");
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
    let r = PullSurface::new().serve(
        PullRoute::Profile(leaked),
        &PullRequest::get("custom", "seconds=5"),
        &go_on,
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
    assert_eq!(b.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(b.text().starts_with("--- contention:\ncycles/second="));
    assert!(get("/debug/pprof/mutex?debug=1")
        .text()
        .starts_with("--- mutex:\n"));
}

#[test]
fn symbol_without_addresses_is_num_symbols_one() {
    let r = get("/debug/pprof/symbol");
    assert_eq!((r.status, r.text().as_str()), (200, "num_symbols: 1\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    // Zero and unparsable words are skipped without a lookup.
    assert_eq!(
        get("/debug/pprof/symbol?0+zz+0x").text(),
        "num_symbols: 1\n"
    );
    let post = PullRequest {
        method: "POST",
        path: "symbol",
        query: "",
        body: b"0",
    };
    assert_eq!(
        PullSurface::new().handle(&post, &go_on).text(),
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
    let surface = PullSurface::new();
    let slots: Vec<_> = (0..MAX_TIMED)
        .map(|_| surface.take_timed_slot().expect("slot"))
        .collect();
    assert!(surface.take_timed_slot().is_none());
    let r = surface.handle(&PullRequest::get("profile", "seconds=1"), &go_on);
    assert_go_error(
        &r,
        503,
        "too many timed profile requests at once (at most 8); retry later",
    );
    drop(slots);
    assert!(surface.take_timed_slot().is_some());
}

#[test]
fn a_delta_ends_with_what_its_watch_returns() {
    let cut_at = Instant::now() + Duration::from_millis(150);
    let started = Instant::now();
    let surface = PullSurface::new();
    let watch = || (Instant::now() >= cut_at).then(|| serve_error(503, "cut"));
    let r = surface.handle(&PullRequest::get("block", "seconds=30"), &watch);
    assert_go_error(&r, 503, "cut");
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
    let gone = surface.handle(&PullRequest::get("mutex", "seconds=30"), &|| {
        Some(client_gone())
    });
    assert_go_error(&gone, 500, "context canceled");
}

#[test]
fn a_served_cpu_profile_reaches_the_hook() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let surface =
        PullSurface::new().on_cpu_profile(Box::new(move |p| sink.lock().unwrap().push(p.to_vec())));
    // The sampler is one per process: retry (bounded) while another test's profile runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    let r = loop {
        let r = surface.handle(&PullRequest::get("profile", "seconds=1"), &go_on);
        if r.status != 500 || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"profile\"")
    );
    assert_eq!(r.extra_write_time, Duration::from_secs(1));
    assert_eq!(*seen.lock().unwrap(), std::slice::from_ref(&r.body));
    // A cut request serves nothing and tells the hook nothing.
    let cut = surface.handle(&PullRequest::get("profile", "seconds=5"), &|| {
        Some(client_gone())
    });
    assert!(cut.status == 500, "{}", cut.text());
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn no_answer_names_the_application_that_embeds_the_engine() {
    let s = PullSurface::new();
    let none = || None;
    let mut texts: Vec<String> = PROFILES.iter().map(|p| p.description.to_string()).collect();
    for (path, query) in [
        ("", ""),
        ("trace", ""),
        ("profile", "seconds=301"),
        ("heap", "seconds=301"),
        ("nosuch", ""),
    ] {
        texts.push(s.handle(&PullRequest::get(path, query), &none).text());
    }
    for t in texts {
        assert!(!t.contains("nl6"), "user-visible text names nl6: {t}");
    }
}
