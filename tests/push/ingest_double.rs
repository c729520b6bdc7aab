//! The push tests' oracle, checked: the repository's `/ingest` double
//! (tests/pyroscope-ingest) answers hand-made uploads the way Grafana Pyroscope's `/ingest` does, per the
//! server's rules: a part without a filename is ignored (200, nothing stored), `prev_profile` and broken or
//! stale profiles are 422, a bad `name` is 400, only POST is routed, a block profile without
//! `sample_type_config` lands under `mutex`, and sample labels become series labels without overriding
//! `service_name`. Each case is a control for the others: the same upload with the one rule respected is
//! stored.

use crate::push_support;

use push_support::{pprof, StandIn};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};

/// One multipart part: field, filename (None: a plain value), content.
type Part<'a> = (&'a str, Option<&'a str>, &'a [u8]);

const BOUNDARY: &str = "nl6-double-test-boundary";
const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";

/// One POST on a fresh connection; returns the status and the body.
fn post(port: u16, target: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    send(port, "POST", target, headers, body)
}

fn send(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A multipart body: `(field, filename or None, content)` per part.
fn multipart(parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (field, filename, content) in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let disposition = match filename {
            Some(f) => format!("form-data; name=\"{field}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{field}\""),
        };
        out.extend_from_slice(format!("Content-Disposition: {disposition}\r\n").as_bytes());
        out.extend_from_slice(b"Content-Type: application/octet-stream\r\n\r\n");
        out.extend_from_slice(content);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

fn form_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

/// A CPU profile stamped `time`, one sample labelled `subsystem=probe`.
fn cpu_at(time: SystemTime) -> Vec<u8> {
    pprof(
        &[("samples", "count"), ("cpu", "nanoseconds")],
        ("cpu", "nanoseconds"),
        10_000_000,
        &[(&["leaf_fn", "main_fn"], vec![3, 30_000_000], Some("probe"))],
        time,
    )
}

fn block_profile() -> Vec<u8> {
    pprof(
        &[("contentions", "count"), ("delay", "nanoseconds")],
        ("contentions", "count"),
        1,
        &[(&["lock_wait"], vec![2, 500], None)],
        SystemTime::now(),
    )
}

fn upload(server: &StandIn, name: &str, parts: &[Part<'_>]) -> (u16, String) {
    post(
        server.port,
        &format!("/ingest?name={name}&spyName=test"),
        &[("Content-Type", &form_type())],
        &multipart(parts),
    )
}

fn last_request(server: &StandIn) -> serde_json::Value {
    server
        .requests()
        .last()
        .cloned()
        .expect("a request was recorded")
}

#[test]
fn a_profile_part_without_a_filename_is_ignored_and_nothing_is_stored() {
    let server = StandIn::start(&[]);
    let cpu = cpu_at(SystemTime::now());
    let (status, body) = upload(&server, "svc", &[("profile", None, &cpu)]);
    assert_eq!(status, 200, "{body}");
    let r = last_request(&server);
    assert_eq!(r["series_written"], 0, "{r}");
    assert!(
        r["parts"][0].as_str().unwrap().contains("without filename"),
        "{r}"
    );
    assert!(server.profile_types().is_empty());

    // The control: the same bytes as a file part are stored.
    let (status, body) = upload(&server, "svc", &[("profile", Some("profile.pprof"), &cpu)]);
    assert_eq!(status, 200, "{body}");
    assert!(server.total(CPU, r#"{service_name="svc"}"#) > 0);
}

#[test]
fn prev_profile_broken_stale_and_dashed_profiles_are_422() {
    let server = StandIn::start(&[]);
    let cpu = cpu_at(SystemTime::now());
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
    let stale = cpu_at(two_hours_ago);
    let dashed = pprof(
        &[("cpu-time", "nanoseconds")],
        ("cpu", "nanoseconds"),
        1,
        &[(&["f"], vec![1], None)],
        SystemTime::now(),
    );
    let cases: [(&str, Vec<Part<'_>>, &str); 5] = [
        (
            "prev_profile",
            vec![
                ("profile", Some("p"), &cpu),
                ("prev_profile", Some("q"), &cpu),
            ],
            "unsupported client",
        ),
        (
            "garbage",
            vec![("profile", Some("p"), b"this is not a profile")],
            "pprof",
        ),
        (
            "stale",
            vec![("profile", Some("p"), &stale)],
            "outside [now-1h, now+10m]",
        ),
        (
            "dashed sample type",
            vec![("profile", Some("p"), &dashed)],
            "contains '-'",
        ),
        (
            "bad config JSON",
            vec![
                ("profile", Some("p"), &cpu),
                ("sample_type_config", Some("c"), b"{nope"),
            ],
            "sample_type_config",
        ),
    ];
    for (what, parts, needle) in cases {
        let (status, body) = upload(&server, "svc", &parts);
        assert_eq!(status, 422, "{what}: {body}");
        assert!(body.contains(needle), "{what}: {body}");
    }
    assert!(
        server.profile_types().is_empty(),
        "{:?}",
        server.profile_types()
    );

    // A whole multipart body gzip'd with Content-Encoding is not decompressed: Go's form reader sees no
    // part (200, or 422 when the bytes happen to look like a broken form) and nothing is stored.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&multipart(&[("profile", Some("p"), &cpu)]))
        .unwrap();
    let (status, body) = post(
        server.port,
        "/ingest?name=svc",
        &[("Content-Type", &form_type()), ("Content-Encoding", "gzip")],
        &gz.finish().unwrap(),
    );
    assert!(status == 200 || status == 422, "{status} {body}");
    assert_eq!(last_request(&server)["series_written"], 0);
    assert!(server.profile_types().is_empty());
}

#[test]
fn bad_names_are_400_and_only_post_is_routed() {
    let server = StandIn::start(&[]);
    let cpu = cpu_at(SystemTime::now());
    for name in ["", "my%20app", "svc%7Bbad-key%3Dv%7D"] {
        let (status, body) = upload(&server, name, &[("profile", Some("p"), &cpu)]);
        assert_eq!(status, 400, "name={name}: {body}");
    }
    let (status, _) = send(server.port, "GET", "/ingest?name=svc", &[], b"");
    assert_eq!(status, 405);
    // `/pyroscope/ingest` is the same handler; `format=pprof` takes a raw (gzip) body.
    let (status, body) = post(
        server.port,
        "/pyroscope/ingest?name=raw.cpu%7Benv%3Dlab%7D&format=pprof",
        &[("Content-Type", "application/octet-stream")],
        &cpu,
    );
    assert_eq!(status, 200, "{body}");
    // No suffix handling on the pprof path: the service is `raw.cpu`.
    assert!(
        server.total(
            CPU,
            r#"{service_name="raw.cpu",env="lab",subsystem="probe"}"#
        ) > 0
    );
}

#[test]
fn metric_names_follow_the_sample_types_and_the_config() {
    let server = StandIn::start(&[]);
    let block = block_profile();
    let (status, body) = upload(&server, "svc", &[("profile", Some("p"), &block)]);
    assert_eq!(status, 200, "{body}");
    let config = br#"{"contentions":{"display-name":"block_count"},"delay":{"display-name":"block_duration"}}"#;
    let (status, body) = upload(
        &server,
        "svc",
        &[
            ("profile", Some("p"), &block),
            ("sample_type_config", Some("c"), config),
        ],
    );
    assert_eq!(status, 200, "{body}");
    let types = server.profile_types();
    for t in [
        "mutex:contentions:count:contentions:count",
        "mutex:delay:nanoseconds:contentions:count",
        "block:contentions:count:contentions:count",
        "block:delay:nanoseconds:contentions:count",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} not in {types:?}");
    }
}

/// A display name no rule matches is kept as the metric (metricName()'s last word): fgprof's types shown
/// as `fgprof` land under `fgprof`; the control, the same profile without the part, under `process_cpu`
/// (the default mapping reads `samples` as `cpu`).
#[test]
fn a_display_name_no_rule_matches_becomes_the_metric() {
    let server = StandIn::start(&[]);
    let wall = pprof(
        &[("samples", "count"), ("time", "nanoseconds")],
        ("wallclock", "nanoseconds"),
        10_101_010,
        &[(&["park", "main_fn"], vec![4, 40_404_040], None)],
        SystemTime::now(),
    );
    let config = br#"{"samples":{"display-name":"fgprof"},"time":{"display-name":"fgprof"}}"#;
    let (status, body) = upload(
        &server,
        "svc",
        &[
            ("profile", Some("p"), &wall),
            ("sample_type_config", Some("c"), config),
        ],
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = upload(&server, "other", &[("profile", Some("p"), &wall)]);
    assert_eq!(status, 200, "{body}");
    let fgprof = "fgprof:time:nanoseconds:wallclock:nanoseconds";
    let as_cpu = "process_cpu:time:nanoseconds:wallclock:nanoseconds";
    assert_eq!(server.total(fgprof, r#"{service_name="svc"}"#), 40_404_040);
    assert_eq!(
        server.total(
            "fgprof:samples:count:wallclock:nanoseconds",
            r#"{service_name="svc"}"#
        ),
        4
    );
    assert_eq!(server.total(fgprof, r#"{service_name="other"}"#), 0);
    assert_eq!(
        server.total(as_cpu, r#"{service_name="other"}"#),
        40_404_040
    );
}

#[test]
fn sample_labels_become_series_labels_but_never_override_the_service() {
    let server = StandIn::start(&["-multitenancy"]);
    let cpu = cpu_at(SystemTime::now());
    let name = "svc%7Bservice_name%3Dnamed,subsystem%3Dfrom-name%7D";
    let target = format!("/ingest?name={name}");
    let parts = multipart(&[("profile", Some("p"), &cpu)]);
    let form = form_type();
    let (status, _) = post(server.port, &target, &[("Content-Type", &form)], &parts);
    assert_eq!(status, 401, "multitenancy without X-Scope-OrgID");
    let (status, body) = post(
        server.port,
        &target,
        &[("Content-Type", &form), ("X-Scope-OrgID", "bad tenant")],
        &parts,
    );
    assert_eq!(status, 422, "a tenant ID with a space: {body}");
    let (status, body) = post(
        server.port,
        &target,
        &[("Content-Type", &form), ("X-Scope-OrgID", "lab-7")],
        &parts,
    );
    assert_eq!(status, 200, "{body}");
    // service_name given as a tag wins over the app name; the name's `subsystem` wins over the sample's.
    assert!(server.total(CPU, r#"{service_name="named",subsystem="from-name"}"#) > 0);
    assert_eq!(server.total(CPU, r#"{service_name="svc"}"#), 0);
    assert_eq!(server.total(CPU, r#"{subsystem="probe"}"#), 0);
    let values = server.get_json("/api/label-values?name=pyroscope_spy");
    assert_eq!(
        values,
        serde_json::json!(["unknown"]),
        "no spyName: the server's default"
    );
}
