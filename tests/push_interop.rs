//! The labelled interop probe (`nl6::probe`, run as a program by examples/interop_probe.rs),
//! in-process: its CPU burn under `subsystem="interop-probe"` must show up both in what the push stored in
//! the Pyroscope stand-in and in a CPU profile scraped from its own `/debug/pprof/profile` once the gate
//! is pull-only; a bogus label value holds nothing in either. One test: the CPU sampler is process-wide.

mod common;
mod push_support;

use common::{header, json, request};
use nl6::probe::{Probe, ProbeOptions, PROBE_LABEL};
use nl6_profile::heap::SamplingAllocator;
use nl6_profile::proto::{self, Profile};
use push_support::{wait_until, StandIn};
use std::time::Duration;

// As in the example: the probe is a program with nl6's sampling allocator installed.
#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
const BOGUS: &str = "no-such-subsystem";

/// Samples whose `subsystem` label is `value`.
fn labelled_samples(p: &Profile, value: &str) -> usize {
    let key = p.string_table.iter().position(|s| s == "subsystem");
    let val = p.string_table.iter().position(|s| s == value);
    let (Some(key), Some(val)) = (key, val) else {
        return 0;
    };
    p.sample
        .iter()
        .filter(|s| {
            s.label
                .iter()
                .any(|l| l.key == key as i64 && l.str == val as i64)
        })
        .count()
}

#[test]
fn the_probe_label_is_in_the_push_and_in_a_scraped_cpu_profile() {
    let stand_in = StandIn::start(&[]);
    let probe = Probe::start(
        ProbeOptions::new("127.0.0.1:0")
            .with_pyroscope(stand_in.url())
            .with_upload_interval(Duration::from_secs(1)),
    )
    .expect("the probe starts");
    let addr = probe.local_addr();
    let selector = format!(r#"{{service_name="nl6",subsystem="{PROBE_LABEL}"}}"#);

    // Push: the stand-in holds CPU time under the probe's label.
    let pushed = wait_until(Duration::from_secs(20), || {
        stand_in.total(CPU, &selector) > 0
    });
    let view = probe.gate().view();
    assert!(
        pushed,
        "nothing under {selector}; gate {view:?}; requests {:?}",
        stand_in.requests()
    );
    assert!(view.pushing && view.sdk_errors == 0, "{view:?}");
    assert_eq!(
        stand_in.total(CPU, r#"{service_name="nl6",subsystem="no-such-subsystem"}"#),
        0,
        "the bogus label value holds nothing in the push"
    );
    assert!(stand_in
        .get_json("/api/label-values?name=subsystem")
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == PROBE_LABEL));

    // Pull: the gate goes pull-only through the REST surface, which frees the CPU sampler.
    let (status, _, body) = request(
        addr,
        "POST",
        "/api/v1/profiling",
        &[],
        br#"{"enabled":true,"server_address":""}"#,
        Duration::from_secs(25),
    );
    let state = json(&body);
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["data"]["pushing"], false, "{state}");
    let rounds_before = probe.rounds();
    let (status, headers, body) = request(
        addr,
        "GET",
        "/debug/pprof/profile?seconds=2",
        &[],
        b"",
        Duration::from_secs(15),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(header(&headers, "content-type")
        .unwrap_or("")
        .starts_with("application/octet-stream"));
    assert!(
        probe.rounds() > rounds_before,
        "the burn ran during the scrape"
    );
    let profile = proto::decode(&body).expect("a pprof profile");
    let ours = labelled_samples(&profile, PROBE_LABEL);
    assert!(
        ours > 0,
        "no sample labelled {PROBE_LABEL} among {} samples",
        profile.sample.len()
    );
    assert_eq!(labelled_samples(&profile, BOGUS), 0);

    assert!(probe.shutdown(), "the final flush completed");
}
