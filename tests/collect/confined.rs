//! `nl6 collect` stays inside `-out`: retention raced by a day directory swapped for a symlink mid-sweep
//! deletes nothing outside, a symlinked program directory is refused (never written through), future-dated
//! directories are named in one line per sweep, and SIGTERM mid-cycle finishes the cycle and says so.
//! Loopback only; every loop bounded in time and count.

use crate::collect_support;
use crate::common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use collect_support::*;

const DAYS: usize = 12;
const PER_DAY: usize = 100;

fn hms(i: usize) -> String {
    format!("{:02}:{:02}:{:02}", i / 3600, (i / 60) % 60, i % 60)
}

/// `out/svc/2020/01/<dd>/<hms>/h/80/meta.json` for every day and time, and the same names under
/// `outside/<dd>/` (what a swapped-in symlink points at).
fn build(out: &Path, outside: &Path) {
    for d in 1..=DAYS {
        for i in 0..PER_DAY {
            for root in [
                out.join(format!("svc/2020/01/{d:02}")),
                outside.join(format!("{d:02}")),
            ] {
                let dir = root.join(hms(i)).join("h/80");
                fs::create_dir_all(&dir).unwrap();
                fs::write(dir.join("meta.json"), "{}").unwrap();
            }
        }
    }
}

fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

/// Swaps each day directory for a symlink to `outside/<dd>` and back, as fast as it can, until `stop`.
fn swapper(out: &Path, outside: &Path, stop: &AtomicBool) {
    let month = out.join("svc/2020/01");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut d = 1;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let day = month.join(format!("{d:02}"));
        let moved = month.join(format!(".{d:02}.moved"));
        if fs::rename(&day, &moved).is_ok() {
            let _ = symlink(outside.join(format!("{d:02}")), &day);
            std::thread::yield_now();
            let _ = fs::remove_file(&day);
            let _ = fs::rename(&moved, &day);
        }
        d = d % DAYS + 1;
    }
}

#[test]
fn a_day_swapped_for_a_symlink_mid_sweep_deletes_nothing_outside() {
    let work = scratch("confined-race");
    let retain = Duration::from_secs(168 * 3600);
    for round in 0..4 {
        let out = work.join(format!("out{round}"));
        let outside = work.join(format!("outside{round}"));
        build(&out, &outside);
        let stop = Arc::new(AtomicBool::new(false));
        let deletions = std::thread::scope(|s| {
            let h = s.spawn(|| swapper(&out, &outside, &stop));
            let t0 = Instant::now();
            let deletions = nl6::collect::retention::apply_retention(&out, unix_now(), retain);
            eprintln!(
                "round {round}: sweep {:?}, {} deletions",
                t0.elapsed(),
                deletions.len()
            );
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
            deletions
        });
        let left = count_files(&outside);
        assert_eq!(
            left,
            DAYS * PER_DAY,
            "round {round}: the sweep deleted {} files outside -out ({} deletions reported)",
            DAYS * PER_DAY - left,
            deletions.len()
        );
        // Nothing outside was touched, and the log's names are archive paths that are gone now.
        for d in deletions.iter().filter(|d| d.result.is_ok()) {
            assert!(!out.join(&d.dir.relative).exists(), "{:?}", d.dir.relative);
        }
    }
    fs::remove_dir_all(&work).unwrap();
}

fn targets_file(work: &Path, lines: &str) -> String {
    let f = work.join("targets.txt");
    fs::write(&f, lines).unwrap();
    f.to_string_lossy().into_owned()
}

#[test]
fn a_symlinked_program_directory_is_refused_not_written_through() {
    let work = scratch("confined-write");
    let out = work.join("out");
    let outside = work.join("outside");
    fs::create_dir_all(&out).unwrap();
    fs::create_dir_all(&outside).unwrap();
    symlink(&outside, out.join("svc")).unwrap();
    let target = fake_server(Some(empty_profile_reply()));
    let t = targets_file(&work, &format!("svc http://127.0.0.1:{}\n", target.port));
    let o = out.to_string_lossy().into_owned();
    let run = common::boot()
        .args(&[
            "collect",
            "-targets",
            &t,
            "-out",
            &o,
            "-once",
            "-cpu-seconds",
            "1",
        ])
        .run_within(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "collect wrote through the link: {stderr}"
    );
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with("nl6 collect: svc 127.0.0.1:")
                && l.contains("out/svc is a symbolic link; refused")
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{stderr}");
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn future_dated_directories_are_named_in_one_line_per_sweep() {
    let work = scratch("confined-future");
    let out = work.join("out");
    for rel in [
        "svc/2099/01/01/00:00:00/h/80",
        "svc/2098/05/01/00:00:00/h/80",
    ] {
        fs::create_dir_all(out.join(rel)).unwrap();
        fs::write(out.join(rel).join("meta.json"), "{}").unwrap();
    }
    let t = targets_file(&work, &format!("svc http://127.0.0.1:{}\n", closed_port()));
    let o = out.to_string_lossy().into_owned();
    let run = common::boot()
        .args(&[
            "collect",
            "-targets",
            &t,
            "-out",
            &o,
            "-once",
            "-cpu-seconds",
            "1",
            "-timeout",
            "2s",
        ])
        .run_within(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("in the future"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("2 directories") && lines[0].contains("2099-01-01T00:00:00Z"),
        "{}",
        lines[0]
    );
    assert!(out.join("svc/2099/01/01/00:00:00/h/80/meta.json").exists());
    fs::remove_dir_all(&work).unwrap();
}

#[test]
fn sigterm_mid_cycle_finishes_the_cycle_and_says_so() {
    let work = scratch("confined-sigterm");
    let out = work.join("out");
    let silent = fake_server(None);
    let t = targets_file(&work, &format!("svc http://127.0.0.1:{}\n", silent.port));
    let o = out.to_string_lossy().into_owned();
    let mut nl6 = common::boot()
        .args(&[
            "collect",
            "-targets",
            &t,
            "-out",
            &o,
            "-cpu-seconds",
            "1",
            "-timeout",
            "2s",
        ])
        .spawn();
    std::thread::sleep(Duration::from_millis(700));
    nl6.signal("TERM");
    let status = nl6.wait_exit(Duration::from_secs(20));
    let stderr = nl6.stderr();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("SIGTERM: finishing the cycle in progress"),
        "{stderr}"
    );
    assert!(stderr.contains("nl6 collect: cycle "), "{stderr}");
    let (dated, _) = only_dated_dir(&out, "svc");
    assert!(dated
        .join("127.0.0.1")
        .join(silent.port.to_string())
        .join("meta.json")
        .exists());
    fs::remove_dir_all(&work).unwrap();
}
