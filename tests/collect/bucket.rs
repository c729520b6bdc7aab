//! `nl6 collect -out s3://…` against a real SeaweedFS (signatures enforced, 127.0.0.1 only): the same tree
//! and files as a local `-out` run, the spool across a store stopped mid-cycle, one clear line and exit 1
//! for wrong keys and a missing bucket, a black-holed store costing one timeout, the lifecycle rule set and
//! read back, retention inside the prefix only, collisions refused, the `gs://` shorthand, and no secret in
//! any log, file or object. The collector runs as the real binary; every wait is bounded.

use crate::collect_support;
use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use collect_support::seaweed::{Weed, KEY, SECRET};
use collect_support::*;
use nl6::collect::archive::Stamp;

/// Runs `nl6 collect ARGS` to completion with the test identity (or `creds`) in the environment.
fn collect_bin(args: &[&str], creds: (&str, &str)) -> (i32, String) {
    let mut all = vec!["collect"];
    all.extend_from_slice(args);
    let out = common::boot()
        .args(&all)
        .env("AWS_ACCESS_KEY_ID", creds.0)
        .env("AWS_SECRET_ACCESS_KEY", creds.1)
        .env("AWS_REGION", "us-east-1")
        .run_within(Duration::from_secs(90));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn targets(work: &Path, ports: &[u16]) -> String {
    let f = work.join(format!("targets-{}.txt", ports[0]));
    let text: String = ports
        .iter()
        .map(|p| format!("svc http://127.0.0.1:{p}\n"))
        .collect();
    fs::write(&f, text).unwrap();
    f.to_string_lossy().into_owned()
}

/// Every file under `dir`, relative, `/`-joined → bytes.
fn local_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    tree(dir)
        .into_iter()
        .filter(|rel| fs::symlink_metadata(dir.join(rel)).unwrap().is_file())
        .map(|rel| {
            let bytes = fs::read(dir.join(&rel)).unwrap();
            (rel, bytes)
        })
        .collect()
}

/// The archive with its cycle's time taken out: `svc/<y>/<m>/<d>/<hms>/…` → `svc/DATE/…`, the stamp in
/// file contents → `STAMP`, and meta.json's clock readings dropped. Everything else stays byte for byte.
fn normalized(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .filter(|(k, _)| !k.ends_with("index.html"))
        .map(|(k, v)| {
            let parts: Vec<&str> = k.split('/').collect();
            assert!(parts.len() == 8, "not a snapshot file: {k}");
            let stamp = Stamp::parse_components(parts[1], parts[2], parts[3], parts[4])
                .unwrap_or_else(|| panic!("{k}"))
                .rfc3339();
            let key = format!("{}/DATE/{}", parts[0], parts[5..].join("/"));
            let text = String::from_utf8_lossy(v).replace(&stamp, "STAMP");
            let bytes = if k.ends_with("meta.json") {
                let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
                for f in ["started", "finished", "duration_ms", "cycle_start"] {
                    m.as_object_mut().unwrap().remove(f);
                }
                for p in m["profiles"].as_object_mut().unwrap().values_mut() {
                    p.as_object_mut().unwrap().remove("fetch_ms");
                }
                serde_json::to_vec_pretty(&m).unwrap()
            } else if String::from_utf8(v.clone()).is_ok() {
                text.into_bytes()
            } else {
                v.clone()
            };
            (key, bytes)
        })
        .collect()
}

#[test]
fn the_bucket_holds_the_same_tree_and_files_as_a_local_run() {
    let work = scratch("bucket-same");
    let weed = Weed::start(&work, &["fleet"]);
    let (a, b) = (
        fake_server(Some(empty_profile_reply())),
        fake_server(Some(empty_profile_reply())),
    );
    let t = targets(&work, &[a.port, b.port, closed_port()]);
    let local = work.join("local");
    let spool = work.join("spool").to_string_lossy().into_owned();
    let common_args = [
        "-targets",
        t.as_str(),
        "-once",
        "-cpu-seconds",
        "1",
        "-timeout",
        "5s",
    ];
    let (rc, log_local) = collect_bin(
        &[&common_args[..], &["-out", local.to_str().unwrap()]].concat(),
        (KEY, SECRET),
    );
    assert_eq!(rc, 0, "{log_local}");
    let (rc, log_bucket) = collect_bin(
        &[
            &common_args[..],
            &[
                "-out",
                "s3://fleet/same",
                "-s3-endpoint",
                &weed.endpoint,
                "-spool",
                &spool,
            ],
        ]
        .concat(),
        (KEY, SECRET),
    );
    assert_eq!(rc, 0, "{log_bucket}");
    let disk = local_files(&local);
    let objects = weed.objects("s3://fleet/same");
    assert_eq!(disk.len(), 2 * 7 + 1 + 2, "{:?}", disk.keys());
    assert_eq!(
        normalized(&disk),
        normalized(&objects),
        "bucket and disk differ; bucket log: {log_bucket}"
    );
    // The index pages: one per snapshot time and one per day, the same in both, every link resolving.
    for files in [&disk, &objects] {
        let pages: Vec<&String> = files.keys().filter(|k| k.ends_with("index.html")).collect();
        assert_eq!(pages.len(), 2, "{pages:?}");
        let snap_page = pages.iter().find(|k| k.split('/').count() == 6).unwrap();
        let day_page = pages.iter().find(|k| k.split('/').count() == 5).unwrap();
        let dir = snap_page.rsplit_once('/').unwrap().0;
        let html = String::from_utf8_lossy(&files[*snap_page]).into_owned();
        let links: Vec<String> = html
            .split("href=\"")
            .skip(1)
            .chain(html.split("data=\"").skip(1))
            .map(|rest| rest.split('"').next().unwrap().replace("%3A", ":"))
            .filter(|l| !l.starts_with(".."))
            .collect();
        assert_eq!(links.len(), 2 * (7 + 2) + 1, "{html}");
        for l in &links {
            assert!(
                files.contains_key(&format!("{dir}/{l}")),
                "{snap_page} links {l}, absent"
            );
        }
        assert!(
            html.contains("<object type=\"image/svg+xml\" data=\"127.0.0.1/"),
            "{html}"
        );
        let day = String::from_utf8_lossy(&files[*day_page]).into_owned();
        let hms = dir.rsplit('/').next().unwrap();
        assert!(day.contains(&format!(">{hms}</a>")), "{day}");
    }
    // The profiles themselves are byte for byte what the target sent, in both.
    let pb: Vec<_> = objects
        .iter()
        .filter(|(k, _)| k.ends_with(".pb.gz"))
        .collect();
    assert_eq!(pb.len(), 4);
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn wrong_keys_and_a_missing_bucket_give_one_line_and_exit_1() {
    let work = scratch("bucket-refused");
    let weed = Weed::start(&work, &["fleet"]);
    let t = targets(&work, &[closed_port()]);
    let spool = work.join("spool").to_string_lossy().into_owned();
    let base = [
        "-targets",
        t.as_str(),
        "-once",
        "-s3-endpoint",
        weed.endpoint.as_str(),
        "-spool",
        spool.as_str(),
    ];
    let mut logs = String::new();
    for (out, creds, code) in [
        (
            "s3://fleet/p",
            (KEY, "not-the-secret"),
            "SignatureDoesNotMatch",
        ),
        ("s3://fleet/p", ("NL6UNKNOWNKEY000", SECRET), ""),
        ("s3://no-such-bucket/p", (KEY, SECRET), "NoSuchBucket"),
    ] {
        let (rc, log) = collect_bin(&[&base[..], &["-out", out]].concat(), creds);
        assert_eq!(rc, 1, "{out}: {log}");
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 1, "{log}");
        let bucket = out[5..].split('/').next().unwrap();
        assert!(
            lines[0].contains(&format!("s3://{bucket}/p/")) && lines[0].contains(code),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("create the bucket") || lines[0].contains("AWS_SECRET_ACCESS_KEY"),
            "no remedy: {}",
            lines[0]
        );
        logs.push_str(&log);
    }
    // No credentials at all: one line naming what to set.
    let out = common::boot()
        .args(&[&["collect", "-out", "s3://fleet/p"][..], &base[..]].concat())
        .env("AWS_ACCESS_KEY_ID", "")
        .env("AWS_SECRET_ACCESS_KEY", "")
        .run_within(Duration::from_secs(30));
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.trim().lines().count() == 1 && log.contains("no bucket credentials"),
        "{log}"
    );
    logs.push_str(&log);
    assert_no_secret(&logs, "stderr");
    fs::remove_dir_all(&work).unwrap();
}

/// The key and secret in plain, base64 and percent-encoded form never appear in `text`.
fn assert_no_secret(text: &str, what: &str) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let forms = [
        KEY.to_string(),
        SECRET.to_string(),
        b64.encode(KEY),
        b64.encode(SECRET),
        SECRET
            .replace('/', "%2F")
            .replace('+', "%2B")
            .replace('=', "%3D"),
        "not-the-secret".to_string(),
    ];
    for f in &forms {
        assert!(
            !text.contains(f.as_str()),
            "{what} holds a credential form {f:?}"
        );
    }
}

/// Every snapshot (`…/<fqdn>/<port>/`) in `objects` is whole: meta.json present and every file it
/// lists there with the size it lists.
fn assert_whole(objects: &BTreeMap<String, Vec<u8>>) -> usize {
    let mut snaps: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for k in objects.keys().filter(|k| !k.ends_with("index.html")) {
        let (dir, file) = k.rsplit_once('/').unwrap();
        snaps.entry(dir.to_string()).or_default().push(file);
    }
    for (dir, files) in &snaps {
        let meta = objects
            .get(&format!("{dir}/meta.json"))
            .unwrap_or_else(|| panic!("{dir}: no meta.json: {files:?}"));
        let m: serde_json::Value = serde_json::from_slice(meta).unwrap();
        let listed = m["files"].as_object().unwrap();
        assert_eq!(listed.len() + 1, files.len(), "{dir}: {files:?}");
        for (name, size) in listed {
            let got = objects.get(&format!("{dir}/{name}")).map(Vec::len);
            assert_eq!(got, Some(size.as_u64().unwrap() as usize), "{dir}/{name}");
        }
    }
    snaps.len()
}

#[test]
fn a_store_stopped_mid_cycle_gets_every_snapshot_once_from_the_spool() {
    let work = scratch("bucket-spool");
    let mut weed = Weed::start(&work, &["fleet"]);
    let fast = fake_server(Some(empty_profile_reply()));
    let silent = fake_server(None);
    let spool_dir = work.join("spool");
    let spool = spool_dir.to_string_lossy().into_owned();
    let t = targets(&work, &[fast.port, silent.port]);
    let endpoint = weed.endpoint.clone();
    let args = [
        "-targets",
        t.as_str(),
        "-once",
        "-cpu-seconds",
        "1",
        "-timeout",
        "3s",
        "-out",
        "s3://fleet/spool",
        "-s3-endpoint",
        endpoint.as_str(),
        "-spool",
        spool.as_str(),
    ];
    let mut logs = String::new();
    // Cycle 1: the store dies while the silent target is still being waited for.
    let mut c = common::boot()
        .args(&[&["collect"][..], &args[..]].concat())
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .spawn();
    assert!(
        c.wait_for_log("lifecycle:", Duration::from_secs(20)),
        "{}",
        c.stderr()
    );
    std::thread::sleep(Duration::from_millis(800));
    weed.stop();
    assert_eq!(
        c.wait_exit(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        c.stderr()
    );
    logs.push_str(&c.stderr());
    assert!(logs.contains("kept in the spool"), "{logs}");
    // Cycle 2: the store is down from the start.
    std::thread::sleep(Duration::from_millis(1100));
    let (rc, log) = collect_bin(&args, (KEY, SECRET));
    assert_eq!(rc, 0, "{log}");
    assert!(log.contains("Unreachable"), "{log}");
    logs.push_str(&log);
    let spooled_before = local_files(&spool_dir.join("fleet"));
    assert!(
        spooled_before
            .keys()
            .filter(|k| k.ends_with("meta.json"))
            .count()
            >= 3,
        "{:?}",
        spooled_before.keys()
    );
    // Cycle 3: back up; the spool goes first, then this cycle's snapshots.
    weed.restart();
    weed.wait_writable("fleet");
    std::thread::sleep(Duration::from_millis(1100));
    let (rc, log) = collect_bin(&args, (KEY, SECRET));
    assert_eq!(rc, 0, "{log}");
    assert!(log.contains("spool: uploaded"), "{log}");
    logs.push_str(&log);
    let objects = weed.objects("s3://fleet/spool");
    // 3 cycles × 2 targets, each once and whole.
    assert_eq!(assert_whole(&objects), 6, "{:?}", objects.keys());
    assert!(
        local_files(&spool_dir.join("fleet")).is_empty(),
        "the spool still holds snapshots"
    );
    // Every spooled file arrived byte for byte.
    for (k, v) in &spooled_before {
        assert_eq!(objects.get(k), Some(v), "{k}");
    }
    assert_no_secret(&logs, "stderr");
    for (k, v) in &objects {
        assert_no_secret(&String::from_utf8_lossy(v), k);
    }
    for (k, v) in &spooled_before {
        assert_no_secret(&String::from_utf8_lossy(v), k);
    }
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn a_black_holed_store_costs_one_timeout_not_one_per_object() {
    let work = scratch("bucket-blackhole");
    let hole = fake_server(None);
    let fakes: Vec<FakeServer> = (0..4)
        .map(|_| fake_server(Some(empty_profile_reply())))
        .collect();
    let ports: Vec<u16> = fakes.iter().map(|f| f.port).collect();
    let t = targets(&work, &ports);
    let spool_dir = work.join("spool");
    let endpoint = format!("http://127.0.0.1:{}", hole.port);
    let began = Instant::now();
    let (rc, log) = collect_bin(
        &[
            "-targets",
            &t,
            "-once",
            "-cpu-seconds",
            "1",
            "-timeout",
            "2s",
            "-out",
            "s3://fleet/h",
            "-s3-endpoint",
            &endpoint,
            "-spool",
            spool_dir.to_str().unwrap(),
        ],
        (KEY, SECRET),
    );
    let took = began.elapsed();
    assert_eq!(rc, 0, "{log}");
    // The probe's timeout, then at most one more for the first PUT; 4 targets × 7 objects would be 56.
    assert!(took < Duration::from_secs(12), "took {took:?}: {log}");
    let spooled = local_files(&spool_dir.join("fleet"));
    assert_eq!(
        spooled.keys().filter(|k| k.ends_with("meta.json")).count(),
        4,
        "{log}"
    );
    assert!(log.contains("Timeout"), "{log}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn lifecycle_rule_and_sweep_stay_inside_the_prefix_and_collisions_are_refused() {
    let work = scratch("bucket-sweep");
    let weed = Weed::start(&work, &["fleet"]);
    let c = weed.client("s3://fleet/sweep");
    let outside = weed.client("s3://fleet/other");
    let recent = Stamp::from_unix(unix_now() - 3600).components().join("/");
    let fake = fake_server(Some(empty_profile_reply()));
    // Another collector's object where this one will write, for each of the next 20 seconds.
    let now = unix_now();
    for s in 0..20 {
        let dated = Stamp::from_unix(now + s).components().join("/");
        let key = format!("sweep/svc/{dated}/127.0.0.1/{}/cpu.pb.gz", fake.port);
        c.put(
            &key,
            b"the other collector's",
            true,
            "application/octet-stream",
        )
        .unwrap();
    }
    for key in [
        "sweep/svc/2020/01/01/00:00:00/h/80/meta.json",
        "sweep/svc/2020/01/01/00:00:00/h/80/cpu.pb.gz",
        &format!("sweep/svc/{recent}/h/80/meta.json"),
        "sweep/svc/2099/01/01/00:00:00/h/80/meta.json",
        "sweep/notes/2020/01/01/readme.txt",
    ] {
        c.put(key, b"{}", true, "application/json").unwrap();
    }
    outside
        .put(
            "other/svc/2020/01/01/00:00:00/h/80/meta.json",
            b"{}",
            true,
            "application/json",
        )
        .unwrap();
    let t = targets(&work, &[fake.port]);
    let spool = work.join("spool").to_string_lossy().into_owned();
    let (rc, log) = collect_bin(
        &[
            "-targets",
            &t,
            "-once",
            "-cpu-seconds",
            "1",
            "-out",
            "s3://fleet/sweep",
            "-s3-endpoint",
            &weed.endpoint,
            "-spool",
            &spool,
            "-retain",
            "168h",
        ],
        (KEY, SECRET),
    );
    assert_eq!(rc, 0, "{log}");
    // The lifecycle rule was set, and reads back.
    let rules = c
        .get_lifecycle()
        .unwrap()
        .expect("a lifecycle configuration");
    assert!(
        rules.contains("<ID>nl6-collect-sweep</ID>")
            && rules.contains("<Days>7</Days>")
            && rules.contains("sweep/"),
        "{rules}"
    );
    assert!(
        log.contains("lifecycle: fleet now expires s3://fleet/sweep/ after 7 days"),
        "{log}"
    );
    // The sweep: the old snapshot time is gone, the rest stays, the other prefix is untouched.
    let objects = weed.objects("s3://fleet/");
    assert!(
        !objects.keys().any(|k| k.starts_with("sweep/svc/2020/")),
        "{:?}",
        objects.keys()
    );
    for kept in [
        format!("sweep/svc/{recent}/h/80/meta.json"),
        "sweep/svc/2099/01/01/00:00:00/h/80/meta.json".to_string(),
        "sweep/notes/2020/01/01/readme.txt".to_string(),
        "other/svc/2020/01/01/00:00:00/h/80/meta.json".to_string(),
    ] {
        assert!(objects.contains_key(&kept), "{kept} was deleted");
    }
    assert!(
        log.contains("retention: deleted s3://fleet/sweep/svc/2020/01/01/00:00:00/ (2 objects"),
        "{log}"
    );
    assert!(log.contains("dated in the future kept"), "{log}");
    // The collision: refused, not overwritten, not spooled.
    assert!(
        log.contains("PreconditionFailed") && log.contains("not overwritten"),
        "{log}"
    );
    let theirs: Vec<_> = objects
        .iter()
        .filter(|(k, _)| k.ends_with(&format!("{}/cpu.pb.gz", fake.port)))
        .collect();
    assert!(theirs
        .iter()
        .all(|(_, v)| v.as_slice() == b"the other collector's"));
    // A second run a second later holds the same line for the next second's key, and a second lifecycle
    // pass only checks the rule.
    std::thread::sleep(Duration::from_millis(1100));
    let (_, log2) = collect_bin(
        &[
            "-targets",
            &t,
            "-once",
            "-cpu-seconds",
            "1",
            "-out",
            "s3://fleet/sweep",
            "-s3-endpoint",
            &weed.endpoint,
            "-spool",
            &spool,
        ],
        (KEY, SECRET),
    );
    assert!(log2.contains("(rule nl6-collect-sweep, checked)"), "{log2}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn two_collectors_share_a_prefix_and_the_gcs_shorthand_signs_for_the_same_server() {
    let work = scratch("bucket-share");
    let weed = Weed::start(&work, &["fleet"]);
    let (a, b) = (
        fake_server(Some(empty_profile_reply())),
        fake_server(Some(empty_profile_reply())),
    );
    let (ta, tb) = (targets(&work, &[a.port]), targets(&work, &[b.port]));
    let spool = work.join("spool").to_string_lossy().into_owned();
    // Both at once, with disjoint targets, into one bucket and prefix: gs:// for one (region auto,
    // path-style on the endpoint given), s3:// for the other.
    let run = |t: &str, out: &str| {
        common::boot()
            .args(&[
                "collect",
                "-targets",
                t,
                "-once",
                "-cpu-seconds",
                "1",
                "-out",
                out,
                "-s3-endpoint",
                &weed.endpoint,
                "-spool",
                &spool,
            ])
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .spawn()
    };
    let mut one = run(&ta, "gs://fleet/shared");
    let mut two = run(&tb, "s3://fleet/shared");
    assert_eq!(
        one.wait_exit(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        one.stderr()
    );
    assert_eq!(
        two.wait_exit(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        two.stderr()
    );
    let objects = weed.objects("s3://fleet/shared");
    assert_eq!(assert_whole(&objects), 2, "{:?}", objects.keys());
    for p in [a.port, b.port] {
        assert!(
            objects
                .keys()
                .any(|k| k.ends_with(&format!("/127.0.0.1/{p}/meta.json"))),
            "{p}: {:?}",
            objects.keys()
        );
    }
    assert!(
        !one.stderr().contains("kept in the spool"),
        "{}",
        one.stderr()
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn baseline_and_nl6_report_read_from_the_bucket() {
    let work = scratch("bucket-baseline");
    let weed = Weed::start(&work, &["fleet"]);
    let fake = fake_server(Some(empty_profile_reply()));
    let t = targets(&work, &[fake.port]);
    let spool = work.join("spool").to_string_lossy().into_owned();
    let run = |extra: &[&str]| {
        let (rc, log) = collect_bin(
            &[
                &[
                    "-targets",
                    t.as_str(),
                    "-once",
                    "-cpu-seconds",
                    "1",
                    "-out",
                    "s3://fleet/base",
                ][..],
                &[
                    "-s3-endpoint",
                    weed.endpoint.as_str(),
                    "-spool",
                    spool.as_str(),
                ][..],
                extra,
            ]
            .concat(),
            (KEY, SECRET),
        );
        assert_eq!(rc, 0, "{log}");
        std::thread::sleep(Duration::from_millis(1100));
    };
    let metas = || -> Vec<(String, serde_json::Value)> {
        weed.objects("s3://fleet/base")
            .into_iter()
            .filter(|(k, _)| k.ends_with("/meta.json"))
            .map(|(k, v)| (k, serde_json::from_slice(&v).unwrap()))
            .collect()
    };
    run(&[]);
    let first = metas()[0].0.replace("meta.json", "cpu.pb.gz");
    run(&["-baseline", "s3://fleet/base"]);
    let (key2, m2) = metas().pop().unwrap();
    assert_eq!(
        m2["baseline"]["profile"],
        format!("s3://fleet/base/{first}"),
        "{m2}"
    );
    let diff = weed
        .client("s3://fleet/base")
        .get(
            &format!("base/{}", key2.replace("meta.json", "cpu.diff.txt")),
            1 << 20,
        )
        .unwrap();
    assert!(diff.starts_with(format!("Baseline: s3://fleet/base/{first}\n").as_bytes()));
    // -baseline-date alone: the newest of that day under -out itself (the second run's).
    let today = Stamp::from_unix(unix_now()).components();
    run(&[
        "-baseline-date",
        &format!("{}-{}-{}", today[0], today[1], today[2]),
    ]);
    let (_, m3) = metas().pop().unwrap();
    assert_eq!(
        m3["baseline"]["profile"],
        format!("s3://fleet/base/{}", key2.replace("meta.json", "cpu.pb.gz")),
        "{m3}"
    );
    run(&["-baseline-date", "2020-01-01"]);
    let (_, m4) = metas().pop().unwrap();
    assert!(
        m4["baseline"]["error"]
            .as_str()
            .unwrap()
            .contains("on that date"),
        "{m4}"
    );

    // nl6 report reads the object as it reads the same bytes from a file.
    let bytes = weed
        .client("s3://fleet/base")
        .get(&format!("base/{first}"), 1 << 20)
        .unwrap();
    let file = work.join("cpu.pb.gz");
    fs::write(&file, &bytes).unwrap();
    let report = |path: &str| {
        common::boot()
            .args(&["report", path])
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_ENDPOINT_URL", &weed.endpoint)
            .run_within(Duration::from_secs(30))
    };
    let from_file = report(file.to_str().unwrap());
    let from_bucket = report(&format!("s3://fleet/base/{first}"));
    assert_eq!(
        from_bucket.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&from_bucket.stderr)
    );
    assert_eq!(from_bucket.stdout, from_file.stdout);
    let missing = report("s3://fleet/base/no/such/cpu.pb.gz");
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{err}");
    assert!(
        err.trim().lines().count() == 1 && err.contains("NoSuchKey"),
        "{err}"
    );
    // The same input limit as a file: 65 MiB of zeros is refused naming it.
    weed.client("s3://fleet/big")
        .put(
            "big/huge.pb.gz",
            &vec![0u8; 65 << 20],
            false,
            "application/octet-stream",
        )
        .unwrap();
    let huge = report("s3://fleet/big/huge.pb.gz");
    let err = String::from_utf8_lossy(&huge.stderr);
    assert_eq!(huge.status.code(), Some(1), "{err}");
    assert!(err.contains("larger than 64 MiB"), "{err}");
    assert_no_secret(
        &format!("{err}{}", String::from_utf8_lossy(&missing.stderr)),
        "report stderr",
    );
    fs::remove_dir_all(&work).unwrap();
}
