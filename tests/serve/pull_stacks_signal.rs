//! The stack-capture signal is one number on both builds (38, Debian's `RTMIN+4`): `kill -RTMIN+4` as
//! Debian's procps `kill` and bash send it leaves the binary alive, glibc or static musl alike (this test runs on
//! both; the musl list in scripts/test.sh takes it by its `serve_pull` prefix), and the thread dump that
//! uses the signal still captures every thread's stack afterwards.
use crate::common;

use common::boot;
use std::process::Command;
use std::time::Duration;

#[test]
fn kill_rtmin_plus_4_from_debians_kill_leaves_the_binary_alive_and_dumping() {
    let named = Command::new("bash")
        .args(["-c", "kill -l RTMIN+4"])
        .output()
        .expect("bash");
    assert_eq!(
        String::from_utf8_lossy(&named.stdout).trim(),
        "38",
        "Debian's shell numbers RTMIN+4 as 38"
    );
    let mut nl6 = boot().start();
    let pid = nl6.pid().to_string();
    // procps' kill (/usr/bin/kill) and bash's builtin, as a user types them.
    for (tool, args) in [
        ("/usr/bin/kill", vec!["-s", "RTMIN+4", pid.as_str()]),
        ("bash", vec!["-c", "kill -RTMIN+4 \"$0\"", pid.as_str()]),
        ("/usr/bin/kill", vec!["-s", "RTMIN+4", pid.as_str()]),
    ] {
        let sent = Command::new(tool).args(&args).status().expect("kill");
        assert!(sent.success(), "{tool} {args:?}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            nl6.is_running(),
            "kill -RTMIN+4 (38) killed nl6: {}",
            nl6.stderr()
        );
    }
    let (s, _, _) = nl6.http("GET", "/api/v1/profiling", b"");
    assert_eq!(s, 200);
    // The dump signals each thread with the same number: every thread's stack comes back.
    nl6.open_pull_only();
    let (s, _, b) = nl6.http("GET", "/debug/pprof/goroutine?debug=2", b"");
    assert_eq!(s, 200);
    let dump = String::from_utf8_lossy(&b);
    let threads =
        dump.matches("\ngoroutine ").count() + usize::from(dump.starts_with("goroutine "));
    assert!(threads >= 2, "{dump}");
    assert!(
        !dump.contains("(no stack"),
        "a thread's stack was not captured: {dump}"
    );
    let status = nl6.terminate(Duration::from_secs(25));
    assert_eq!(status.code(), Some(0), "{}", nl6.stderr());
}
