//! Helpers shared by the fleet integration tests: free loopback ports, external tools (bounded waits are
//! `common::wait_for`).
#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};

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
