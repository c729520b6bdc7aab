//! `goroutine?debug=2` names each thread's state as the kernel reports it, in Go's words: the SNMP loops
//! blocked in a socket read are `IO wait`, idle workers parked on a condvar `semacquire`, the main thread
//! waiting for a signal `syscall`, the worker answering the request `running`.
use crate::common;

use common::boot;

#[test]
fn debug2_thread_headers_carry_the_kernel_state() {
    let n = boot().args(&["-devices", "2"]).start();
    n.open_pull_only();
    // Let the device loops settle into their reads.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (status, _, body) = n.http("GET", "/debug/pprof/goroutine?debug=2", b"");
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("goroutine "))
        .collect();
    let state_of = |thread: &str| {
        headers
            .iter()
            .find(|h| h.contains(&format!("thread \"{thread}\"")))
            .map(|h| {
                h.split('[')
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .unwrap_or_else(|| panic!("no thread {thread}: {headers:#?}"))
    };
    assert_eq!(state_of("snmp-0"), "IO wait", "{headers:#?}");
    assert_eq!(state_of("snmp-1"), "IO wait", "{headers:#?}");
    let snmp = headers
        .iter()
        .find(|h| h.contains("thread \"snmp-0\""))
        .unwrap();
    assert!(snmp.contains(", wchan \""), "{snmp}");
    assert_eq!(
        state_of("nl6"),
        "syscall",
        "main waits in sigtimedwait: {headers:#?}"
    );
    let count = |word: &str| {
        headers
            .iter()
            .filter(|h| h.contains(&format!("[{word},")))
            .count()
    };
    assert!(
        count("running") >= 1,
        "the answering worker runs: {headers:#?}"
    );
    assert!(
        count("semacquire") >= 1,
        "idle workers wait on a futex: {headers:#?}"
    );
    assert!(
        count("running") < headers.len() / 2,
        "not everything is running: {headers:#?}"
    );
}
