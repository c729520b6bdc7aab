//! Test support: `go tool pprof` and google/pprof's own parser + CheckValid, run on profiles written to
//! temp files. The checker is built from `checkprof.go` into the test's target temp dir at test time.
//! A missing `go` fails the test with a clear message (the CI installs Debian's golang-go).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

#[path = "go_pprof.rs"]
mod go_pprof_support;

/// The shape google/pprof parsed (see checkprof.go).
#[derive(Debug, serde::Deserialize)]
pub struct Shape {
    pub sample_types: Vec<String>,
    pub period_type: String,
    pub period: i64,
    pub default_sample_type: String,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub samples: usize,
    pub mappings: Option<Vec<MappingShape>>,
    pub functions: Option<Vec<String>>,
    pub totals: Option<Vec<i64>>,
    pub str_labels: Option<Vec<String>>,
    pub num_labels: Option<Vec<String>>,
}

#[derive(Debug, serde::Deserialize)]
pub struct MappingShape {
    pub file: String,
    pub build_id: String,
    pub has_functions: bool,
    pub has_filenames: bool,
}

fn require_go() {
    let ok = Command::new("go")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "`go` is not installed or not on PATH: install Debian's golang-go (these tests run `go tool pprof`)");
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("engine_encode")
}

/// Builds checkprof once per test binary.
fn checker() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        require_go();
        let dir = tmp().join("checkprof");
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("checkprof.go");
        // Next to this file, whichever crate's test includes it (nl6's tests and the engine crate's).
        std::fs::write(&src, include_str!("checkprof.go")).unwrap();
        let bin = dir.join("checkprof");
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(&src)
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", dir.join("gocache"))
            .output()
            .expect("running go build");
        assert!(
            out.status.success(),
            "building the pprof checker failed (needs google/pprof sources at /usr/share/gocode): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

/// Writes `bytes` to a fresh temp file named after `name`.
pub fn write_profile(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = tmp().join("profiles");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}.pb.gz", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Parses with google/pprof and runs CheckValid; panics with pprof's error otherwise.
pub fn check(path: &Path) -> Shape {
    let out = Command::new(checker())
        .arg(path)
        .output()
        .expect("running checkprof");
    assert!(
        out.status.success(),
        "google/pprof rejected {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("checkprof JSON")
}

/// Runs `go tool pprof <args> <path>` and returns stdout; panics on failure. Local binaries are never
/// read (`PPROF_BINARY_PATH`): every name must come from the profile itself.
pub fn pprof(args: &[&str], path: &Path) -> String {
    require_go();
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.push(path.as_os_str());
    let mut cmd = go_pprof_support::go_pprof_command(&all, &tmp());
    cmd.env("PPROF_BINARY_PATH", "/nonexistent");
    go_pprof_support::go_pprof_ok_with(cmd)
}
