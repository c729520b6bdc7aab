//! The wall-clock profile on the real binary: `/debug/fgprof` (fgprof's mount point, where Alloy's
//! `profile.fgprof` scrapes) and `/debug/pprof/fgprof` are behind the gate, listed in the index, one at
//! a time, and read by `go tool pprof` as a wallclock profile of nl6's own threads.
use crate::common;

use common::{boot, header};
use std::time::Duration;

#[test]
fn fgprof_is_gated_listed_served_in_fgprofs_shape_and_one_at_a_time() {
    let n = boot().start();
    let (s, h, b) = n.http("GET", "/debug/fgprof?seconds=1", b"");
    assert_eq!(s, 503, "closed gate: {}", String::from_utf8_lossy(&b));
    assert_eq!(header(&h, "x-go-pprof"), Some("1"));
    n.open_pull_only();

    let (s, _, index) = n.http("GET", "/debug/pprof/", b"");
    assert_eq!(s, 200);
    assert!(
        String::from_utf8_lossy(&index).contains("<a href=\"fgprof?seconds=5\">fgprof</a>"),
        "{}",
        String::from_utf8_lossy(&index)
    );

    // A second request while one runs: 500 naming the cause, never an empty profile.
    let addr = n.addr;
    let first = std::thread::spawn(move || {
        common::request(
            addr,
            "GET",
            "/debug/fgprof?seconds=3",
            &[],
            b"",
            Duration::from_secs(20),
        )
    });
    std::thread::sleep(Duration::from_millis(800));
    let (s, _, b) = n.http("GET", "/debug/pprof/fgprof?seconds=1", b"");
    assert_eq!(s, 500, "{}", String::from_utf8_lossy(&b));
    assert!(String::from_utf8_lossy(&b).contains("Could not enable wall-clock profiling"));
    let (s, h, body) = first.join().unwrap();
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        header(&h, "content-disposition"),
        Some("attachment; filename=\"fgprof\"")
    );

    let work = std::env::temp_dir().join(format!("nl6-serve-wall-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("fgprof.pb.gz");
    std::fs::write(&file, &body).unwrap();
    let raw = common::go_pprof_ok(&["-raw".as_ref(), file.as_os_str()], &work);
    assert!(raw.contains("PeriodType: wallclock nanoseconds"), "{raw}");
    assert!(raw.contains("samples/count time/nanoseconds"), "{raw}");
    // nl6's own threads, waiting: the HTTP server's accept loop waits in poll, labelled with its state.
    let top = common::go_pprof_ok(
        &[
            "-top".as_ref(),
            "-sample_index=time".as_ref(),
            "-tagfocus=state=IO wait".as_ref(),
            file.as_os_str(),
        ],
        &work,
    );
    assert!(top.contains("poll"), "{top}");
    // The profile's time is about threads × duration (3 s): every thread is there, running or not.
    let threads = std::fs::read_dir(format!("/proc/{}/task", n.pid()))
        .unwrap()
        .count() as f64;
    let total = common::go_pprof_ok(
        &[
            "-top".as_ref(),
            "-sample_index=time".as_ref(),
            "-unit=s".as_ref(),
            file.as_os_str(),
        ],
        &work,
    );
    let line = total.lines().find(|l| l.contains("% of ")).unwrap_or("");
    let secs: f64 = line
        .split(" of ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.trim_end_matches('s').parse().ok())
        .unwrap_or_else(|| panic!("no total in {total}"));
    assert!(
        secs > 0.6 * 3.0 * (threads - 1.0) && secs < 1.3 * 3.0 * threads,
        "{secs} s of wall time for {threads} threads over 3 s\n{total}"
    );
    std::fs::remove_dir_all(&work).ok();
}
