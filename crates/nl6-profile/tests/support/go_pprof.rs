//! The one way the tests run `go tool pprof`: the engine crate's tests include it as a module, nl6's
//! tests through `tests/common` (the file needs nothing but std, so both crates can include it).
//!
//! `HOME` and `PPROF_TMPDIR` point into the test's own work directory (pprof writes its cache and the
//! profiles it fetches there) and the HTTP proxy variables are removed (every URL is loopback).
#![allow(dead_code)] // each test binary uses its own subset

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// `go tool pprof ARGS` (flags, then a file or a URL) ready to run in `work`: callers add what only
/// they need (for example `PPROF_BINARY_PATH`) before running it.
pub fn go_pprof_command<S: AsRef<OsStr>>(args: &[S], work: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof"])
        .args(args)
        .env("HOME", work)
        .env("PPROF_TMPDIR", work)
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY");
    cmd
}

/// Runs `cmd` (from [`go_pprof_command`]) to completion: its output whatever the status (a test of a
/// refusal reads its stderr).
pub fn run_go_pprof(mut cmd: Command) -> Output {
    cmd.output()
        .expect("`go` must be installed (scripts/setup.sh installs golang-go)")
}

/// Runs `go tool pprof ARGS` in `work`: the output whatever the status.
pub fn go_pprof<S: AsRef<OsStr>>(args: &[S], work: &Path) -> Output {
    run_go_pprof(go_pprof_command(args, work))
}

/// [`run_go_pprof`] that must succeed: its stdout, or a panic naming the arguments with pprof's stderr.
pub fn go_pprof_ok_with(cmd: Command) -> String {
    let shown: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let out = run_go_pprof(cmd);
    assert!(
        out.status.success(),
        "go {shown:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`go_pprof`] that must succeed: its stdout, or a panic with its stderr.
pub fn go_pprof_ok<S: AsRef<OsStr>>(args: &[S], work: &Path) -> String {
    go_pprof_ok_with(go_pprof_command(args, work))
}
