//! The wall-clock series of the push, end to end through the real binary into the Pyroscope `/ingest`
//! double (tests/push_support): with `-profiling-wall` every interval also uploads a wall-clock profile
//! that the double files as fgprof's two profile types (`fgprof:samples:count:wallclock:nanoseconds`,
//! `fgprof:time:nanoseconds:wallclock:nanoseconds`, as Alloy's `profile.fgprof` scrape names them), with
//! the `sample_type_config` part that puts it there; the push holds the wall-clock sampler meanwhile (a
//! pull `/debug/fgprof` is refused as busy), and the console's wall-clock flame graph shows the push's
//! last window as it shows a pulled one. Without the flag, no wall-clock upload at all.

use crate::common;
use crate::push_support;

use common::boot;
use push_support::{wait_until, StandIn};
use std::time::Duration;

const WALL_TIME: &str = "fgprof:time:nanoseconds:wallclock:nanoseconds";
const WALL_SAMPLES: &str = "fgprof:samples:count:wallclock:nanoseconds";
const THREADS: &str = "goroutines:goroutine:count:goroutine:count";

/// The double's records of the uploads that carried a wall-clock profile: `units=samples` (as CPU's) with
/// a `sample_type_config` part (which CPU's never has).
fn wall_uploads(double: &StandIn) -> Vec<serde_json::Value> {
    double
        .requests()
        .into_iter()
        .filter(|r| {
            r["query"]["units"] == "samples"
                && r["parts"].to_string().contains("sample_type_config")
        })
        .collect()
}

#[test]
fn with_the_flag_the_wall_series_lands_under_fgprof_names_and_units() {
    let double = StandIn::start(&[]);
    let n = boot()
        .args(&["-profiling-pyroscope", &double.url()])
        .args(&["-profiling-upload-interval", "1s"])
        .args(&["-profiling-wall"])
        .start();
    let series = r#"{service_name="nl6"}"#;
    let landed = wait_until(Duration::from_secs(20), || {
        double.total(WALL_TIME, series) > 0 && double.total(WALL_SAMPLES, series) > 0
    });
    assert!(
        landed,
        "types {:?}; requests {:?}; {}",
        double.profile_types(),
        double.requests(),
        n.stderr()
    );
    // Units: one tick stands for 1e9/99 ns per thread sampled, so time / samples is about that period
    // (never below it: a capped tick weights its samples up, never down).
    let time = double.total(WALL_TIME, series);
    let samples = double.total(WALL_SAMPLES, series);
    let per_sample = time as f64 / samples as f64;
    assert!(
        per_sample >= 1e9 / 99.0 * 0.99,
        "time {time} ns over {samples} samples: {per_sample} ns per sample, below the 99 Hz period"
    );
    // Every wall-clock upload was accepted, with a file part `sample_type_config` the server reads.
    let uploads = wall_uploads(&double);
    assert!(!uploads.is_empty(), "{:?}", double.requests());
    for r in &uploads {
        assert_eq!(r["status"], 200, "{r}");
        assert!(
            r["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "sample_type_config (file)"),
            "{r}"
        );
        assert_eq!(r["query"]["sampleRate"], "99", "{r}");
    }
    let types = double.profile_types();
    assert!(
        !types
            .iter()
            .any(|t| t.starts_with("process_cpu:") && t.contains("wallclock")),
        "a wall-clock profile filed as CPU: {types:?}"
    );
    // The console's flame graph shows the push's last wall-clock window (a pull is refused meanwhile, so
    // the push is the only way one gets there), saying where it came from.
    let (status, headers, svg) =
        n.http("GET", "/api/v1/profiling/flamegraph.svg?profile=wall", b"");
    let svg = String::from_utf8_lossy(&svg);
    assert_eq!(status, 200, "{svg}");
    let source = common::header(&headers, "x-nl6-flame-source").unwrap_or_default();
    assert!(
        source.starts_with("nl6 wall-clock profile, ")
            && source.contains("from the push's upload window"),
        "{source:?}"
    );
    assert!(
        svg.contains("<svg") && !svg.contains("no samples</"),
        "{svg}"
    );
    // One wall-clock profile at a time: the push holds the sampler.
    let (status, _, body) = n.http("GET", "/debug/fgprof?seconds=1", b"");
    assert_eq!(status, 500, "{}", String::from_utf8_lossy(&body));
    assert!(
        String::from_utf8_lossy(&body).contains("already in use"),
        "{}",
        String::from_utf8_lossy(&body)
    );
}

#[test]
fn without_the_flag_no_wall_series_is_pushed() {
    let double = StandIn::start(&[]);
    let n = boot()
        .args(&["-profiling-pyroscope", &double.url()])
        .args(&["-profiling-upload-interval", "1s"])
        .start();
    // Three intervals' worth of uploads: the other series land, the wall one never does.
    let cycles = wait_until(Duration::from_secs(20), || {
        double
            .requests()
            .iter()
            .filter(|r| r["query"]["units"] == "goroutines")
            .count()
            >= 3
    });
    assert!(cycles, "{:?}; {}", double.requests(), n.stderr());
    let types = double.profile_types();
    assert!(types.iter().any(|t| t == THREADS), "{types:?}");
    assert!(
        !types.iter().any(|t| t.starts_with("fgprof:")),
        "a wall series without -profiling-wall: {types:?}"
    );
    assert!(wall_uploads(&double).is_empty(), "{:?}", double.requests());
    // The sampler stays free for pulls.
    let (status, _, body) = n.http("GET", "/debug/fgprof?seconds=1", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

/// The push's `sample_type_config` for the wall-clock profile names every sample type the engine's encoder
/// writes (read back from the encoded bytes), each shown as fgprof, and the period type is wallclock.
#[test]
fn the_wall_config_names_every_sample_type_the_engine_writes() {
    let empty = nl6_profile::wall::WallProfile {
        start: std::time::SystemTime::now(),
        duration: Duration::from_secs(1),
        period_ns: 1_000_000_000 / u64::from(nl6_profile::wall::DEFAULT_HZ),
        ticks: 0,
        unanswered: 0,
        capped_ticks: 0,
        samples: Vec::new(),
    };
    let p =
        nl6_profile::proto::decode(&nl6_profile::wall::encode(&empty)).expect("the engine's pprof");
    let name = |i: i64| p.string_table[i as usize].clone();
    let types: Vec<String> = p.sample_type.iter().map(|t| name(t.r#type)).collect();
    let config: serde_json::Value =
        serde_json::from_str(nl6_push::multipart::WALL_SAMPLE_TYPE_CONFIG).unwrap();
    assert_eq!(config.as_object().unwrap().len(), types.len(), "{types:?}");
    for t in &types {
        assert_eq!(config[t]["display-name"], "fgprof", "{t} in {config}");
    }
    let period = p.period_type.as_ref().expect("a period type");
    assert_eq!(name(period.r#type), "wallclock");
}
