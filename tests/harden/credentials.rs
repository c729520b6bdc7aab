//! Hardening: the basic-auth user and password never leak.
//!
//! Boots the binary with basic auth and a tenant against the stand-in (`-basic-auth`, `-multitenancy`), in
//! the flag form and the file form, drives every API and log path — GET/POST profiling with refusals and
//! errors, re-targets away and back, every /debug/pprof/ path (goroutine?debug=2, symbol), the console,
//! the fleet's devices and scenarios, SIGTERM — and asserts that the user, the password and their base64
//! form appear in no response body, no stderr or stdout line and no profile string table. Also:
//! `/debug/pprof/cmdline` is 404, and the stand-in did receive the credentials (so they were in play).
use crate::common;
use crate::push_support;

use prost::Message;
use push_support::StandIn;
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "hardenuser7f3a";
const PASS: &str = "s3cr3tP4ss9b1c";
const TENANT: &str = "tenant-x";

/// The child with stdout and stderr in files (the common helper discards stdout; here it is scanned).
struct Child2 {
    child: Child,
    addr: SocketAddr,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Drop for Child2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(tag: &str, args: &[&str]) -> Child2 {
    let dir = std::env::temp_dir().join(format!("nl6-harden-cred-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let child = Command::new(common::BIN)
        .args(args)
        .args(["-listen", "127.0.0.1:0", "-snmp-port", "0", "-devices", "2"])
        .env_remove("PYROSCOPE_ADHOC_SERVER_ADDRESS")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn nl6");
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        let text = std::fs::read_to_string(&err).unwrap_or_default();
        if let Some(a) = text
            .lines()
            .find_map(|l| l.strip_prefix("nl6 listening on "))
            .and_then(|r| r.split(';').next())
        {
            break a.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no boot line: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    Child2 {
        child,
        addr,
        out,
        err,
    }
}

/// Every request of this test: 30 s read timeout (CPU profiles and the closing flush are slow here).
fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> common::Reply {
    common::request(addr, method, path, &[], body, Duration::from_secs(30))
}

/// Every form of the secret that must not appear.
fn needles() -> Vec<String> {
    use base64::Engine;
    vec![
        USER.to_string(),
        PASS.to_string(),
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASS}")),
    ]
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for n in needles() {
        assert!(!text.contains(&n), "{what} contains {n:?}");
    }
}

/// A gzip'd pprof: decoded, every string of its table checked (and the raw bytes too).
fn assert_clean_profile(what: &str, gz: &[u8]) {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{what}: not gzip: {e}"));
    let p = nl6_profile::proto::Profile::decode(raw.as_slice())
        .unwrap_or_else(|e| panic!("{what}: not pprof: {e}"));
    for s in &p.string_table {
        assert_clean(&format!("{what} string table"), s.as_bytes());
    }
    assert_clean(what, &raw);
}

fn drive(tag: &'static str, auth_args: Vec<String>) -> (usize, usize) {
    let collector = StandIn::start(&["-basic-auth", &format!("{USER}:{PASS}"), "-multitenancy"]);
    let url = collector.url();
    let mut args: Vec<String> = vec![
        "-profiling-pyroscope".into(),
        url.clone(),
        "-profiling-pyroscope-tenant".into(),
        TENANT.into(),
        "-profiling-upload-interval".into(),
        "1s".into(),
    ];
    args.extend(auth_args);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut n = spawn(tag, &argv);
    let a = n.addr;
    let mut bodies = 0;
    let mut check = |what: String, reply: &common::Reply| {
        assert_clean(&what, &reply.2);
        for (k, v) in &reply.1 {
            assert_clean(&format!("{what} header {k}"), v.as_bytes());
        }
        bodies += 1;
    };
    // Uploads with the credentials succeed (they are in play).
    let ok = push_support::wait_until(Duration::from_secs(20), || {
        let r = http(a, "GET", "/api/v1/profiling", b"");
        check("GET profiling".into(), &r);
        common::json(&r.2)["data"]["uploads"].as_u64().unwrap_or(0) >= 2
    });
    assert!(ok, "{tag}: no successful upload with credentials");
    assert!(
        collector
            .requests()
            .iter()
            .any(|r| r.to_string().contains(USER)),
        "{tag}: the stand-in never saw the user"
    );
    // REST: refusals, a re-target away (credentials withheld), an erroring push, back to the flag's.
    let refused = common::unused_loopback_url();
    for body in [
        r#"{"enabled":"yes"}"#.to_string(),
        r#"{"enabled":true,"basic_auth":"x:y"}"#.to_string(),
        r#"{"enabled":true,"server_address":"ftp://x"}"#.to_string(),
        r#"{"enabled":false,"server_address":""}"#.to_string(),
        r#"{"enabled":true,"duration":"-1s"}"#.to_string(),
        "not json".to_string(),
        format!(r#"{{"enabled":true,"server_address":"{refused}"}}"#),
    ] {
        let r = http(a, "POST", "/api/v1/profiling", body.as_bytes());
        check(format!("POST {body}"), &r);
    }
    std::thread::sleep(Duration::from_millis(2500)); // failing uploads to the refused address
    let r = http(a, "GET", "/api/v1/profiling", b"");
    assert!(
        common::json(&r.2)["data"]["last_error"].is_string(),
        "{tag}: no last_error"
    );
    check("GET profiling (failing)".into(), &r);
    for body in [
        format!(r#"{{"enabled":true,"server_address":"{url}/"}}"#),
        r#"{"enabled":true,"server_address":""}"#.to_string(),
    ] {
        let r = http(a, "POST", "/api/v1/profiling", body.as_bytes());
        assert_eq!(r.0, 200, "{body}");
        check(format!("POST {body}"), &r);
    }
    // The pull surface (pull-only now, so the CPU profile is free), the console and the fleet.
    let mut profiles = 0;
    for path in [
        "/debug/pprof/heap",
        "/debug/pprof/allocs",
        "/debug/pprof/goroutine",
        "/debug/pprof/threadcreate",
        "/debug/pprof/block",
        "/debug/pprof/mutex",
        "/debug/pprof/delta_heap",
        "/debug/pprof/profile?seconds=1",
    ] {
        let r = http(a, "GET", path, b"");
        assert_eq!(r.0, 200, "{tag} {path}");
        assert_clean_profile(&format!("{tag} {path}"), &r.2);
        check(path.into(), &r);
        profiles += 1;
    }
    for path in [
        "/debug/pprof/",
        "/debug/pprof/goroutine?debug=1",
        "/debug/pprof/goroutine?debug=2",
        "/debug/pprof/heap?debug=1",
        "/debug/pprof/symbol",
        "/debug/pprof/trace",
        "/debug/pprof/nope",
        "/debug/pprof/heap?seconds=x",
        "/",
        "/api/v1/profiling/flamegraph.svg",
        "/api/v1/devices",
        "/api/v1/scenarios",
        "/nope",
    ] {
        let r = http(a, "GET", path, b"");
        check(path.into(), &r);
    }
    let r = http(a, "POST", "/debug/pprof/symbol", b"0x1+0x2");
    check("POST symbol".into(), &r);
    let r = http(a, "POST", "/api/v1/scenarios", br#"{"name":"x"}"#);
    check("POST scenarios".into(), &r);
    for method in ["GET", "POST"] {
        let r = http(a, method, "/debug/pprof/cmdline", b"");
        assert_eq!(r.0, 404, "{tag}: {method} cmdline");
        check("cmdline".into(), &r);
    }
    // Back to pushing with credentials, then SIGTERM (the closing flush logs too).
    let r = http(a, "POST", "/api/v1/profiling", br#"{"enabled":true}"#);
    check("POST reopen".into(), &r);
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(n.child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(
        common::wait_until(Duration::from_secs(25), || n
            .child
            .try_wait()
            .unwrap()
            .is_some()),
        "{tag}: no exit after SIGTERM"
    );
    let stderr = std::fs::read(&n.err).unwrap();
    let stdout = std::fs::read(&n.out).unwrap();
    assert!(
        String::from_utf8_lossy(&stderr).contains("credentials withheld"),
        "{tag}: the re-target was not logged"
    );
    assert_clean(&format!("{tag} stderr"), &stderr);
    assert_clean(&format!("{tag} stdout"), &stdout);
    let _ = std::fs::remove_dir_all(n.out.parent().unwrap());
    (bodies, profiles)
}

#[test]
fn credentials_never_leak() {
    let file = std::env::temp_dir().join(format!("nl6-harden-auth-{}", std::process::id()));
    std::fs::write(&file, format!("{USER}:{PASS}\n")).unwrap();
    let path = file.to_string_lossy().to_string();
    let flag = std::thread::spawn(|| {
        drive(
            "flag",
            vec![
                "-profiling-pyroscope-basic-auth".into(),
                format!("{USER}:{PASS}"),
            ],
        )
    });
    let from_file = std::thread::spawn(move || {
        drive(
            "file",
            vec!["-profiling-pyroscope-basic-auth-file".into(), path],
        )
    });
    let a = flag.join();
    let b = from_file.join();
    let _ = std::fs::remove_file(&file);
    let (a, b) = (a.expect("flag form"), b.expect("file form"));
    eprintln!(
        "FIGURE credentials: flag form {} responses ({} profiles decoded), file form {} responses ({} profiles): no user, password or base64 anywhere",
        a.0, a.1, b.0, b.1
    );
}
