//! The push crate's `push_embed` example (crates/nl6-push/examples/push_embed.rs), a small embedder of the
//! engine and the push, pushes to the repository's Pyroscope `/ingest` double (tests/pyroscope-ingest,
//! which parses every upload with google/pprof): the double accepts every upload and stores every series
//! (CPU, the four heap types, goroutines) under the example's own `service_name`, and the example's own
//! report agrees with the double's count. The test builds the example with cargo into its own target
//! directory (the `cargo test` running it holds the workspace's). Only processes started here are killed.
//!
//!   cargo test --test push crate_example::

use crate::common;
use crate::push_support;

use push_support::{StandIn, SERIES_TYPES};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Builds the example (same target as this test) and returns its path.
fn example_binary() -> PathBuf {
    common::example::build("nl6-push", "push_embed", "push-embed-example", None)
}

#[test]
fn the_example_embedder_lands_every_series_in_the_double() {
    let binary = example_binary();
    let server = StandIn::start(&[]);
    let mut child = Command::new(&binary)
        .args([server.url().as_str(), "6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the example");
    // 6 s of work, a flush bounded at 10 s, and room for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the example did not end within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "example: {status}\n{stdout}\n{stderr}");

    let requests = server.requests();
    assert!(!requests.is_empty(), "no upload reached the double");
    for r in &requests {
        assert_eq!(r["status"], 200, "refused upload: {r}");
        assert_eq!(r["user_agent"], "push-example/0.1.0", "{r}");
    }
    let uploads: usize = stdout
        .split("uploads=")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no upload count in {stdout:?}"));
    assert_eq!(uploads, requests.len(), "{stdout}");

    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let selector = format!(
        r#"{{service_name="push-example",hostname="{}"}}"#,
        nl6::push::ingest_url::sanitize_label_value(&hostname)
    );
    for t in SERIES_TYPES {
        assert!(
            server.total(t, &selector) > 0,
            "{t} under {selector}: {:?}",
            server.profile_types()
        );
    }
}
