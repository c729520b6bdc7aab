//! The real binary's `/debug/pprof/` surface where no profile is taken: the 503 rule while closed (also as
//! `go tool pprof` prints it), cmdline never served, the redirect, Go's error wording and headers, the
//! symbol header, the empty contention texts. Profiles themselves: tests/serve/pull_profiles.rs.
use crate::common;

use common::{boot, header};

const GATED: &[&str] = &[
    "/debug/pprof/",
    "/debug/pprof/profile",
    "/debug/pprof/profile?seconds=1",
    "/debug/pprof/heap",
    "/debug/pprof/heap?gc=1",
    "/debug/pprof/allocs",
    "/debug/pprof/goroutine?debug=2",
    "/debug/pprof/threadcreate",
    "/debug/pprof/block",
    "/debug/pprof/mutex",
    "/debug/pprof/delta_heap",
    "/debug/pprof/delta_block",
    "/debug/pprof/delta_mutex",
    "/debug/pprof/symbol",
    "/debug/pprof/trace",
    "/debug/pprof/unknown",
];

fn assert_go_error(r: &common::Reply, status: u16, contains: &str) {
    let (s, h, b) = r;
    let body = String::from_utf8_lossy(b);
    assert_eq!(*s, status, "{body}");
    assert_eq!(header(h, "content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(header(h, "x-go-pprof"), Some("1"));
    assert_eq!(header(h, "x-content-type-options"), Some("nosniff"));
    assert!(header(h, "content-disposition").is_none());
    assert!(body.ends_with('\n') && body.contains(contains), "{body}");
}

#[test]
fn closed_gate_answers_503_naming_the_post_and_the_flag() {
    let n = boot().start();
    for path in GATED {
        let r = n.http("GET", path, b"");
        assert_go_error(&r, 503, "POST /api/v1/profiling");
        assert!(
            String::from_utf8_lossy(&r.2).contains("-profiling-pyroscope"),
            "{path}"
        );
    }
    assert_go_error(
        &n.http("POST", "/debug/pprof/symbol", b"0x1"),
        503,
        "POST /api/v1/profiling",
    );
    let (s, h, b) = n.http("HEAD", "/debug/pprof/heap", b"");
    assert_eq!((s, header(&h, "x-go-pprof"), b.len()), (503, Some("1"), 0));
}

#[test]
fn cmdline_is_never_served_and_the_bare_prefix_redirects() {
    let n = boot().start();
    for _ in 0..2 {
        assert_go_error(
            &n.http("GET", "/debug/pprof/cmdline", b""),
            404,
            "not served",
        );
        let (s, h, _) = n.http("GET", "/debug/pprof", b"");
        assert_eq!(s, 301);
        assert_eq!(header(&h, "location"), Some("/debug/pprof/"));
        n.open_pull_only();
    }
}

#[test]
fn go_error_wording_and_methods_with_the_gate_open() {
    let n = boot().start();
    n.open_pull_only();
    let rows: &[(&str, &str, u16, &str)] = &[
        ("GET", "/debug/pprof/trace", 404, "no execution tracer here"),
        ("GET", "/debug/pprof/nope", 404, "Unknown profile"),
        ("GET", "/debug/pprof/heap/extra", 404, "Unknown profile"),
        (
            "GET",
            "/debug/pprof/heap?seconds=x",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "GET",
            "/debug/pprof/allocs?seconds=0",
            400,
            "invalid value for \"seconds\" - must be a positive integer",
        ),
        (
            "GET",
            "/debug/pprof/goroutine?seconds=1&debug=1",
            400,
            "seconds and debug params are incompatible",
        ),
        (
            "GET",
            "/debug/pprof/threadcreate?seconds=301",
            400,
            "limit of 300 seconds",
        ),
        (
            "GET",
            "/debug/pprof/profile?seconds=301",
            400,
            "limit of 300 seconds",
        ),
    ];
    for (m, p, s, want) in rows {
        assert_go_error(&n.http(m, p, b""), *s, want);
    }
    let (s, h, b) = n.http("POST", "/debug/pprof/heap", b"");
    assert_eq!(
        (s, header(&h, "allow")),
        (405, Some("GET, HEAD")),
        "{}",
        String::from_utf8_lossy(&b)
    );
}

#[test]
fn symbol_header_and_empty_contention_texts() {
    let n = boot().start();
    n.open_pull_only();
    let (s, h, b) = n.http("GET", "/debug/pprof/symbol", b"");
    assert_eq!((s, b.as_slice()), (200, &b"num_symbols: 1\n"[..]));
    assert_eq!(
        header(&h, "content-type"),
        Some("text/plain; charset=utf-8")
    );
    let (s, _, b) = n.http("POST", "/debug/pprof/symbol", b"0");
    assert_eq!((s, b.as_slice()), (200, &b"num_symbols: 1\n"[..]));
    let (s, h, b) = n.http("GET", "/debug/pprof/block?debug=1", b"");
    assert_eq!(s, 200);
    assert_eq!(
        header(&h, "content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert!(String::from_utf8_lossy(&b).starts_with("--- contention:\n"));
    let (_, _, b) = n.http("GET", "/debug/pprof/mutex?debug=1", b"");
    assert!(String::from_utf8_lossy(&b).starts_with("--- mutex:\n"));
}

#[test]
fn go_tool_pprof_prints_the_503_message() {
    let n = boot().start();
    let url = format!("http://{}/debug/pprof/heap", n.addr);
    let out = common::go_pprof(&["-top", &url], &std::env::temp_dir());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server response: 503 Service Unavailable - profiling is off"),
        "{err}"
    );
    assert!(err.contains("POST /api/v1/profiling"), "{err}");
}
