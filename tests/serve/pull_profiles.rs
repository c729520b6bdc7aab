//! The pull surface's real profiles, against the real binary: Go's headers, the index, deltas, symbol,
//! the CPU-contention rule, empty block/mutex across on/off/on, and `go tool pprof -top` on heap and a
//! two-second CPU profile. scripts/test.sh runs the `serve_pull*` tests again with
//! `--target x86_64-unknown-linux-musl`, where the binary under test is the static one.
use crate::common;

use common::{boot, header};
use std::process::Output;
use std::time::Duration;

fn pprof_top(url: &str) -> Output {
    common::go_pprof(&["-top", url], &std::env::temp_dir())
}

fn assert_profile(r: &common::Reply, filename: &str) {
    let (s, h, b) = r;
    assert_eq!(*s, 200, "{}", String::from_utf8_lossy(b));
    assert_eq!(header(h, "content-type"), Some("application/octet-stream"));
    assert_eq!(
        header(h, "content-disposition"),
        Some(format!("attachment; filename=\"{filename}\"").as_str())
    );
    assert_eq!(header(h, "x-content-type-options"), Some("nosniff"));
    assert!(b.len() > 2 && b[0] == 0x1f && b[1] == 0x8b, "gzip'd pprof");
}

#[test]
fn named_profiles_and_deltas_have_gos_headers() {
    let n = boot().start();
    n.open_pull_only();
    for name in [
        "heap",
        "allocs",
        "goroutine",
        "threadcreate",
        "block",
        "mutex",
    ] {
        assert_profile(&n.http("GET", &format!("/debug/pprof/{name}"), b""), name);
    }
    assert_profile(&n.http("GET", "/debug/pprof/heap?gc=1", b""), "heap");
    for (path, file) in [
        ("/debug/pprof/delta_heap", "heap.pprof.gz"),
        ("/debug/pprof/delta_heap", "heap.pprof.gz"),
        ("/debug/pprof/delta_block", "block.pprof.gz"),
        ("/debug/pprof/delta_mutex", "mutex.pprof.gz"),
        ("/debug/pprof/heap?seconds=1", "heap-delta"),
        ("/debug/pprof/goroutine?seconds=1", "goroutine-delta"),
    ] {
        assert_profile(&n.http("GET", path, b""), file);
    }
    let (s, h, b) = n.http("GET", "/debug/pprof/goroutine?debug=1", b"");
    assert_eq!(
        (s, header(&h, "content-type")),
        (200, Some("text/plain; charset=utf-8"))
    );
    assert!(String::from_utf8_lossy(&b).starts_with("goroutine profile: total "));
    let (s, _, b) = n.http("GET", "/debug/pprof/heap?debug=1", b"");
    assert_eq!(s, 200);
    assert!(String::from_utf8_lossy(&b).starts_with("heap profile: "));
}

#[test]
fn index_lists_every_profile_from_the_table() {
    let n = boot().start();
    n.open_pull_only();
    let (s, h, b) = n.http("GET", "/debug/pprof/", b"");
    assert_eq!(
        (s, header(&h, "content-type")),
        (200, Some("text/html; charset=utf-8"))
    );
    let html = String::from_utf8_lossy(&b);
    for e in nl6_profile::pull::PROFILES {
        assert!(html.contains(&format!(">{}</a>", e.name)), "{}", e.name);
    }
    assert!(html.contains("href=\"heap?debug=1\"") && html.contains("goroutine?debug=2"));
}

#[test]
fn go_tool_pprof_reads_heap_and_a_two_second_cpu_profile() {
    let n = boot().start();
    n.open_pull_only();
    let out = pprof_top(&format!("http://{}/debug/pprof/heap", n.addr));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Type: inuse_space"));
    let out = pprof_top(&format!("http://{}/debug/pprof/profile?seconds=2", n.addr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Type: cpu") && stdout.contains("Duration: 2"),
        "{stdout}"
    );
}

#[test]
fn a_second_cpu_profile_is_refused_not_masked() {
    let n = boot().start();
    n.open_pull_only();
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            n.http_with(
                "GET",
                "/debug/pprof/profile?seconds=3",
                &[],
                b"",
                Duration::from_secs(15),
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        let (status, h, b) = n.http("GET", "/debug/pprof/profile?seconds=1", b"");
        assert_eq!(status, 500);
        assert_eq!(
            b,
            b"Could not enable CPU profiling: cpu profiling already in use\n"
        );
        assert_eq!(header(&h, "x-go-pprof"), Some("1"));
        assert_eq!(first.join().unwrap().0, 200);
    });
}

#[test]
fn mutex_and_block_stay_empty_across_on_off_on() {
    let n = boot().start();
    for _ in 0..2 {
        n.open_pull_only();
        for name in ["block", "mutex", "delta_block", "delta_mutex"] {
            let out = pprof_top(&format!("http://{}/debug/pprof/{name}", n.addr));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.contains("of 0 total"), "{name}: {stdout}");
        }
        let (s, _, _) = n.http("POST", "/api/v1/profiling", br#"{"enabled":false}"#);
        assert_eq!(s, 200);
    }
}

#[test]
fn symbol_names_addresses_from_the_goroutine_profile() {
    let n = boot().start();
    n.open_pull_only();
    let (_, _, b) = n.http("GET", "/debug/pprof/goroutine?debug=1", b"");
    let text = String::from_utf8_lossy(&b);
    let addrs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(" @ ").map(|(_, pcs)| pcs))
        .flat_map(|pcs| pcs.split(' '))
        .take(5)
        .collect();
    assert!(!addrs.is_empty(), "{text}");
    let query = addrs.join("+");
    for (method, path, body) in [
        ("GET", format!("/debug/pprof/symbol?{query}"), Vec::new()),
        (
            "POST",
            "/debug/pprof/symbol".to_string(),
            query.clone().into_bytes(),
        ),
    ] {
        let (s, _, b) = n.http(method, &path, &body);
        let out = String::from_utf8_lossy(&b);
        assert_eq!(s, 200);
        assert!(out.starts_with("num_symbols: 1\n"), "{out}");
        assert!(
            out.lines()
                .skip(1)
                .any(|l| l.starts_with("0x")
                    && l.split_once(' ').is_some_and(|(_, n)| !n.is_empty())),
            "{out}"
        );
    }
}

#[test]
fn heap_rate_flag_reaches_the_sampler() {
    let n = boot().args(&["-profiling-heap-rate", "4096"]).start();
    n.open_pull_only();
    let (s, _, b) = n.http("GET", "/debug/pprof/heap?debug=1", b"");
    assert_eq!(s, 200);
    let text = String::from_utf8_lossy(&b);
    assert!(
        text.lines().next().unwrap_or("").ends_with("@ heap/8192"),
        "{}",
        &text[..text.len().min(200)]
    );
}
