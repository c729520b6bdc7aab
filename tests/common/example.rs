//! Building one of the workspace's examples for a test: cargo, run from the workspace, into the test's own
//! scratch target directory (the `cargo test` running the test holds the workspace's), for the same target
//! as the test. Used by the tests that start an embedder example (the engine's `embed`, the push crate's
//! `push_embed`).

use std::path::PathBuf;
use std::process::Command;

/// Builds `example` of `package` into `dir` under `CARGO_TARGET_TMPDIR` and returns the executable's path;
/// `rustflags`, when given, replace the workspace's. Panics with cargo's stderr if the build fails.
pub fn build(package: &str, example: &str, dir: &str, rustflags: Option<&[&str]>) -> PathBuf {
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "-p", package, "--example", example])
        .arg("--target-dir")
        .arg(&target_dir);
    if let Some(flags) = rustflags {
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    }
    let mut out_dir = target_dir;
    if cfg!(target_env = "musl") {
        cmd.args(["--target", "x86_64-unknown-linux-musl"]);
        out_dir.push("x86_64-unknown-linux-musl");
    }
    let out = cmd.output().expect("running cargo");
    assert!(
        out.status.success(),
        "cargo build -p {package} --example {example} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out_dir.join("debug/examples").join(example)
}
