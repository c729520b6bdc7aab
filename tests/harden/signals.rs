//! Hardening: signals sent to the real binary.
//!
//! - SIGUSR1, SIGUSR2 and SIGALRM are ignored (one log line each); SIGPROF and the stack-capture signal
//!   (38 on both builds, Debian's `RTMIN+4`) sent before any profile has run find their handlers installed at startup. nl6 keeps
//!   serving, profiles afterwards, and still exits 0 on SIGTERM.
//! - SIGHUP (a dropped ssh session) is handled like SIGTERM: the gate closes and the push flushes its last
//!   window to the collector, exit 0. Started under `nohup` (SIGHUP ignored from birth), nl6 keeps that
//!   choice: the hang-up of the session it was started from does not stop it.
use crate::common;
use crate::push_support;

use common::boot;
use push_support::FakeServer;
use std::time::Duration;

#[test]
fn stray_signals_do_not_kill_nl6() {
    let mut nl6 = boot().start();
    // The stack-capture signal's number, the same on the glibc and the musl build.
    let stacks = "38".to_string();
    for sig in ["USR1", "USR2", "ALRM", "PROF", stacks.as_str()] {
        nl6.signal(sig);
        std::thread::sleep(Duration::from_millis(200));
        assert!(nl6.is_running(), "kill -{sig} killed nl6: {}", nl6.stderr());
        let (s, _, _) = nl6.http("GET", "/api/v1/profiling", b"");
        assert_eq!(s, 200, "GET after kill -{sig}");
    }
    for name in ["SIGUSR1", "SIGUSR2", "SIGALRM"] {
        assert!(
            nl6.wait_for_log(
                &format!("nl6: {name} received: ignored"),
                Duration::from_secs(2)
            ),
            "no log line for {name}: {}",
            nl6.stderr()
        );
    }
    // The samplers still work after the stray signals.
    nl6.open_pull_only();
    let (s, _, b) = nl6.http("GET", "/debug/pprof/profile?seconds=1", b"");
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (s, _, b) = nl6.http("GET", "/debug/pprof/goroutine?debug=2", b"");
    assert_eq!(s, 200);
    assert!(String::from_utf8_lossy(&b).contains("goroutine"));
    let status = nl6.terminate(Duration::from_secs(25));
    assert_eq!(status.code(), Some(0), "{}", nl6.stderr());
}

#[test]
fn sighup_closes_the_gate_flushes_the_push_and_exits_like_sigterm() {
    // A collector answering 200; the interval is long, so only the closing flush uploads.
    let collector = FakeServer::start(200, "");
    let mut nl6 = boot()
        .args(&[
            "-profiling-pyroscope",
            &collector.url(),
            "-profiling-upload-interval",
            "1h",
        ])
        .start();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        collector.seen().is_empty(),
        "nothing uploaded before the close"
    );
    nl6.signal("HUP");
    let status = nl6.wait_exit(Duration::from_secs(25));
    assert_eq!(status.code(), Some(0), "{}", nl6.stderr());
    for line in [
        "nl6: SIGHUP received: closing the profiling gate",
        "nl6: exiting",
    ] {
        assert!(
            nl6.wait_for_log(line, Duration::from_secs(2)),
            "no {line:?}: {}",
            nl6.stderr()
        );
    }
    let uploads = collector.seen();
    assert!(
        uploads.iter().any(|r| r.path() == "/ingest"),
        "the last window was not flushed: {} requests",
        uploads.len()
    );
}

#[test]
fn under_nohup_a_sighup_is_ignored_as_the_user_asked() {
    let mut nl6 = boot().nohup().start();
    nl6.signal("HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        nl6.is_running(),
        "SIGHUP stopped nl6 started under nohup: {}",
        nl6.stderr()
    );
    let (s, _, _) = nl6.http("GET", "/api/v1/profiling", b"");
    assert_eq!(s, 200);
    let status = nl6.terminate(Duration::from_secs(25));
    assert_eq!(status.code(), Some(0), "{}", nl6.stderr());
}
