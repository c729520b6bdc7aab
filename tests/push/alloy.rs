//! Grafana Alloy's default `pyroscope.scrape` requests (plus the three godeltaprof endpoints
//! examples/pyroscope/alloy-scrape.alloy switches on) against the real binary with the gate pull-only:
//! each answers 200 with `Content-Type: application/octet-stream`, a body Alloy's own checks accept, and
//! a profile google/pprof parses and `CheckValid`s. The 14 s CPU scrape runs beside the others. Also
//! checks the example config's shape as text.

use crate::common;
use crate::engine_encode_support;

use common::{boot, header, json, Nl6};
use std::time::{Duration, Instant};

/// Alloy's default targets (profile.memory, block, goroutine, mutex) and the godeltaprof ones.
const PATHS: [&str; 7] = [
    "/debug/pprof/allocs",
    "/debug/pprof/block",
    "/debug/pprof/goroutine",
    "/debug/pprof/mutex",
    "/debug/pprof/delta_heap",
    "/debug/pprof/delta_block",
    "/debug/pprof/delta_mutex",
];

/// Alloy's CPU scrape: `seconds` = the 15 s interval minus 1 s.
const CPU_PATH: &str = "/debug/pprof/profile?seconds=14";

/// Alloy's timeout for a `seconds` scrape: the 10 s scrape timeout plus 14 s.
const CPU_TIMEOUT: Duration = Duration::from_secs(24);

/// Alloy's `validateProfileData` (v1.11+), restated: a Content-Type starting `application/octet-stream`,
/// longer than 2 bytes, not text-like, gzip or a first byte with a protobuf wire type 0-5.
fn alloy_accepts(path: &str, headers: &[(String, String)], body: &[u8]) -> Result<(), String> {
    let ct = header(headers, "content-type").ok_or(format!("{path}: missing Content-Type"))?;
    if !ct.starts_with("application/octet-stream") {
        return Err(format!("{path}: Content-Type {ct:?}"));
    }
    if body.len() <= 2 {
        return Err(format!("{path}: body of {} bytes", body.len()));
    }
    let texty = [b"<!D".as_slice(), b"<h", b"<b", b"<t"]
        .iter()
        .any(|p| body.starts_with(p))
        && body.len() >= 10;
    let jsony = (body[0] == b'{' || body[0] == b'[') && body.len() > 20;
    if texty || jsony {
        return Err(format!("{path}: body looks like text"));
    }
    let gzip = body[0] == 0x1f && body[1] == 0x8b;
    if !gzip && body[0] & 7 > 5 {
        return Err(format!(
            "{path}: first byte {:#04x} is not protobuf",
            body[0]
        ));
    }
    Ok(())
}

/// Checks one scrape answer: Alloy's rules, our decoder, google/pprof's parser and CheckValid.
fn check_scrape(path: &str, (status, headers, body): common::Reply) -> Result<usize, String> {
    if status != 200 {
        return Err(format!(
            "{path}: status {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    alloy_accepts(path, &headers, &body)?;
    nl6_profile::proto::decode(&body).map_err(|e| format!("{path}: decode: {e:?}"))?;
    let name = path
        .trim_start_matches("/debug/pprof/")
        .replace(['?', '='], "-");
    let file = engine_encode_support::write_profile(&format!("alloy-{name}"), &body);
    let shape = engine_encode_support::check(&file);
    if shape.sample_types.is_empty() {
        return Err(format!("{path}: no sample types: {shape:?}"));
    }
    Ok(body.len())
}

fn pull_only(n: &Nl6) {
    let (status, _, body) = n.http(
        "POST",
        "/api/v1/profiling",
        br#"{"enabled":true,"server_address":""}"#,
    );
    let v = json(&body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["enabled"], true, "{v}");
    assert_eq!(v["data"]["pushing"], false, "{v}");
}

#[test]
fn alloys_default_scrapes_and_the_godeltaprof_paths_get_valid_pprof() {
    let n = boot().start();
    pull_only(&n);
    let n = &n;
    std::thread::scope(|scope| {
        let started = Instant::now();
        let cpu = scope.spawn(move || {
            let reply = n.http_with("GET", CPU_PATH, &[], b"", CPU_TIMEOUT);
            (reply, started.elapsed())
        });
        let mut failures = Vec::new();
        // Twice, as Alloy scrapes every 15 s (the delta paths answer differently the second time).
        for round in 0..2 {
            for path in PATHS {
                match check_scrape(path, n.http("GET", path, b"")) {
                    Ok(len) => eprintln!("round {round}: {path}: {len} bytes"),
                    Err(e) => failures.push(e),
                }
            }
        }
        let (reply, took) = cpu.join().expect("the CPU scrape thread");
        match check_scrape(CPU_PATH, reply) {
            Ok(len) => eprintln!("{CPU_PATH}: {len} bytes in {took:?}"),
            Err(e) => failures.push(e),
        }
        assert!(
            took >= Duration::from_secs(13) && took < CPU_TIMEOUT,
            "the CPU scrape took {took:?}"
        );
        assert!(failures.is_empty(), "{failures:#?}\n{}", n.stderr());
    });
}

/// The refusal Alloy would log when the gate is closed is not a profile: the checks above can fail.
#[test]
fn a_closed_gate_fails_alloys_checks() {
    let n = boot().start();
    let errors: Vec<String> = PATHS
        .iter()
        .filter_map(|p| check_scrape(p, n.http("GET", p, b"")).err())
        .collect();
    assert_eq!(errors.len(), PATHS.len(), "{errors:?}");
    assert!(
        errors.iter().all(|e| e.contains("status 503")),
        "{errors:?}"
    );
}

#[test]
fn the_example_alloy_config_has_the_expected_shape() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/pyroscope/alloy-scrape.alloy"
    );
    let text = std::fs::read_to_string(path).expect("examples/pyroscope/alloy-scrape.alloy");
    // Comment lines out (the file has no trailing comments; URLs hold `//`), whitespace collapsed: the
    // checks read the configuration, not its prose.
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join(" ");
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let expect = [
        r#"pyroscope.scrape "nl6" {"#,
        // The README's defaults: -port 8080 and the push's service name.
        r#""__address__" = coalesce(sys.env("NL6_SCRAPE_TARGET"), "127.0.0.1:8080")"#,
        r#""service_name" = coalesce(sys.env("NL6_SERVICE_NAME"), "nl6")"#,
        "forward_to = [pyroscope.write.nl6.receiver]",
        "profile.godeltaprof_memory { enabled = true }",
        "profile.godeltaprof_mutex { enabled = true }",
        "profile.godeltaprof_block { enabled = true }",
        r#"pyroscope.write "nl6" {"#,
        r#"url = coalesce(sys.env("PYROSCOPE_URL"), "http://127.0.0.1:4040")"#,
    ];
    for e in expect {
        assert!(code.contains(e), "missing {e:?} in {code}");
    }
    // Alloy's defaults are kept: nothing overrides the interval, the CPU duration or a default target.
    for overridden in [
        "scrape_interval",
        "scrape_timeout",
        "delta_profiling_duration",
        "profile.process_cpu",
        "profile.memory {",
        "profile.goroutine",
        "profile.block {",
        "profile.mutex {",
        "enabled = false",
    ] {
        assert!(!code.contains(overridden), "{overridden:?} in {code}");
    }
    let open = code.matches('{').count();
    assert_eq!(open, code.matches('}').count(), "unbalanced braces");
    assert_eq!(code.matches("enabled = true").count(), 3);
}
