//! Records the git commit for `nl6 --version`; in release builds for Linux, links with
//! `link/keep-debug-frame.ld`, which keeps `.debug_frame` (musl's unwind rules) and drops the other
//! debug sections, and the x86_64 musl release build with its relative relocations packed (DT_RELR);
//! compiles the gNMI `.proto` files of `proto/` into the messages and services `src/lab/gnmi` uses, with
//! protox, a protobuf compiler in Rust (no system `protoc`; the well-known `google/protobuf/*.proto` files
//! come with it).
use std::process::Command;

fn compile_protos() {
    let protos = [
        "proto/gnmi.proto",
        "proto/gnmi_ext.proto",
        "proto/dialout.proto",
    ];
    for p in protos.iter().chain(["proto"].iter()) {
        println!("cargo:rerun-if-changed={p}");
    }
    let descriptors = protox::compile(protos, ["proto"])
        .unwrap_or_else(|e| panic!("gNMI protos: proto/*.proto do not compile: {e}"));
    if let Err(e) = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)
    {
        panic!("gNMI protos: generating the Rust code failed: {e}");
    }
}

fn main() {
    compile_protos();
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=NL6_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
        println!("cargo:rustc-link-arg=-Wl,-T,{dir}/link/keep-debug-frame.ld");
        println!("cargo:rerun-if-changed=link/keep-debug-frame.ld");
    }
    // The static-pie's relative relocations as a bitmap (DT_RELR, which musl's start code applies)
    // instead of 24 bytes each in `.rela.dyn`. Only the x86_64 static build: GNU ld takes it there, and
    // a glibc build so linked would need glibc 2.36 to start.
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    if release && linux && musl && x86_64 {
        println!("cargo:rustc-link-arg=-Wl,-z,pack-relative-relocs");
    }
}
