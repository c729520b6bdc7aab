//! `nl6 collect` and `nl6 report` end to end against a real Go service with net/http/pprof (built at test
//! time with Debian's golang-go, GO111MODULE=off), a closed port, a 503 answer (a closed nl6 gate), a
//! garbage answer and a target that never answers; plus retention with symlinks pointing outside `-out`,
//! and diffs. Runs the collector in-process through `nl6::collect::main` (the CLI dispatch lives in
//! another branch). Everything stays on 127.0.0.1; every wait is bounded.

use crate::collect_support;

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, Instant};

use collect_support::*;
use nl6::collect::archive::Stamp;
use nl6::report;
use nl6_profile::proto::{self, Function, Line, Location, Profile, Sample};

#[test]
fn one_cycle_archives_go_service_and_records_failures() {
    let work = scratch("cycle");
    let svc = start_go_service(&work);
    let s503 = fake_server(Some(REPLY_503.as_bytes().to_vec()));
    let garbage = fake_server(Some(REPLY_GARBAGE.as_bytes().to_vec()));
    let idle = fake_server(Some(empty_profile_reply()));
    let silent = fake_server(None);
    let down = closed_port();
    let out = work.join("archive");
    // An expired snapshot from an earlier run: this cycle's retention must delete it.
    let old = out.join("gosvc/2020/01/01/00:00:00/127.0.0.1/1");
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("meta.json"), "{}").unwrap();
    let svc_port: u16 = svc.addr.rsplit(':').next().unwrap().parse().unwrap();
    let targets = work.join("targets.txt");
    fs::write(
        &targets,
        format!(
            "# test fleet: the silent target first, so a serial collector would make the others wait\n\
             silent http://127.0.0.1:{}\ngosvc http://{}\ngate http://127.0.0.1:{}  # closed nl6 gate\n\
             junk http://127.0.0.1:{}\ndown http://127.0.0.1:{down}\nidle http://127.0.0.1:{}\n",
            silent.port, svc.addr, s503.port, garbage.port, idle.port
        ),
    )
    .unwrap();

    let before = unix_now();
    let began = Instant::now();
    let code = collect(&[
        "-targets",
        targets.to_str().unwrap(),
        "-out",
        out.to_str().unwrap(),
        "-once",
        "-cpu-seconds",
        "1",
        "-timeout",
        "2s",
    ]);
    let took = began.elapsed();
    assert_eq!(code, 0);
    // The silent target costs at most its own timeouts (2s heap + 1s+2s CPU), never more.
    assert!(took < Duration::from_secs(12), "cycle took {took:?}");

    // Layout: exactly <out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/ and the files.
    let (dated, stamp) = only_dated_dir(&out, "gosvc");
    assert!(
        (before..=before + 2).contains(&stamp.to_unix()),
        "stamp {stamp:?} not the cycle start ({before})"
    );
    let snap = dated.join("127.0.0.1").join(svc_port.to_string());
    let files: BTreeSet<String> = tree(&snap);
    let want: BTreeSet<String> = [
        "cpu.pb.gz",
        "heap.pb.gz",
        "cpu.top.txt",
        "heap.top.txt",
        "cpu.svg",
        "heap.svg",
        "meta.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(files, want);
    assert!(!old.exists(), "retention did not delete the 2020 snapshot");
    assert!(
        tree(&out)
            .iter()
            .all(|p| !p.contains(".partial-") && !p.contains(".tmp-")),
        "leftovers: {:?}",
        tree(&out)
    );

    // The Go service's snapshot: valid profiles whose first top row is go tool pprof's.
    let m = meta(&snap);
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(m["program"], "gosvc");
    assert_eq!(m["port"], svc_port);
    assert_eq!(
        m["profiles"]["cpu"]["bytes"],
        fs::metadata(snap.join("cpu.pb.gz")).unwrap().len()
    );
    assert_eq!(
        m["files"]["heap.svg"],
        fs::metadata(snap.join("heap.svg")).unwrap().len()
    );
    assert!(
        m["duration_ms"].as_u64().unwrap() < 5000,
        "the Go target was held up: {m}"
    );
    // It started with the cycle, not after the silent target listed before it gave up.
    let started = rfc3339_secs(m["started"].as_str().unwrap());
    assert!(
        started - stamp.to_unix() <= 1,
        "the Go target waited for the silent one: {m}"
    );
    for kind in ["cpu", "heap"] {
        let ours = fs::read_to_string(snap.join(format!("{kind}.top.txt"))).unwrap();
        let theirs = go_pprof_top(&work, &snap.join(format!("{kind}.pb.gz")));
        assert_eq!(
            first_row(&ours),
            first_row(&theirs),
            "{kind}: ours\n{ours}\ngo tool pprof\n{theirs}"
        );
        let svg = fs::read_to_string(snap.join(format!("{kind}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{kind}.svg is not an SVG");
    }
    let heap_top = fs::read_to_string(snap.join("heap.top.txt")).unwrap();
    assert!(
        heap_top.contains("Type: inuse_space") && heap_top.contains("main.allocateBlocks"),
        "{heap_top}"
    );

    // Failures are recorded, with the server's message kept, and only meta.json is written.
    let failed = |program: &str, port: u16| {
        let (dated, _) = only_dated_dir(&out, program);
        let dir = dated.join("127.0.0.1").join(port.to_string());
        assert_eq!(
            tree(&dir),
            BTreeSet::from(["meta.json".to_string()]),
            "{program}"
        );
        let m = meta(&dir);
        assert_eq!(m["status"], "failed", "{program}: {m}");
        m
    };
    let m = failed("gate", s503.port);
    assert_eq!(m["profiles"]["cpu"]["http_status"], 503);
    assert!(
        m["profiles"]["heap"]["error"]
            .as_str()
            .unwrap()
            .contains("profiling is disabled: the gate is closed"),
        "{m}"
    );
    let m = failed("junk", garbage.port);
    assert!(
        m["profiles"]["cpu"]["error"]
            .as_str()
            .unwrap()
            .contains("not a pprof profile"),
        "{m}"
    );
    let m = failed("silent", silent.port);
    assert!(
        m["profiles"]["heap"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{m}"
    );
    // An idle target's empty profiles still get every file; the reports say "no samples".
    let (dated, _) = only_dated_dir(&out, "idle");
    let idle_dir = dated.join("127.0.0.1").join(idle.port.to_string());
    assert_eq!(tree(&idle_dir), want);
    assert_eq!(meta(&idle_dir)["status"], "ok");
    for f in ["cpu.top.txt", "heap.top.txt", "cpu.svg", "heap.svg"] {
        assert!(
            fs::read_to_string(idle_dir.join(f))
                .unwrap()
                .contains(report::NO_SAMPLES),
            "{f}"
        );
    }
    go_pprof_top(&work, &idle_dir.join("cpu.pb.gz"));
    let m = failed("down", down);
    assert!(
        m["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{m}"
    );

    // A second cycle with -baseline: cpu.diff.txt against the first cycle's CPU profile.
    let targets2 = work.join("targets2.txt");
    fs::write(&targets2, format!("gosvc http://{}\n", svc.addr)).unwrap();
    let out2 = work.join("archive2");
    let code = collect(&[
        "--targets",
        targets2.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--once",
        "--cpu-seconds=1",
        "-baseline",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let (dated2, _) = only_dated_dir(&out2, "gosvc");
    let snap2 = dated2.join("127.0.0.1").join(svc_port.to_string());
    let diff = fs::read_to_string(snap2.join("cpu.diff.txt")).unwrap();
    assert!(
        diff.starts_with(&format!("Baseline: {}", snap.join("cpu.pb.gz").display())),
        "{diff}"
    );
    assert_eq!(
        meta(&snap2)["baseline"]["profile"],
        snap.join("cpu.pb.gz").display().to_string()
    );

    // nl6 report reads the archived files (exit 0) and writes a diff flame graph.
    let cpu = snap.join("cpu.pb.gz").to_string_lossy().into_owned();
    assert_eq!(report::main(vec![cpu.clone().into()]), 0);
    let svg = work.join("diff.svg");
    let cpu2 = snap2.join("cpu.pb.gz").to_string_lossy().into_owned();
    assert_eq!(
        report::main(vec![
            "-diff-base".into(),
            cpu.clone().into(),
            "-svg".into(),
            svg.clone().into(),
            cpu2.into()
        ]),
        0
    );
    assert!(fs::read_to_string(&svg).unwrap().contains("<svg"));

    drop(svc);
    fs::remove_dir_all(&work).unwrap();
}

/// Whole seconds of an RFC 3339 UTC time (`2026-11-29T23:15:07.042Z`).
fn rfc3339_secs(t: &str) -> i64 {
    let (date, time) = t.split_once('T').unwrap();
    let d: Vec<&str> = date.split('-').collect();
    Stamp::parse_components(d[0], d[1], d[2], &time[..8])
        .unwrap()
        .to_unix()
}

/// A copy of `p` with extra samples in a new leaf function `name` called from the first sample's stack.
fn with_hot_function(p: &Profile, name: &str, samples: i64) -> Profile {
    let mut q = p.clone();
    q.string_table.push(name.to_string());
    let name_ix = (q.string_table.len() - 1) as i64;
    let fid = q.function.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    q.function.push(Function {
        id: fid,
        name: name_ix,
        system_name: name_ix,
        filename: 0,
        start_line: 0,
    });
    let lid = q.location.iter().map(|l| l.id).max().unwrap_or(0) + 1;
    q.location.push(Location {
        id: lid,
        mapping_id: 0,
        address: 0,
        line: vec![Line {
            function_id: fid,
            line: 1,
            column: 0,
        }],
        is_folded: false,
    });
    let mut stack = vec![lid];
    if let Some(s) = p.sample.first() {
        stack.extend(&s.location_id);
    }
    let period = if p.period > 0 { p.period } else { 10_000_000 };
    let values = p
        .sample_type
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { samples } else { samples * period })
        .collect();
    q.sample.push(Sample {
        location_id: stack,
        value: values,
        label: vec![],
    });
    q
}

#[test]
fn diffs_of_real_profiles() {
    let work = scratch("diff");
    let svc = start_go_service(&work);
    let url = format!("http://{}/debug/pprof/profile?seconds=1", svc.addr);
    let fetched = nl6::collect::fetch::fetch(&url, Duration::from_secs(10));
    let bytes = fetched.body.expect("CPU profile from the Go service");
    let p = proto::decode(&bytes).unwrap();
    let index = report::default_sample_index(&p).unwrap();

    // Against itself: every function, zero change.
    let rows = report::diff_rows(&p, &p, index).unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.flat == 0 && r.cum == 0), "{rows:?}");
    assert!(report::diff_table(&p, &p, index)
        .unwrap()
        .contains("no change"));

    // With an added hot function: it comes first, with the whole added value as its flat change.
    let hot = with_hot_function(&p, "main.addedHotFunction", 500);
    let rows = report::diff_rows(&p, &hot, index).unwrap();
    assert_eq!(rows[0].name, "main.addedHotFunction");
    assert_eq!(rows[0].flat, 500 * p.period.max(1));
    let table = report::diff_table(&p, &hot, index).unwrap();
    assert!(
        first_row(&table).ends_with("  main.addedHotFunction"),
        "{table}"
    );
    // And the reverse diff shows it first with a negative change.
    let rev = report::diff_rows(&hot, &p, index).unwrap();
    assert_eq!(
        (rev[0].name.as_str(), rev[0].flat),
        ("main.addedHotFunction", -500 * p.period.max(1))
    );
    fs::remove_dir_all(&work).unwrap();
}

#[cfg(unix)]
#[test]
fn retention_deletes_only_old_dated_dirs_inside_out() {
    use std::os::unix::fs::symlink;
    let work = scratch("retention");
    let out = work.join("out");
    let outside = work.join("outside");
    let now = unix_now();
    let recent = Stamp::from_unix(now - 3600).components().join("/");
    let mk = |rel: &str| {
        let d = out.join(rel);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("meta.json"), "{}").unwrap();
    };
    mk("svc/2020/01/01/00:00:00/h/80");
    mk("svc/2020/01/01/00:00:05/h/80");
    mk(&format!("svc/{recent}/h/80"));
    mk("svc/notes/keep/me/please/x"); // not a dated layout: never touched
                                      // Outside -out: a tree that looks expired, and a precious file.
    fs::create_dir_all(outside.join("svc/2020/01/01/00:00:00/h/80")).unwrap();
    fs::write(outside.join("precious.txt"), "keep").unwrap();
    fs::create_dir_all(outside.join("dated")).unwrap();
    // A program-level symlink to the outside tree, a dated-level symlink, and a symlink inside an
    // expired snapshot.
    symlink(&outside, out.join("linked")).unwrap();
    fs::create_dir_all(out.join("svc/2020/01/02")).unwrap();
    symlink(outside.join("dated"), out.join("svc/2020/01/02/00:00:00")).unwrap();
    symlink(
        outside.join("precious.txt"),
        out.join("svc/2020/01/01/00:00:00/h/link"),
    )
    .unwrap();

    let deletions =
        nl6::collect::retention::apply_retention(&out, now, Duration::from_secs(168 * 3600));
    let mut deleted: Vec<String> = deletions
        .iter()
        .map(|d| d.dir.relative.to_string_lossy().into_owned())
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        ["svc/2020/01/01/00:00:00", "svc/2020/01/01/00:00:05"]
    );
    assert!(deletions.iter().all(|d| d.result.is_ok()));
    assert!(
        !out.join("svc/2020/01/01").exists(),
        "emptied day directory left behind"
    );
    assert!(out.join(format!("svc/{recent}/h/80/meta.json")).exists());
    assert!(out.join("svc/notes/keep/me/please/x/meta.json").exists());
    // Symlinks above a snapshot are neither followed nor deleted; targets outside survive.
    assert!(fs::symlink_metadata(out.join("linked"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::symlink_metadata(out.join("svc/2020/01/02/00:00:00"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(outside.join("svc/2020/01/01/00:00:00/h/80").is_dir());
    assert!(outside.join("dated").is_dir());
    assert_eq!(
        fs::read_to_string(outside.join("precious.txt")).unwrap(),
        "keep"
    );
    // A second pass finds nothing more.
    assert!(
        nl6::collect::retention::apply_retention(&out, now, Duration::from_secs(168 * 3600))
            .is_empty()
    );
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let work = scratch("usage");
    assert_eq!(collect(&["-out", "x"]), 2);
    assert_eq!(
        collect(&["-targets", "t", "-out", "o", "-interval", "often"]),
        2
    );
    let bad = work.join("bad.txt");
    fs::write(&bad, "svc http://127.0.0.1:1\noops\n").unwrap();
    assert_eq!(
        collect(&[
            "-targets",
            bad.to_str().unwrap(),
            "-out",
            work.join("o").to_str().unwrap(),
            "-once"
        ]),
        2
    );
    assert!(
        !work.join("o").exists(),
        "nothing is written on a usage error"
    );
    fs::remove_dir_all(&work).unwrap();
}
