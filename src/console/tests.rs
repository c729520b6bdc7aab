//! Handler tests for the console: the page through the routing table, the flame graph slot.

use super::*;
use crate::api::Api;
use crate::gate::control::Gate;
use crate::gate::port::NoopPusher;
use crate::gate::state::Startup;
use crate::report::testprofile::cpu_profile;
use nl6_profile::proto::Profile;
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
    let gate = Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    );
    mount(Api::new(gate), &Arc::new(CpuSlot::new()))
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
        ">wall-clock profile (5 s)</button>",
        "/debug/fgprof?seconds=5",
        "id=\"flame-kind\"",
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
    let r = slot.flamegraph(false);
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
        CpuSource::Pull,
    );
    let r = slot.flamegraph(false);
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
    assert_eq!(slot.flamegraph(false).body, r.body);
}

#[test]
fn a_new_profile_replaces_the_cached_svg() {
    let slot = CpuSlot::new();
    slot.remember(&encode_gz(&cpu_profile(HOT)), UNIX_EPOCH, CpuSource::Pull);
    let first = slot.flamegraph(false);
    assert!(first.text().contains("hot_walk"));
    let other: &[(&[&str], i64)] = &[(&["nl6::lab::netflow::export", "main"], 5)];
    slot.remember(&encode_gz(&cpu_profile(other)), UNIX_EPOCH, CpuSource::Push);
    let second = slot.flamegraph(false);
    assert_eq!(second.status, 200);
    assert!(
        second.text().contains("netflow::export"),
        "{}",
        second.text()
    );
    assert!(!second.text().contains("hot_walk"));
}

#[test]
fn an_idle_profile_never_replaces_one_with_samples_and_the_title_says_so() {
    let slot = CpuSlot::new();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    slot.remember(&encode_gz(&cpu_profile(HOT)), t0, CpuSource::Push);
    let busy = slot.flamegraph(false);
    let source = busy.get_header("x-nl6-flame-source").unwrap().to_string();
    assert_eq!(
        source,
        "nl6 CPU profile, 2023-11-14T22:13:20.000Z, 2s from the push's upload window"
    );
    assert!(busy.text().contains("2s from the push"), "{}", busy.text());
    // An idle scrape: no samples. The flame graph keeps the busy profile and mentions the idle one.
    slot.remember(
        &encode_gz(&cpu_profile(&[])),
        t0 + Duration::from_secs(60),
        CpuSource::Pull,
    );
    let kept = slot.flamegraph(false);
    assert!(kept.text().contains("hot_walk"), "{}", kept.text());
    assert!(!kept.text().contains("no samples</"), "{}", kept.text());
    assert_eq!(
        kept.get_header("x-nl6-flame-source").unwrap(),
        "nl6 CPU profile, 2023-11-14T22:13:20.000Z, 2s from the push's upload window \
         (a newer one from GET /debug/pprof/profile, 2023-11-14T22:14:20.000Z, had no samples)"
    );
    // With nothing better kept, an idle profile is shown as it is.
    let empty_only = CpuSlot::new();
    empty_only.remember(&encode_gz(&cpu_profile(&[])), t0, CpuSource::Pull);
    assert!(empty_only.flamegraph(false).text().contains("no samples"));
}

#[test]
fn the_flame_graph_splits_by_subsystem_on_request() {
    let mut p = cpu_profile(HOT);
    p.string_table
        .extend(["subsystem".to_string(), "snmp".to_string()]);
    let (key, snmp) = (
        p.string_table.len() as i64 - 2,
        p.string_table.len() as i64 - 1,
    );
    p.sample[0].label.push(nl6_profile::proto::Label {
        key,
        str: snmp,
        ..Default::default()
    });
    let split = split_by_subsystem(&p);
    assert_eq!(split.sample.len(), p.sample.len());
    let root = |i: usize| {
        let id = *split.sample[i].location_id.last().unwrap();
        let f = split.function.iter().find(|f| f.id == id).unwrap();
        split.string_table[f.name as usize].clone()
    };
    assert_eq!(root(0), "subsystem=snmp");
    assert_eq!(root(1), "subsystem=none");
    let slot = CpuSlot::new();
    slot.remember(&encode_gz(&p), UNIX_EPOCH, CpuSource::Pull);
    let whole = slot.flamegraph(false).text();
    let towers = slot.flamegraph(true).text();
    assert!(!whole.contains("subsystem=snmp"), "{whole}");
    assert!(towers.contains("subsystem=snmp") && towers.contains("subsystem=none"));
    assert!(towers.contains("hot_walk"));
    assert!(wants_split("by=subsystem"));
    assert!(wants_split("t=17&by=subsystem"));
    assert!(!wants_split("t=17") && !wants_split("by=subsystems"));
}

#[test]
fn an_undecodable_profile_is_a_500_naming_the_cause() {
    let slot = CpuSlot::new();
    slot.remember(b"not a profile", UNIX_EPOCH, CpuSource::Pull);
    let r = slot.flamegraph(false);
    assert_eq!(r.status, 500);
    assert!(r.text().contains("could not be decoded"), "{}", r.text());
}

/// The flame graph route serves either profile: `?profile=wall` the last wall-clock one (404 naming the
/// wall-clock button before any), the default the CPU one, each titled with its kind and source; any
/// other `profile=` is a 400 naming the two it takes.
#[test]
fn the_flame_graph_shows_either_profile_on_request() {
    let slot = Arc::new(CpuSlot::new());
    let gate = Gate::new(
        Startup::new(None, None, None, Duration::from_secs(15)),
        Box::new(NoopPusher),
    );
    let api = mount(Api::new(gate), &slot);
    let get = |q: &str| api.handle(&Request::new("GET", &format!("{FLAMEGRAPH_PATH}{q}")));
    let none = get("?profile=wall");
    assert_eq!(none.status, 404);
    assert!(
        none.text().contains("/debug/fgprof?seconds=5"),
        "{}",
        none.text()
    );
    slot.remember(&encode_gz(&cpu_profile(HOT)), UNIX_EPOCH, CpuSource::Pull);
    assert_eq!(
        get("?profile=wall").status,
        404,
        "a CPU profile is not a wall-clock one"
    );
    let other = &[(&["nl6::lab::trap::wait_for_ack", "main"][..], 9)];
    slot.remember_wall(&encode_gz(&cpu_profile(other)), UNIX_EPOCH, CpuSource::Pull);
    let wall = get("?profile=wall&t=1");
    assert_eq!(wall.status, 200);
    let title = wall.get_header("x-nl6-flame-source").unwrap().to_string();
    assert!(
        title.starts_with("nl6 wall-clock profile, ") && title.ends_with("from GET /debug/fgprof"),
        "{title}"
    );
    assert!(wall.text().contains("wait_for_ack") && !wall.text().contains("hot_walk"));
    let cpu = get("?t=2");
    assert!(cpu.text().contains("hot_walk") && !cpu.text().contains("wait_for_ack"));
    assert_eq!(get("?profile=cpu").body, cpu.body);
    assert!(get("?profile=wall&by=subsystem")
        .text()
        .contains("subsystem="));
    let bad = get("?profile=heap");
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("profile=wall"), "{}", bad.text());
}
