//! `nl6 collect -out s3://…` against a hostile S3-compatible store ([`HostileStore`], 127.0.0.1): listed
//! keys that climb out of the prefix, carry control or bidi characters or are 8 MiB long; a listing that
//! never ends; a store that answers 200 to PUTs and keeps nothing; refusals that echo the signed request.
//! The collector runs as the real binary, bounded in time; the store records what it was sent.

use crate::collect_support;
use crate::common;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collect_support::hostile_store::{
    listing, s3_error, well_behaved, HostileStore, Reply, Request,
};
use collect_support::{closed_port, scratch, tree};

const KEY: &str = "NL6HOSTILEKEY001";
const SECRET: &str = "hostile/secret+Zx9";
const TOKEN: &str = "NL6SESSION/token+abc=XYZ";

/// An expired snapshot directory under the prefix `p/`.
const OLD: &str = "p/svc/2020/01/01/00:00:00/h/80";

/// Runs `nl6 collect -once` into `s3://fleet/p` at `store` (one unreachable target, so one snapshot
/// of meta.json only); returns the exit status, stderr and the spool directory.
fn run(store: &HostileStore, work: &Path, limit: Duration) -> (i32, String, std::path::PathBuf) {
    let targets = work.join("targets.txt");
    fs::write(
        &targets,
        format!("svc http://127.0.0.1:{}\n", closed_port()),
    )
    .unwrap();
    let spool = work.join("spool");
    let out = common::boot()
        .args(&[
            "collect",
            "-targets",
            targets.to_str().unwrap(),
            "-once",
            "-cpu-seconds",
            "1",
            "-timeout",
            "3s",
            "-retain",
            "168h",
            "-out",
            "s3://fleet/p",
            "-s3-endpoint",
            &store.endpoint,
            "-spool",
            spool.to_str().unwrap(),
        ])
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_SESSION_TOKEN", TOKEN)
        .env("AWS_REGION", "us-east-1")
        .run_within(limit);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        spool,
    )
}

/// The store's answer to the sweep's listing of `p/` (the probe and the day pages' listings get
/// the usual empty one).
fn listing_of(keys: Vec<String>) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    move |req: &Request| {
        if req.is_list() && req.param("prefix") == Some("p%2F") && req.param("max-keys").is_none() {
            listing(&keys, None)
        } else {
            well_behaved(req)
        }
    }
}

fn deletes(store: &HostileStore) -> Vec<String> {
    store
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path().to_string())
        .collect()
}

#[test]
fn listed_keys_climbing_out_of_the_prefix_are_never_deleted() {
    let work = scratch("hostile-dotdot");
    let store = HostileStore::start(listing_of(vec![
        format!("{OLD}/cpu.pb.gz"),
        format!("{OLD}/../../../../../../../../../victim/secret.txt"),
        format!(
            "{OLD}/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/victim/two.txt"
        ),
    ]));
    let (rc, log, _) = run(&store, &work, Duration::from_secs(30));
    assert_eq!(rc, 0, "{log}");
    let deleted = deletes(&store);
    assert_eq!(
        deleted,
        vec![format!("/fleet/{}/cpu.pb.gz", OLD.replace(':', "%3A"))],
        "DELETEs other than the one expired object: {log}"
    );
    assert!(
        log.contains("skipped 2 keys listed under s3://fleet/p/ (2 empty, '.' or '..' segments)"),
        "{log}"
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn listed_keys_with_control_and_bidi_characters_reach_stderr_escaped() {
    let work = scratch("hostile-controls");
    let store = HostileStore::start(|req: &Request| {
        if req.method == "DELETE" {
            return s3_error(403, "AccessDenied", "Access Denied");
        }
        listing_of(vec![
            format!("{OLD}/a&#xD;nl6 collect: retention: deleted everything"),
            format!("{OLD}/b\u{85}c"),
            format!("{OLD}/d\u{202e}txt.exe"),
        ])(req)
    });
    let (rc, log, _) = run(&store, &work, Duration::from_secs(30));
    assert_eq!(rc, 0, "{log}");
    for c in ['\r', '\u{85}', '\u{202e}'] {
        assert!(!log.contains(c), "{c:?} reached stderr raw: {log:?}");
    }
    assert!(deletes(&store).is_empty(), "{:?}", deletes(&store));
    assert!(log.contains("skipped 3 keys"), "{log}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn an_endless_listing_ends_on_its_repeated_continuation_token() {
    let work = scratch("hostile-endless");
    let store = HostileStore::start(|req: &Request| {
        if req.is_list() && req.param("max-keys").is_none() {
            listing(&[], Some("the-same-token"))
        } else {
            well_behaved(req)
        }
    });
    let (rc, log, _) = run(&store, &work, Duration::from_secs(20));
    assert_eq!(rc, 0, "{log}");
    let lists = store.requests().iter().filter(|r| r.is_list()).count();
    // The probe, the day page's listing and the sweep's, each two pages at most.
    assert!(lists <= 5, "{lists} listing requests: {log}");
    assert!(
        log.contains("retention: LIST s3://fleet/p/: ListingLoops")
            && log.contains("a continuation token it had sent before"),
        "{log}"
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn a_listing_of_fresh_tokens_and_empty_pages_stops() {
    let work = scratch("hostile-fresh-tokens");
    let n = Arc::new(AtomicUsize::new(0));
    let store = HostileStore::start(move |req: &Request| {
        if req.is_list() && req.param("max-keys").is_none() {
            let i = n.fetch_add(1, Ordering::Relaxed);
            listing(&[], Some(&format!("token-{i}")))
        } else {
            well_behaved(req)
        }
    });
    let (rc, log, _) = run(&store, &work, Duration::from_secs(20));
    assert_eq!(rc, 0, "{log}");
    let lists = store.requests().iter().filter(|r| r.is_list()).count();
    assert!(lists <= 1 + 2 * 16, "{lists} listing requests: {log}");
    assert!(
        log.contains("stopped listing after 16 pages in a row without a key"),
        "{log}"
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn keys_longer_than_s3_allows_are_skipped_in_one_short_line() {
    let work = scratch("hostile-long");
    let long = format!("{OLD}/{}", "A".repeat(8 << 20));
    let store = HostileStore::start(move |req: &Request| {
        if req.method == "DELETE" {
            return s3_error(403, "AccessDenied", "Access Denied");
        }
        listing_of(vec![long.clone(), format!("{OLD}/{}", "B".repeat(1025))])(req)
    });
    let (rc, log, _) = run(&store, &work, Duration::from_secs(60));
    assert_eq!(rc, 0, "{log}");
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2000, "a stderr line of {longest} bytes");
    assert!(deletes(&store).is_empty(), "DELETEs of over-long keys");
    assert!(log.contains("skipped 2 keys"), "{log}");
    assert!(log.contains("2 longer than 1024 bytes"), "{log}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn a_store_that_keeps_nothing_is_caught_and_the_snapshot_stays_in_the_spool() {
    use base64::Engine as _;
    use md5::Digest as _;
    let work = scratch("hostile-keeps-nothing");
    // 200 to every PUT, an ETag that is no MD5 of anything sent, nothing kept.
    let store = HostileStore::start(|req: &Request| {
        if req.method == "PUT" && !req.is_lifecycle() {
            Reply::new(200, Vec::new()).with("etag", "\"00000000000000000000000000000000\"")
        } else {
            well_behaved(req)
        }
    });
    let (rc, log, spool) = run(&store, &work, Duration::from_secs(30));
    assert_eq!(rc, 0, "{log}");
    let puts: Vec<Request> = store
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && !r.is_lifecycle())
        .collect();
    assert!(!puts.is_empty(), "{log}");
    for p in &puts {
        let want = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(&p.body));
        assert_eq!(p.header("content-md5"), Some(want.as_str()), "{}", p.target);
        let signed = p.param("X-Amz-SignedHeaders").unwrap_or("");
        assert!(signed.contains("content-md5"), "{}: unsigned", p.target);
    }
    assert!(log.contains("ETagMismatch"), "{log}");
    assert!(log.contains("kept in the spool"), "{log}");
    let spooled: Vec<String> = tree(&spool)
        .into_iter()
        .filter(|p| p.ends_with("meta.json"))
        .collect();
    assert_eq!(spooled.len(), 1, "{spooled:?}: {log}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn a_refusal_echoing_the_signed_request_prints_no_credential() {
    let work = scratch("hostile-echo");
    // Lists work; everything else is refused with the request echoed back, URL and headers.
    let store = HostileStore::start(|req: &Request| {
        if req.is_list() {
            return well_behaved(req);
        }
        let headers: String = req
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect();
        let echo = format!("{} {} {headers}", req.method, req.target);
        s3_error(403, &format!("AccessDenied {}", req.target), &echo)
    });
    let (rc, log, spool) = run(&store, &work, Duration::from_secs(30));
    assert_eq!(rc, 0, "{log}");
    let mut secrets: Vec<String> = vec![KEY.into(), SECRET.into(), TOKEN.into()];
    secrets.push(
        TOKEN
            .replace('/', "%2F")
            .replace('+', "%2B")
            .replace('=', "%3D"),
    );
    for r in store.requests() {
        if let Some(sig) = r.param("X-Amz-Signature") {
            secrets.push(sig.to_string());
        }
    }
    let mut written = log.clone();
    for f in tree(&spool) {
        if let Ok(text) = fs::read_to_string(spool.join(&f)) {
            written.push_str(&text);
        }
    }
    for s in &secrets {
        assert!(
            !written.contains(s.as_str()),
            "{s:?} printed or written: {log}"
        );
    }
    assert!(
        log.contains("AccessDenied") && log.contains("<redacted>"),
        "{log}"
    );
    fs::remove_dir_all(&work).unwrap();
}
