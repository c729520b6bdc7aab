//! Push checks that read or change process-wide state — the thread list and the TLS root variables —
//! so they run one after another inside a single test, with nothing else in this binary.

mod common;
mod push_support;

use nl6::gate::port::Pusher;
use nl6::push::PyroscopePusher;
use push_support::*;
use std::time::Duration;

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect()
}

fn push_threads() -> usize {
    thread_names().iter().filter(|n| *n == "nl6-push").count()
}

/// start/stop/start/stop/start/stop: exactly one `nl6-push` thread while a push runs, and the thread list
/// back to its baseline after each stop.
fn toggling_leaves_no_thread_behind() {
    let server = FakeServer::start(200, "");
    let logs = Logs::default();
    let (source, _control) = FakeSource::new();
    let pusher =
        PyroscopePusher::with_source(config(&logs, Duration::from_secs(2)), Box::new(source));
    let baseline = thread_names().len();
    for round in 0..3 {
        let run = pusher
            .start(target(&server.url(), Duration::from_millis(50)))
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(10), || run.status().uploads >= 3),
            "round {round}: {:?}",
            run.status()
        );
        // Sampled while uploads run (every 50 ms): never a second thread named `nl6-push` (a helper
        // spawned by the push thread would inherit the name).
        for _ in 0..100 {
            assert_eq!(push_threads(), 1, "round {round}: one push thread");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            thread_names().len(),
            baseline + 1,
            "round {round}: {:?}",
            thread_names()
        );
        assert!(run.stop(Duration::from_secs(5)));
        assert_eq!(push_threads(), 0, "round {round}: push thread ended");
        assert_eq!(
            thread_names().len(),
            baseline,
            "round {round}: {:?}",
            thread_names()
        );
    }
    assert!(logs.lines().is_empty(), "{:?}", logs.lines());
}

/// Runs one push to `url` until it has either three uploads or two errors; returns its status.
fn push_once(url: &str) -> nl6::gate::port::PushStatus {
    let logs = Logs::default();
    let (source, _c) = FakeSource::new();
    let pusher =
        PyroscopePusher::with_source(config(&logs, Duration::from_secs(3)), Box::new(source));
    let run = pusher
        .start(target(url, Duration::from_millis(200)))
        .unwrap();
    wait_until(Duration::from_secs(15), || {
        let s = run.status();
        s.uploads >= 3 || s.sdk_errors >= 2
    });
    let status = run.status();
    run.stop(Duration::from_secs(5));
    status
}

/// HTTPS to the stand-in with a self-signed certificate: refused with the system roots, trusted through
/// `SSL_CERT_FILE`, and through `SSL_CERT_DIR`.
fn https_roots_follow_ssl_cert_file_and_dir() {
    let dir = std::env::temp_dir().join(format!("nl6-push-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("roots")).unwrap();
    let (cert, key) = self_signed_certificate(&dir);
    std::fs::copy(&cert, dir.join("roots/nl6-test.pem")).unwrap();
    let server = StandIn::start(&[
        "-tls-cert",
        cert.to_str().unwrap(),
        "-tls-key",
        key.to_str().unwrap(),
    ]);
    let url = format!("https://127.0.0.1:{}", server.port);
    // Only this test runs in this process, and no push thread is alive while the variables change.
    std::env::remove_var("SSL_CERT_FILE");
    std::env::remove_var("SSL_CERT_DIR");

    let untrusted = push_once(&url);
    assert_eq!(untrusted.uploads, 0, "{untrusted:?}");
    let err = untrusted.last_error.unwrap_or_default();
    assert!(err.contains("certificate") || err.contains("CA"), "{err}");

    std::env::set_var("SSL_CERT_FILE", &cert);
    let by_file = push_once(&url);
    assert!(
        by_file.uploads >= 3 && by_file.sdk_errors == 0,
        "SSL_CERT_FILE: {by_file:?}"
    );
    std::env::remove_var("SSL_CERT_FILE");

    std::env::set_var("SSL_CERT_DIR", dir.join("roots"));
    let by_dir = push_once(&url);
    assert!(
        by_dir.uploads >= 3 && by_dir.sdk_errors == 0,
        "SSL_CERT_DIR: {by_dir:?}"
    );
    std::env::remove_var("SSL_CERT_DIR");

    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `HTTP_PROXY` is honoured for a non-loopback address: the request goes to the proxy (a loopback fake
/// that refuses the tunnel), the push logs the proxy once without its credentials, and nothing resolves
/// or contacts the address itself.
fn http_proxy_is_used_and_logged_without_credentials() {
    let proxy = FakeServer::start(403, "");
    std::env::set_var("HTTP_PROXY", format!("http://puser:ppass@{}", proxy.addr));
    let logs = Logs::default();
    let (source, _c) = FakeSource::new();
    let pusher =
        PyroscopePusher::with_source(config(&logs, Duration::from_secs(2)), Box::new(source));
    let run = pusher
        .start(target(
            "http://pyroscope.nl6-test.invalid:4040",
            Duration::from_millis(100),
        ))
        .unwrap();
    std::env::remove_var("HTTP_PROXY");
    assert!(
        wait_until(Duration::from_secs(10), || run.status().sdk_errors >= 2),
        "{:?}",
        run.status()
    );
    let status = run.status();
    run.stop(Duration::from_secs(3));
    let seen = proxy.seen();
    assert!(!seen.is_empty(), "the proxy was used");
    assert!(
        seen[0].target.contains("pyroscope.nl6-test.invalid:4040"),
        "{:?}",
        seen[0]
    );
    let want = format!("goes through proxy http://{}", proxy.addr);
    assert_eq!(logs.count(&want), 1, "{:?}", logs.lines());
    for line in logs.lines().iter().chain(status.last_error.iter()) {
        assert!(!line.contains("ppass") && !line.contains("puser"), "{line}");
    }
}

#[test]
fn process_wide_push_checks() {
    toggling_leaves_no_thread_behind();
    https_roots_follow_ssl_cert_file_and_dir();
    http_proxy_is_used_and_logged_without_credentials();
}
