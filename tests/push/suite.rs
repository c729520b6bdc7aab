//! The push pipeline (queue, uploads, errors, flush, multipart, headers, URL joining, status) driven
//! through `PyroscopePusher` with a fake profile source, against an in-process fake server and the
//! Pyroscope stand-in (`target/pyroscope-ingest`, see tests/push_support).

use crate::push_support;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use nl6::gate::port::{PushRun, PushStatus, PushTarget, Pusher};
use nl6::push::PyroscopePusher;
use push_support::*;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn status_after(
    run: &dyn PushRun,
    limit: Duration,
    cond: impl Fn(&PushStatus) -> bool,
) -> PushStatus {
    let mut last = run.status();
    wait_until(limit, || {
        last = run.status();
        cond(&last)
    });
    last
}

/// Splits a multipart body into (part headers, data) pairs.
fn parts(content_type: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let boundary = content_type.split("boundary=").nth(1).expect("boundary");
    let delim = format!("--{boundary}");
    let text_positions: Vec<usize> = body
        .windows(delim.len())
        .enumerate()
        .filter(|(_, w)| *w == delim.as_bytes())
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for pair in text_positions.windows(2) {
        let part = &body[pair[0] + delim.len() + 2..pair[1] - 2];
        let split = part.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        out.push((
            String::from_utf8_lossy(&part[..split]).to_string(),
            part[split + 4..].to_vec(),
        ));
    }
    out
}

mod fake_server {
    use super::*;

    #[test]
    fn uploads_carry_the_wire_contract() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let mut t = target(
            &format!("{}/prefix/", server.url()),
            Duration::from_millis(200),
        );
        t.basic_auth = Some(("alice".into(), "s3cret".into()));
        t.tenant = Some("tenant-1".into());
        let (run, _control) = start_fake(config(&logs, Duration::from_secs(2)), t);
        assert!(
            wait_until(Duration::from_secs(10), || server.seen().len() >= 6),
            "two windows uploaded"
        );
        let started = Instant::now();
        assert!(run.stop(Duration::from_secs(5)), "flush completes");
        assert!(started.elapsed() < Duration::from_secs(5));
        let seen = server.seen();
        let mut kinds = std::collections::BTreeMap::new();
        for req in &seen {
            assert_eq!(req.method, "POST");
            assert_eq!(req.path(), "/prefix/ingest", "{}", req.target);
            assert_eq!(
                req.query("name").as_deref(),
                Some("nl6%7Bhostname%3Dtest-host%2Cversion%3D9.9.9-test%7D")
            );
            let from: u128 = req.query("from").unwrap().parse().unwrap();
            let until: u128 = req.query("until").unwrap().parse().unwrap();
            assert_eq!(req.query("from").unwrap().len(), 19, "nanoseconds");
            assert!(until >= from);
            assert_eq!(req.query("spyName").as_deref(), Some("nl6"));
            assert!(req.query("format").is_none());
            assert!(req.query("aggregationType").is_some() && req.query("sampleRate").is_some());
            assert_eq!(
                req.header("Authorization"),
                Some(format!("Basic {}", STANDARD.encode(b"alice:s3cret")).as_str())
            );
            assert_eq!(req.header("X-Scope-OrgID"), Some("tenant-1"));
            assert_eq!(req.header("User-Agent"), Some("nl6/9.9.9-test"));
            let ct = req.header("Content-Type").unwrap();
            assert!(ct.starts_with("multipart/form-data; boundary="), "{ct}");
            let ps = parts(ct, &req.body);
            assert!(
                ps[0]
                    .0
                    .contains(r#"name="profile"; filename="profile.pprof""#),
                "{}",
                ps[0].0
            );
            assert_eq!(&ps[0].1[..2], &[0x1f, 0x8b], "gzip pprof");
            let units = req.query("units").unwrap();
            match units.as_str() {
                "samples" => {
                    assert_eq!(req.query("sampleRate").as_deref(), Some("100"));
                    assert_eq!(ps.len(), 1, "no sample_type_config for CPU");
                }
                "" | "goroutines" => {
                    assert_eq!(ps.len(), 2);
                    assert!(ps[1].0.contains(
                        r#"name="sample_type_config"; filename="sample_type_config.json""#
                    ));
                    let json: serde_json::Value = serde_json::from_slice(&ps[1].1).unwrap();
                    let key = if units.is_empty() {
                        "alloc_space"
                    } else {
                        "goroutine"
                    };
                    assert!(json.get(key).is_some(), "{json}");
                }
                other => panic!("unexpected units {other:?}"),
            }
            *kinds.entry(units).or_insert(0) += 1;
        }
        assert_eq!(kinds.len(), 3, "cpu, heap and threads uploads: {kinds:?}");
        assert!(logs.lines().is_empty(), "{:?}", logs.lines());
    }

    #[test]
    fn status_counts_successes_and_no_credential_headers_without_config() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let (run, _c) = start_fake(
            config(&logs, Duration::from_secs(2)),
            target(&server.url(), Duration::from_millis(100)),
        );
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.uploads >= 3);
        assert!(
            st.uploads >= 3 && st.sdk_errors == 0 && st.last_error.is_none(),
            "{st:?}"
        );
        assert!(st.last_upload_at.is_some());
        assert!(run.stop(Duration::from_secs(5)));
        for req in server.seen() {
            assert!(req.header("Authorization").is_none());
            assert!(req.header("X-Scope-OrgID").is_none());
        }
    }

    #[test]
    fn a_redirect_is_a_failure_and_is_not_followed() {
        let elsewhere = FakeServer::start(200, "");
        let server = FakeServer::start(
            307,
            Box::leak(format!("Location: {}/ingest\r\n", elsewhere.url()).into_boxed_str()),
        );
        let logs = Logs::default();
        let (run, _c) = start_fake(
            config(&logs, Duration::from_secs(2)),
            target(&server.url(), Duration::from_millis(100)),
        );
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.sdk_errors >= 3);
        assert!(st.sdk_errors >= 3 && st.uploads == 0, "{st:?}");
        assert!(st.last_error.as_deref().unwrap().contains("307"), "{st:?}");
        run.stop(Duration::from_secs(3));
        assert!(!server.seen().is_empty());
        assert!(elsewhere.seen().is_empty(), "the redirect was followed");
        assert_eq!(logs.count("failing:"), 1, "{:?}", logs.lines());
    }

    #[test]
    fn a_full_queue_drops_the_oldest_job_and_counts_it() {
        // A listener that never accepts: connections complete in the backlog, answers never come, so each
        // upload lasts the whole timeout while windows keep producing jobs.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let logs = Logs::default();
        let cfg = config(&logs, Duration::from_secs(1)).with_queue_capacity(2);
        let (run, _c) = start_fake(
            cfg,
            target(
                &format!("http://{}", silent.local_addr().unwrap()),
                Duration::from_millis(50),
            ),
        );
        let mut saw_full = false;
        wait_until(Duration::from_secs(8), || {
            saw_full |= run
                .status()
                .last_error
                .is_some_and(|e| e.contains("upload queue full (2 jobs)"));
            saw_full
        });
        assert!(saw_full, "{:?}", run.status());
        let started = Instant::now();
        let flushed = run.stop(Duration::from_millis(500));
        let took = started.elapsed();
        // At most one in-flight upload (1 s) plus the flush budget.
        assert!(took < Duration::from_millis(2000), "{took:?}");
        assert!(!flushed, "uploads to a silent server cannot flush");
        assert_eq!(logs.count("flush abandoned"), 1, "{:?}", logs.lines());
        assert_eq!(logs.count("failing:"), 1, "{:?}", logs.lines());
    }

    #[test]
    fn a_busy_cpu_sampler_skips_windows_then_recovers() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let (source, control) = FakeSource::new();
        control.cpu_busy.store(true, Ordering::SeqCst);
        let pusher =
            PyroscopePusher::with_source(config(&logs, Duration::from_secs(2)), Box::new(source));
        let run = pusher
            .start(target(&server.url(), Duration::from_millis(100)))
            .unwrap();
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| {
            s.sdk_errors >= 2 && s.uploads >= 2
        });
        assert_eq!(
            st.last_error.as_deref(),
            Some("cpu profiling already in use"),
            "{st:?}"
        );
        assert!(st.uploads >= 2, "heap and threads still pushed: {st:?}");
        assert!(server
            .seen()
            .iter()
            .all(|r| r.query("units").as_deref() != Some("samples")));
        control.cpu_busy.store(false, Ordering::SeqCst);
        assert!(
            wait_until(Duration::from_secs(10), || server
                .seen()
                .iter()
                .any(|r| r.query("units").as_deref() == Some("samples"))),
            "CPU windows resume once the sampler is free"
        );
        assert!(run.stop(Duration::from_secs(5)));
        assert_eq!(
            logs.count("[profiling] push to http://127.0.0.1:"),
            1,
            "{:?}",
            logs.lines()
        );
        assert_eq!(logs.count("failing: cpu profiling already in use"), 1);
    }

    #[test]
    fn a_panicking_source_is_an_error_not_a_dead_push() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let (source, control) = FakeSource::new();
        control.heap_panics.store(true, Ordering::SeqCst);
        let pusher =
            PyroscopePusher::with_source(config(&logs, Duration::from_secs(2)), Box::new(source));
        let run = pusher
            .start(target(&server.url(), Duration::from_millis(100)))
            .unwrap();
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| {
            s.sdk_errors >= 2 && s.uploads >= 2
        });
        assert_eq!(
            st.last_error.as_deref(),
            Some("heap profile: the heap snapshot broke"),
            "{st:?}"
        );
        assert_eq!(
            control.heaps.load(Ordering::SeqCst),
            0,
            "every heap call panicked"
        );
        control.heap_panics.store(false, Ordering::SeqCst);
        assert!(
            wait_until(Duration::from_secs(10), || control
                .heaps
                .load(Ordering::SeqCst)
                >= 1),
            "the push thread survived and asks for the heap again"
        );
        assert!(run.stop(Duration::from_secs(5)));
    }

    #[test]
    fn start_touches_no_network_and_stop_flushes_a_final_window_and_heap() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let (run, control) = start_fake(
            config(&logs, Duration::from_secs(2)),
            target(&server.url(), Duration::from_secs(3600)),
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            server.seen().is_empty(),
            "nothing is sent before the first window ends"
        );
        assert!(run.stop(Duration::from_secs(5)));
        let seen = server.seen();
        let units: Vec<String> = seen.iter().map(|r| r.query("units").unwrap()).collect();
        assert_eq!(
            units,
            vec!["samples".to_string(), String::new()],
            "final CPU window, then heap"
        );
        assert_eq!(control.cpu_stops.load(Ordering::SeqCst), 1);
        assert_eq!(control.threads.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn dropping_a_run_without_stop_ends_its_thread_without_sending() {
        let server = FakeServer::start(200, "");
        let logs = Logs::default();
        let (run, control) = start_fake(
            config(&logs, Duration::from_secs(2)),
            target(&server.url(), Duration::from_secs(3600)),
        );
        drop(run);
        assert_eq!(
            control.cpu_stops.load(Ordering::SeqCst),
            1,
            "the sampler is released"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(server.seen().is_empty());
    }

    #[test]
    fn a_bad_address_or_interval_cannot_start() {
        let pusher = PyroscopePusher::with_source(
            config(&Logs::default(), Duration::from_secs(1)),
            Box::new(FakeSource::new().0),
        );
        let err = pusher
            .start(target("ftp://127.0.0.1:1", Duration::from_secs(1)))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("scheme"), "{err}");
        let err = pusher
            .start(target("http://127.0.0.1:1", Duration::ZERO))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("interval"), "{err}");
    }
}

mod stand_in {
    use super::*;

    const CPU: &str = SERIES_TYPES[0];

    #[test]
    fn every_profile_type_is_stored_under_nl6_with_hostname_and_version() {
        let server = StandIn::start(&[]);
        let logs = Logs::default();
        let (run, _c) = start_fake(
            config(&logs, Duration::from_secs(2)),
            target(&server.url(), Duration::from_millis(300)),
        );
        let have_all = wait_until(Duration::from_secs(15), || {
            let types = server.profile_types();
            SERIES_TYPES.iter().all(|t| types.iter().any(|x| x == t))
        });
        assert!(
            have_all,
            "types: {:?}; requests: {:?}",
            server.profile_types(),
            server.requests()
        );
        assert!(run.stop(Duration::from_secs(5)));
        for t in SERIES_TYPES {
            let sel = r#"{service_name="nl6",hostname="test-host",version="9.9.9-test",pyroscope_spy="nl6"}"#;
            assert!(server.total(t, sel) > 0, "{t}");
        }
        assert!(server.total(CPU, r#"{service_name="nl6",subsystem="fake-subsystem"}"#) > 0);
        // The controls: a service nothing pushed, and a label value nothing carries.
        assert_eq!(server.total(CPU, r#"{service_name="nothing-pushed"}"#), 0);
        assert_eq!(
            server.total(CPU, r#"{service_name="nl6",subsystem="bogus"}"#),
            0
        );
        let requests = server.requests();
        assert!(!requests.is_empty());
        for r in &requests {
            assert_eq!(r["status"], 200, "{r}");
            assert!(r["series_written"].as_i64().unwrap() > 0, "{r}");
            let parts: Vec<&str> = r["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            assert!(parts.contains(&"profile (file)"), "{r}");
            assert!(parts.iter().all(|p| p.ends_with("(file)")), "{r}");
        }
        assert_eq!(run_status_errors(&logs), 0);
    }

    fn run_status_errors(logs: &Logs) -> usize {
        logs.count("failing:")
    }

    #[test]
    fn basic_auth_is_sent_only_when_configured() {
        let server = StandIn::start(&["-basic-auth", "alice:s3cret"]);
        let logs = Logs::default();
        let mut t = target(&server.url(), Duration::from_millis(200));
        t.basic_auth = Some(("alice".into(), "s3cret".into()));
        let (run, _c) = start_fake(config(&logs, Duration::from_secs(2)), t);
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.uploads >= 3);
        assert!(st.uploads >= 3 && st.sdk_errors == 0, "{st:?}");
        assert!(run.stop(Duration::from_secs(5)));
        assert!(server
            .requests()
            .iter()
            .all(|r| r["authorization_user"] == "alice"));

        let other = Logs::default();
        let (run, _c) = start_fake(
            config(&other, Duration::from_secs(2)),
            target(&server.url(), Duration::from_millis(200)),
        );
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.sdk_errors >= 2);
        assert!(st.last_error.as_deref().unwrap().contains("401"), "{st:?}");
        run.stop(Duration::from_secs(5));
        for line in logs.lines().iter().chain(other.lines().iter()) {
            assert!(!line.contains("s3cret"), "{line}");
        }
    }

    #[test]
    fn the_tenant_header_satisfies_multitenancy() {
        let server = StandIn::start(&["-multitenancy"]);
        let logs = Logs::default();
        let mut t = target(&server.url(), Duration::from_millis(200));
        t.tenant = Some("lab-7".into());
        let (run, _c) = start_fake(config(&logs, Duration::from_secs(2)), t);
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.uploads >= 3);
        assert!(st.uploads >= 3 && st.sdk_errors == 0, "{st:?}");
        assert!(run.stop(Duration::from_secs(5)));
        assert!(server.requests().iter().all(|r| r["tenant"] == "lab-7"));

        let (run, _c) = start_fake(
            config(&Logs::default(), Duration::from_secs(2)),
            target(&server.url(), Duration::from_millis(200)),
        );
        let st = status_after(run.as_ref(), Duration::from_secs(10), |s| s.sdk_errors >= 1);
        assert!(st.last_error.as_deref().unwrap().contains("401"), "{st:?}");
        run.stop(Duration::from_secs(5));
    }
}

mod failure_modes {
    use super::*;

    struct Scenario {
        name: &'static str,
        address: String,
        expect_in_error: &'static str,
        upload_timeout: Duration,
        interval: Duration,
        budget: Duration,
        /// The stop bound asserted (budget plus slack for the in-flight upload's end).
        bound: Duration,
        /// Errors awaited before stopping.
        min_errors: u64,
    }

    fn run_scenario(s: Scenario) -> Result<(), String> {
        let logs = Logs::default();
        let mut t: PushTarget = target(&s.address, s.interval);
        t.basic_auth = Some(("alice".into(), "s3cret".into()));
        let (run, _c) = start_fake(config(&logs, s.upload_timeout), t);
        let st = status_after(run.as_ref(), Duration::from_secs(30), |st| {
            st.sdk_errors >= s.min_errors
        });
        let err = st.last_error.clone().unwrap_or_default();
        let check = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!("{}: {what}: {st:?} {:?}", s.name, logs.lines()))
            }
        };
        check(st.sdk_errors >= s.min_errors, "sdk_errors grows")?;
        check(st.uploads == 0, "no upload succeeds")?;
        check(
            err.contains(s.expect_in_error),
            "last_error names the cause",
        )?;
        check(
            !err.contains("s3cret") && !err.contains("alice"),
            "no credentials in last_error",
        )?;
        let started = Instant::now();
        run.stop(s.budget);
        let took = started.elapsed();
        check(took <= s.bound, &format!("stop took {took:?}"))?;
        check(
            logs.count("failing:") == 1,
            "exactly one failure line per push",
        )?;
        check(
            logs.lines().iter().all(|l| !l.contains("s3cret")),
            "no credentials in logs",
        )?;
        Ok(())
    }

    /// Stand-in down, 401, 500, a hang past the upload timeout, and the default 10 s timeout with the
    /// gate's 20 s budget: all at once, each in its own thread.
    #[test]
    fn failure_modes_in_parallel() {
        let s401 = StandIn::start(&["-fail-status", "401"]);
        let s500 = StandIn::start(&["-fail-status", "500"]);
        let hang = StandIn::start(&["-delay", "30s"]);
        let hang_default = StandIn::start(&["-delay", "60s"]);
        let quick = |name, address, expect| Scenario {
            name,
            address,
            expect_in_error: expect,
            upload_timeout: Duration::from_secs(2),
            interval: Duration::from_millis(300),
            budget: Duration::from_secs(4),
            bound: Duration::from_millis(4500),
            min_errors: 2,
        };
        let scenarios = vec![
            quick("refused", refused_address(), "refused"),
            quick("401", s401.url(), "401"),
            quick("500", s500.url(), "500"),
            quick("hang", hang.url(), "timeout"),
            Scenario {
                name: "default budget",
                address: hang_default.url(),
                expect_in_error: "timeout",
                upload_timeout: Duration::from_secs(10),
                interval: Duration::from_secs(1),
                budget: Duration::from_secs(20),
                bound: Duration::from_secs(21),
                min_errors: 1,
            },
        ];
        let handles: Vec<_> = scenarios
            .into_iter()
            .map(|s| std::thread::spawn(move || run_scenario(s)))
            .collect();
        let failures: Vec<String> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }
}
