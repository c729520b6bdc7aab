//! Handler tests for the console: the page through the routing table, the flame graph slot.

use super::*;
use crate::api::Api;
use crate::gate::control::Gate;
use crate::gate::port::NoopPusher;
use crate::gate::state::Startup;
use crate::profiling::proto::Profile;
use crate::report::testprofile::cpu_profile;
use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

/// `p` as the pull surface serves it: protobuf, gzipped.
fn encode_gz(p: &Profile) -> Vec<u8> {
    use prost::Message;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&p.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

/// Leaf-first stacks with sample counts.
const HOT: &[(&[&str], i64)] = &[
    (
        &["nl6::lab::snmp::hot_walk", "nl6::lab::snmp::serve", "main"],
        40,
    ),
    (&["nl6::lab::syslog::fire", "main"], 10),
];

fn api() -> Api {
    Api::new(Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    ))
}

#[test]
fn root_serves_the_page_with_its_buttons_inlined() {
    let r = api().handle(&Request::new("GET", "/"));
    assert_eq!(r.status, 200);
    assert_eq!(
        r.get_header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = r.text();
    for needle in [
        "<meta name=\"viewport\"",
        ">heap profile</button>",
        ">CPU profile (5 s)</button>",
        ">open pull-only</button>",
        ">close</button>",
        "id=\"gate-address\"",
        "id=\"gate-duration\"",
        "/debug/pprof/profile?seconds=5",
        "/api/v1/profiling/flamegraph.svg",
        "grid-template-columns",
    ] {
        assert!(html.contains(needle), "page lacks {needle:?}");
    }
    // Both assets are inlined, nothing is left to fetch.
    assert!(!html.contains("/*CONSOLE_CSS*/") && !html.contains("/*CONSOLE_JS*/"));
    assert!(html.contains("function stateWords") && html.contains(".buttons {"));
}

#[test]
fn page_makes_no_external_requests() {
    let html = page_html();
    // Absolute URLs appear only as examples of a Pyroscope address; no src/href/url() leaves the origin.
    for attr in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "url(",
        "@import",
    ] {
        assert!(
            !html.contains(attr),
            "page references an external resource: {attr}"
        );
    }
    for line in html
        .lines()
        .filter(|l| l.contains("http://") || l.contains("https://"))
    {
        assert!(
            line.contains("pyroscope:4040"),
            "unexpected absolute URL: {line}"
        );
    }
}

#[test]
fn other_methods_are_refused_as_json() {
    let r = api().handle(&Request::new("POST", "/"));
    assert_eq!(r.status, 405);
    assert_eq!(r.get_header("allow"), Some("GET, HEAD"));
    assert!(r.text().contains("\"error\""), "{}", r.text());
    let r = api().handle(&Request::new("DELETE", FLAMEGRAPH_PATH));
    assert_eq!(r.status, 405);
}

#[test]
fn flamegraph_is_404_before_any_profile() {
    let slot = CpuSlot::new();
    let r = slot.flamegraph();
    assert_eq!(r.status, 404);
    assert_eq!(r.get_header("content-type"), Some("application/json"));
    assert!(
        r.text().contains("no CPU profile has been taken yet"),
        "{}",
        r.text()
    );
}

#[test]
fn flamegraph_renders_the_remembered_profile() {
    let slot = CpuSlot::new();
    slot.remember(
        &encode_gz(&cpu_profile(HOT)),
        UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    );
    let r = slot.flamegraph();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.get_header("content-type"), Some("image/svg+xml"));
    assert_eq!(r.get_header("cache-control"), Some("no-store"));
    let svg = r.text();
    assert!(svg.contains("<svg"), "{svg}");
    assert!(
        svg.contains("nl6 CPU profile, 2023-11-14T22:13:20"),
        "title: {svg}"
    );
    // Every function of the profile appears as a frame.
    for name in ["nl6::lab::snmp::hot_walk", "nl6::lab::syslog::fire", "main"] {
        assert!(svg.contains(name), "flame graph lacks {name}");
    }
    // Served again from the cache: the same bytes.
    assert_eq!(slot.flamegraph().body, r.body);
}

#[test]
fn a_new_profile_replaces_the_cached_svg() {
    let slot = CpuSlot::new();
    slot.remember(&encode_gz(&cpu_profile(HOT)), UNIX_EPOCH);
    let first = slot.flamegraph();
    assert!(first.text().contains("hot_walk"));
    slot.remember(&encode_gz(&cpu_profile(&[])), UNIX_EPOCH);
    let second = slot.flamegraph();
    assert_eq!(second.status, 200);
    assert_ne!(first.body, second.body);
    assert!(second.text().contains("no samples"), "{}", second.text());
}

#[test]
fn an_undecodable_profile_is_a_500_naming_the_cause() {
    let slot = CpuSlot::new();
    slot.remember(b"not a profile", UNIX_EPOCH);
    let r = slot.flamegraph();
    assert_eq!(r.status, 500);
    assert!(r.text().contains("could not be decoded"), "{}", r.text());
}
