//! The push end to end through the real binary (`-profiling-pyroscope … -profiling-upload-interval 1s`)
//! into the Pyroscope stand-in (tests/push_support): every profile type under `service_name="nl6"` with
//! `hostname` and `version`; credentials and tenant only to the flag's address, withheld (and logged) for
//! a runtime re-target, never in GET bodies, logs or errors; the CPU-contention rule while pushing;
//! on/off/on leaves no `nl6-push` thread or CPU timer behind and SIGTERM exits 0 within the flush bound;
//! the failure modes (collector down, 401, 500, a hang past the upload timeout) side by side.

use crate::common;
use crate::push_support;

use common::{boot, header, json, unused_loopback_url, Nl6};
use push_support::{self_signed_certificate, wait_until, FakeServer, StandIn};
use serde_json::Value;
use std::cell::RefCell;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
const TYPES: [&str; 6] = [
    CPU,
    "memory:alloc_objects:count:space:bytes",
    "memory:alloc_space:bytes:space:bytes",
    "memory:inuse_objects:count:space:bytes",
    "memory:inuse_space:bytes:space:bytes",
    "goroutines:goroutine:count:goroutine:count",
];
const USER: &str = "nl6-lab-operator";
const PASSWORD: &str = "Pa55-w0rd-q7Zx";
const TENANT: &str = "lab-7";
const BUSY: &str = "Could not enable CPU profiling: cpu profiling already in use";
/// Closing the gate: two upload timeouts, plus a second of slack.
const CLOSE_BOUND: Duration = Duration::from_secs(21);

fn os_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// A basic-auth file (`USER:PASSWORD`) in the test's temp dir, unique per call site.
fn credentials_file(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("push_binary");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("auth-{tag}-{}", std::process::id()));
    std::fs::write(&path, format!("{USER}:{PASSWORD}\n")).unwrap();
    path
}

/// `-profiling-pyroscope <url> -profiling-upload-interval 1s`, with the credentials file and tenant.
fn pushing_to(url: &str, auth_file: &std::path::Path) -> common::Boot {
    boot()
        .args(&["-profiling-pyroscope", url])
        .args(&["-profiling-upload-interval", "1s"])
        .args(&[
            "-profiling-pyroscope-basic-auth-file",
            auth_file.to_str().unwrap(),
        ])
        .args(&["-profiling-pyroscope-tenant", TENANT])
        // Every series must hold something, inuse_* included: at the default 512 KiB an idle binary keeps
        // too little alive to be sampled for sure (the symbolizer maps the executable rather than read it
        // into the heap), so the rate is small.
        .args(&["-profiling-heap-rate", "4096"])
}

/// A running binary plus a transcript of every response body it sent, for the credential scan.
struct Watched {
    n: Nl6,
    bodies: RefCell<Vec<String>>,
}

impl Watched {
    fn new(n: Nl6) -> Watched {
        Watched {
            n,
            bodies: RefCell::new(Vec::new()),
        }
    }
    fn request(&self, method: &str, path: &str, body: &str, timeout: Duration) -> common::Reply {
        let reply = self
            .n
            .http_with(method, path, &[], body.as_bytes(), timeout);
        self.bodies
            .borrow_mut()
            .push(String::from_utf8_lossy(&reply.2).into_owned());
        reply
    }
    fn state(&self) -> Value {
        let (status, _, body) =
            self.request("GET", "/api/v1/profiling", "", Duration::from_secs(5));
        assert_eq!(status, 200);
        json(&body)["data"].clone()
    }
    fn post(&self, body: &str) -> (u16, Value) {
        let (status, _, b) = self.request("POST", "/api/v1/profiling", body, CLOSE_BOUND);
        (status, json(&b))
    }
    /// No response body, log line or error message holds the user or the password.
    fn assert_no_secrets(&self) {
        let stderr = self.n.stderr();
        for text in self.bodies.borrow().iter().chain(std::iter::once(&stderr)) {
            assert!(
                !text.contains(PASSWORD) && !text.contains(USER),
                "a credential leaked: {text}"
            );
        }
    }
}

/// Runs `f` while another thread keeps `n` busy (heap profiles, encoded on request), so its CPU windows
/// are not empty at idle.
fn with_load<T>(n: &Nl6, f: impl FnOnce() -> T) -> T {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let end = Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                n.http("GET", "/debug/pprof/heap", b"");
            }
        });
        let out = f();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    })
}

/// Threads of `pid` named `nl6-push`.
fn push_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "nl6-push")
                })
                .count()
        })
        .unwrap_or(0)
}

/// POSIX timers of `pid` (`/proc/<pid>/timers`), or `None` when the kernel does not expose them.
fn posix_timers(pid: u32) -> Option<usize> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/timers")).ok()?;
    Some(text.lines().filter(|l| l.starts_with("ID:")).count())
}

#[test]
fn every_type_lands_and_credentials_go_to_the_flag_address_only() {
    let flagged = StandIn::start(&[
        "-basic-auth",
        &format!("{USER}:{PASSWORD}"),
        "-multitenancy",
    ]);
    let other = StandIn::start(&[]);
    let auth = credentials_file("flag");
    let w = Watched::new(pushing_to(&flagged.url(), &auth).start());

    // Requests keep the binary's CPU busy enough that every 1 s window holds samples.
    let all_types = with_load(&w.n, || {
        wait_until(Duration::from_secs(20), || {
            let have = flagged.profile_types();
            TYPES.iter().all(|t| have.iter().any(|h| h == t))
                && flagged.total(CPU, r#"{service_name="nl6"}"#) > 0
        })
    });
    assert!(
        all_types,
        "types {:?}; requests {:?}; {}",
        flagged.profile_types(),
        flagged.requests(),
        w.n.stderr()
    );
    let series = format!(
        r#"{{service_name="nl6",hostname="{}",version="{}"}}"#,
        os_hostname(),
        env!("CARGO_PKG_VERSION")
    );
    for t in TYPES {
        assert!(flagged.total(t, &series) > 0, "{t} under {series}");
    }
    assert_eq!(
        flagged.total(CPU, r#"{service_name="nothing-pushed"}"#),
        0,
        "the control: a service nothing pushed holds nothing"
    );

    // Status: pushing, uploads growing, a last upload time, no errors.
    let first = w.state();
    assert_eq!(first["pushing"], true, "{first}");
    assert_eq!(first["sdk_errors"], 0, "{first}");
    assert!(first["last_upload_at"].is_string(), "{first}");
    let uploads = first["uploads"].as_u64().unwrap();
    assert!(uploads > 0, "{first}");
    assert!(
        wait_until(Duration::from_secs(10), || w.state()["uploads"]
            .as_u64()
            .unwrap()
            > uploads),
        "uploads do not grow: {}",
        w.state()
    );

    // The CPU-contention rule: the push holds the sampler.
    let (status, _, body) = w.request(
        "GET",
        "/debug/pprof/profile?seconds=1",
        "",
        Duration::from_secs(5),
    );
    assert_eq!(status, 500, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains(BUSY));

    let sent = flagged.requests();
    assert!(!sent.is_empty());
    for r in &sent {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["authorization_user"], USER, "{r}");
        assert_eq!(r["tenant"], TENANT, "{r}");
        assert_eq!(
            r["user_agent"],
            format!("nl6/{}", env!("CARGO_PKG_VERSION")),
            "{r}"
        );
    }

    // A runtime re-target to another address pushes without the credentials, and says so.
    let (status, v) = w.post(&format!(
        r#"{{"enabled":true,"server_address":"{}"}}"#,
        other.url()
    ));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["pushing"], true, "{v}");
    assert_eq!(v["data"]["server_address"], other.url(), "{v}");
    assert!(w.n.wait_for_log(
        "credentials withheld: address differs from -profiling-pyroscope",
        Duration::from_secs(5)
    ));
    let landed = with_load(&w.n, || {
        wait_until(Duration::from_secs(15), || {
            other.total(CPU, r#"{service_name="nl6"}"#) > 0
        })
    });
    assert!(landed, "{:?}", other.requests());
    for r in other.requests() {
        assert!(r.get("authorization_user").is_none(), "{r}");
        assert!(r.get("tenant").is_none(), "{r}");
    }

    // Pull-only frees the CPU path.
    let (status, v) = w.post(r#"{"enabled":true,"server_address":""}"#);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["pushing"], false, "{v}");
    let (status, headers, body) = w.request(
        "GET",
        "/debug/pprof/profile?seconds=1",
        "",
        Duration::from_secs(10),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(header(&headers, "content-type")
        .unwrap()
        .starts_with("application/octet-stream"));
    assert!(nl6_profile::proto::decode(&body).is_ok());

    w.state();
    w.assert_no_secrets();
}

/// Upload body sizes by kind, from what the fake server saw: (kind, sizes).
fn sizes_by_kind(seen: &[push_support::Seen]) -> Vec<(&'static str, Vec<usize>)> {
    let mut out: Vec<(&'static str, Vec<usize>)> =
        vec![("cpu", vec![]), ("heap", vec![]), ("threads", vec![])];
    for s in seen.iter().filter(|s| s.path() == "/ingest") {
        let body = String::from_utf8_lossy(&s.body);
        let kind = if !body.contains("sample_type_config") {
            0
        } else if body.contains("goroutine") {
            2
        } else {
            1
        };
        out[kind].1.push(s.body.len());
    }
    out
}

#[test]
fn on_off_on_leaves_no_thread_or_timer_and_sigterm_exits_zero() {
    let fake = FakeServer::start(200, "");
    let mut n = boot()
        .args(&["-profiling-pyroscope", &fake.url()])
        .args(&["-profiling-upload-interval", "1s"])
        .start();
    let pid = n.pid();
    let uploads = |n: &Nl6| {
        json(&n.http("GET", "/api/v1/profiling", b"").2)["data"]["uploads"]
            .as_u64()
            .unwrap()
    };
    let post = |n: &Nl6, body: &str| {
        let started = Instant::now();
        let (status, _, b) = n.http_with(
            "POST",
            "/api/v1/profiling",
            &[],
            body.as_bytes(),
            CLOSE_BOUND,
        );
        (status, json(&b), started.elapsed())
    };
    let timers_exposed = posix_timers(pid).is_some();
    for round in 0..2 {
        assert!(
            wait_until(Duration::from_secs(15), || uploads(&n) >= 3),
            "round {round}: {}",
            n.stderr()
        );
        // Sampled across an upload burst: never a second thread named `nl6-push`.
        for _ in 0..150 {
            assert_eq!(push_threads(pid), 1, "round {round}: one push thread");
            std::thread::sleep(Duration::from_millis(10));
        }
        if timers_exposed {
            assert!(
                posix_timers(pid).unwrap() > 0,
                "round {round}: the push's CPU window holds timers"
            );
        }
        let (status, v, took) = post(&n, r#"{"enabled":false}"#);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["data"]["pushing"], false, "{v}");
        assert!(took < CLOSE_BOUND, "round {round}: off took {took:?}");
        eprintln!("round {round}: off (flush) took {took:?}");
        assert_eq!(push_threads(pid), 0, "round {round}: push thread gone");
        if timers_exposed {
            // Deleted when the push's CPU session stops, before the POST answers.
            assert_eq!(
                posix_timers(pid),
                Some(0),
                "round {round}: CPU timers left: {}",
                std::fs::read_to_string(format!("/proc/{pid}/timers")).unwrap_or_default()
            );
        }
        // Back on: the omitted address is the flag's.
        let (status, v, _) = post(&n, r#"{"enabled":true}"#);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["data"]["pushing"], true, "{v}");
    }
    assert!(wait_until(Duration::from_secs(15), || uploads(&n) >= 3));
    let started = Instant::now();
    let status = n.terminate(CLOSE_BOUND);
    let took = started.elapsed();
    assert!(status.success(), "{status:?}: {}", n.stderr());
    eprintln!("SIGTERM while pushing: exit 0 after {took:?}");
    assert!(n.stderr().contains("nl6: exiting"));
    assert_eq!(
        n.log_lines("[profiling] push to").len(),
        0,
        "no push failed: {}",
        n.stderr()
    );

    for (kind, sizes) in sizes_by_kind(&fake.seen()) {
        assert!(!sizes.is_empty(), "no {kind} upload");
        assert!(sizes.iter().all(|s| *s > 200), "{kind}: {sizes:?}");
        let mut sorted = sizes.clone();
        sorted.sort();
        eprintln!(
            "{kind} upload bodies at idle: {} uploads, min {} / median {} / max {} bytes",
            sorted.len(),
            sorted[0],
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1]
        );
    }
}

struct FailureMode {
    name: &'static str,
    address: String,
    expect_in_error: &'static str,
    min_errors: u64,
    /// Close with SIGTERM instead of a POST.
    sigterm: bool,
}

fn run_failure_mode(f: FailureMode) -> Result<String, String> {
    let auth = credentials_file(f.name);
    let mut n = pushing_to(&f.address, &auth).start();
    let fail = |n: &Nl6, what: &str| Err(format!("{}: {what}\n{}", f.name, n.stderr()));
    let mut bodies = Vec::new();
    let end = Instant::now() + Duration::from_secs(40);
    let v = loop {
        // Serving continues while uploads fail or hang.
        let started = Instant::now();
        let (status, _, body) = n.http("GET", "/api/v1/profiling", b"");
        let took = started.elapsed();
        if status != 200 || took > Duration::from_secs(1) {
            return fail(&n, &format!("GET answered {status} after {took:?}"));
        }
        let v = json(&body)["data"].clone();
        bodies.push(String::from_utf8_lossy(&body).into_owned());
        if v["sdk_errors"].as_u64().unwrap() >= f.min_errors {
            break v;
        }
        if Instant::now() > end {
            return fail(
                &n,
                &format!("sdk_errors did not reach {}: {v}", f.min_errors),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if v["pushing"] != true || v["uploads"] != 0 {
        return fail(&n, &format!("pushing, no upload: {v}"));
    }
    let error = v["last_error"].as_str().unwrap_or("");
    if !error.contains(f.expect_in_error) {
        return fail(
            &n,
            &format!("last_error names {:?}: {v}", f.expect_in_error),
        );
    }
    let (status, _, heap) = n.http("GET", "/debug/pprof/heap", b"");
    if status != 200 || heap.is_empty() {
        return fail(&n, &format!("/debug/pprof/heap answered {status}"));
    }
    let started = Instant::now();
    let closed_by = if f.sigterm {
        let exit = n.terminate(CLOSE_BOUND + Duration::from_secs(5));
        let took = started.elapsed();
        if !exit.success() || took > CLOSE_BOUND {
            return fail(&n, &format!("SIGTERM: {exit:?} after {took:?}"));
        }
        format!("exit 0 after SIGTERM in {took:?}")
    } else {
        let (status, _, body) = n.http_with(
            "POST",
            "/api/v1/profiling",
            &[],
            br#"{"enabled":false}"#,
            CLOSE_BOUND + Duration::from_secs(5),
        );
        let took = started.elapsed();
        bodies.push(String::from_utf8_lossy(&body).into_owned());
        let closed = json(&body);
        // The gate closes either way; a flush abandoned at its deadline (the hang) answers 500 with
        // the closed state and says so.
        let abandoned = status == 500
            && closed["error"]
                .as_str()
                .is_some_and(|e| e.contains("flush abandoned"));
        if (status != 200 && !abandoned)
            || took > CLOSE_BOUND
            || closed["data"]["enabled"] != false
            || closed["data"]["pushing"] != false
        {
            return fail(
                &n,
                &format!("closing answered {status} after {took:?}: {closed}"),
            );
        }
        let (_, _, after) = n.http("GET", "/api/v1/profiling", b"");
        bodies.push(String::from_utf8_lossy(&after).into_owned());
        format!("closed ({status}) in {took:?}")
    };
    let failing: Vec<String> = n
        .log_lines("[profiling] ")
        .into_iter()
        .filter(|l| l.contains("failing:"))
        .collect();
    if failing.len() != 1 || !failing[0].starts_with(&format!("[profiling] push to {}", f.address))
    {
        return fail(&n, &format!("one failure line per push: {failing:?}"));
    }
    let stderr = n.stderr();
    if bodies
        .iter()
        .chain(std::iter::once(&stderr))
        .any(|t| t.contains(PASSWORD) || t.contains(USER))
    {
        return fail(&n, "a credential leaked");
    }
    Ok(format!(
        "{}: {} errors, {closed_by}",
        f.name, v["sdk_errors"]
    ))
}

#[test]
fn failure_modes_through_the_binary_in_parallel() {
    let s401 = StandIn::start(&["-fail-status", "401"]);
    let s500 = StandIn::start(&["-fail-status", "500"]);
    // Longer than the binary's 10 s upload timeout.
    let hang = StandIn::start(&["-delay", "30s"]);
    let modes = vec![
        FailureMode {
            name: "down",
            address: unused_loopback_url(),
            expect_in_error: "refused",
            min_errors: 2,
            sigterm: false,
        },
        FailureMode {
            name: "401",
            address: s401.url(),
            expect_in_error: "401",
            min_errors: 2,
            sigterm: false,
        },
        FailureMode {
            name: "500",
            address: s500.url(),
            expect_in_error: "500",
            min_errors: 2,
            sigterm: false,
        },
        FailureMode {
            name: "hang",
            address: hang.url(),
            expect_in_error: "timeout",
            min_errors: 1,
            sigterm: false,
        },
        FailureMode {
            name: "hang-sigterm",
            address: hang.url(),
            expect_in_error: "timeout",
            min_errors: 1,
            sigterm: true,
        },
    ];
    let handles: Vec<_> = modes
        .into_iter()
        .map(|m| std::thread::spawn(move || run_failure_mode(m)))
        .collect();
    let results: Vec<Result<String, String>> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    for r in results.iter().flatten() {
        eprintln!("{r}");
    }
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// HTTPS to the stand-in with a self-signed certificate: trusted through `SSL_CERT_FILE`; the control, a
/// bundle holding another certificate, is refused with a certificate error (when set, only those roots).
#[test]
fn https_trusts_the_roots_in_ssl_cert_file() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("push_binary-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("other")).unwrap();
    let (cert, key) = self_signed_certificate(&dir);
    let (other_cert, _) = self_signed_certificate(&dir.join("other"));
    let server = StandIn::start(&[
        "-tls-cert",
        cert.to_str().unwrap(),
        "-tls-key",
        key.to_str().unwrap(),
    ]);
    let url = format!("https://127.0.0.1:{}", server.port);
    let start = |roots: &std::path::Path| {
        boot()
            .args(&["-profiling-pyroscope", &url])
            .args(&["-profiling-upload-interval", "1s"])
            .env("SSL_CERT_FILE", roots.to_str().unwrap())
            .env("SSL_CERT_DIR", dir.join("no-such-dir").to_str().unwrap())
            .start()
    };
    let trusted = start(&cert);
    let untrusted = start(&other_cert);
    let state = |n: &Nl6| json(&n.http("GET", "/api/v1/profiling", b"").2)["data"].clone();
    assert!(
        wait_until(Duration::from_secs(15), || {
            state(&trusted)["uploads"].as_u64().unwrap() >= 3
                && state(&untrusted)["sdk_errors"].as_u64().unwrap() >= 1
        }),
        "trusted {}\nuntrusted {}",
        state(&trusted),
        state(&untrusted)
    );
    assert_eq!(state(&trusted)["sdk_errors"], 0, "{}", trusted.stderr());
    let refused = state(&untrusted);
    assert_eq!(refused["uploads"], 0, "{refused}");
    let error = refused["last_error"].as_str().unwrap();
    assert!(
        error.contains("certificate") || error.contains("CA"),
        "{error}"
    );
    drop((trusted, untrusted));
    let _ = std::fs::remove_dir_all(&dir);
}
