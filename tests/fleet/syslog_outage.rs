//! The TCP syslog sender says when its target is down: one line per outage, not one per retry and not
//! silence. Runs the real binary against a loopback port that nobody listens on, then lets a receiver
//! come and go.
use crate::common;

use common::{boot, wait_until};
use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

const LINE: &str = "nl6: syslog: cannot connect to tcp://";

#[test]
fn a_tcp_syslog_outage_is_logged_once_per_outage() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let target = format!("tcp://127.0.0.1:{port}");
    let n = boot()
        .args(&["-devices", "1", "-syslog-target", &target])
        .args(&["-syslog-interval", "100ms"])
        .start();
    let outages = || n.log_lines(LINE).len();
    assert!(
        wait_until(Duration::from_secs(10), || outages() == 1),
        "no outage line: {}",
        n.stderr()
    );
    let line = n.log_lines(LINE).remove(0);
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert!(line.contains("-syslog-queue"), "{line}");
    // Several retries later (backoff from 100 ms), still one line.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(outages(), 1, "{}", n.stderr());

    // The receiver comes up: the sender connects and delivers; then it goes away again: a second outage.
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    listener.set_nonblocking(false).unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = [0u8; 64];
    assert!(conn.read(&mut got).unwrap() > 0, "messages flow");
    drop(listener);
    drop(conn);
    assert!(
        wait_until(Duration::from_secs(15), || outages() == 2),
        "the second outage is logged once: {}",
        n.stderr()
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(outages(), 2, "{}", n.stderr());
}
