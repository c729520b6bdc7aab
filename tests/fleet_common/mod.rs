//! Helpers shared by the fleet integration tests: bounded waits, free loopback ports, external tools.
#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Polls `ok` every 20 ms for up to `secs` seconds; panics naming `what` on timeout.
pub fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A UDP port free on 127.0.0.1 right now.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs a tool to completion; panics with install advice when it is missing.
pub fn run(tool: &str, args: &[&str]) -> Output {
    Command::new(tool)
        .args(args)
        .env("MIBS", "")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} ({e}): install the Debian package that provides it (see .ci/run)"))
}

/// A child process killed (by its own pid) when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
