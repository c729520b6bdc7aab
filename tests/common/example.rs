//! Building one of the workspace's examples for a test: cargo, run from the workspace, for the same target
//! as the test. Used by the tests that start an embedder example (the engine's `embed`, the push crate's
//! `push_embed`).
//!
//! With the workspace's own flags the example goes into the workspace's target directory, where the
//! test build left every dependency compiled, so only the example itself is built and linked (cargo holds
//! that directory's lock while it builds, not while tests run). With other flags it goes into a scratch
//! directory of its own, so the workspace's artifacts are never rebuilt under them.

use std::path::{Path, PathBuf};

/// Builds `example` of `package` and returns the executable's path; `rustflags`, when given, replace the
/// workspace's and the build goes into `dir` under `CARGO_TARGET_TMPDIR`. Panics with cargo's stderr if
/// the build fails.
pub fn build(package: &str, example: &str, dir: &str, rustflags: Option<&[&str]>) -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let target_dir = match rustflags {
        // CARGO_TARGET_TMPDIR is `<target dir>/tmp`.
        None => tmp
            .parent()
            .expect("CARGO_TARGET_TMPDIR has a parent")
            .to_path_buf(),
        Some(_) => tmp.join(dir),
    };
    let mut cmd = super::nice_cargo();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--quiet", "-p", package, "--example", example])
        .arg("--target-dir")
        .arg(&target_dir);
    if let Some(flags) = rustflags {
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    } else {
        cmd.env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS");
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
