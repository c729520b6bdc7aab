//! Hardening against low limits, stalls and small lies of the REST and lab surfaces, on the real binary
//! (or an in-process fleet), loopback only, every loop bounded:
//!
//! - a revert that cannot be armed (`RLIMIT_NPROC` reached) is a 500 with the state unchanged, never a
//!   200 `revert_pending:true` that leaves the gate open for good;
//! - thread dumps (`goroutine?debug=2`) looped by 16 clients: one more dump is answered (or refused with
//!   503 and `Retry-After`) within 5 s, and the gate's GET within 1 s;
//! - `HEAD` is served wherever `GET` is (`/api/v1/devices`, `/api/v1/scenarios`);
//! - a scheduled scenario can be cancelled (`DELETE /api/v1/scenarios/{id}`), freeing its place;
//! - an SNMP Response PDU sent to a device is counted as a PDU that is not a request, not as a bad
//!   community.

use crate::common;

use nl6::http::Request;
use nl6::lab::{api, Fleet, FleetConfig};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn json_post(n: &common::Nl6, path: &str, body: &str) -> common::Reply {
    n.http_with(
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
        Duration::from_secs(10),
    )
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Root is exempt from RLIMIT_NPROC: as root, the binary (and the prlimit that changes its limit, which
/// needs the same user) run as `nobody` through setpriv, as a user's would.
const AS_NOBODY: &[&str] = &["--reuid=65534", "--regid=65534", "--clear-groups"];

/// The soft and hard "Max processes" of `pid`, as /proc/PID/limits shows them.
fn nproc_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max processes"))
        .expect("Max processes line");
    let mut f = line["Max processes".len()..].split_whitespace();
    (f.next().unwrap().to_string(), f.next().unwrap().to_string())
}

/// Sets the soft RLIMIT_NPROC of `pid` (the hard one is left alone, so it can be raised again).
fn prlimit_nproc(pid: u32, soft: &str) {
    let limit = [
        "prlimit".to_string(),
        "--pid".to_string(),
        pid.to_string(),
        format!("--nproc={soft}:"),
    ];
    let mut cmd = if running_as_root() {
        let mut c = Command::new("setpriv");
        c.args(AS_NOBODY).args(&limit);
        c
    } else {
        let mut c = Command::new(&limit[0]);
        c.args(&limit[1..]);
        c
    };
    let st = cmd.status().expect("prlimit");
    assert!(st.success(), "prlimit --nproc={soft}: failed");
    assert_eq!(nproc_limits(pid).0, soft);
}

fn boot_as_a_user() -> common::Boot {
    if !running_as_root() {
        return common::boot();
    }
    common::boot()
        .binary("setpriv")
        .args(AS_NOBODY)
        .arg(common::BIN)
}

#[test]
fn a_revert_that_cannot_be_armed_fails_the_post_and_changes_nothing() {
    let n = boot_as_a_user().start();
    let (soft, hard) = nproc_limits(n.pid());
    // One task for the whole user: no thread can start from here on.
    prlimit_nproc(n.pid(), "1");
    let r = json_post(
        &n,
        "/api/v1/profiling",
        r#"{"enabled":true,"server_address":"","duration":"2s"}"#,
    );
    let v = common::json(&r.2);
    assert_eq!(r.0, 500, "a revert with no timer was promised: {v}");
    assert!(
        v["error"].as_str().unwrap().contains("revert"),
        "the error says what failed: {v}"
    );
    let now = common::json(&n.http("GET", "/api/v1/profiling", b"").2);
    assert_eq!(now["data"]["enabled"], false, "{now}");
    assert_eq!(now["data"]["revert_pending"], false, "{now}");
    // With room again, the same POST opens the gate and the revert closes it.
    prlimit_nproc(n.pid(), if soft == "unlimited" { &hard } else { &soft });
    let r = json_post(
        &n,
        "/api/v1/profiling",
        r#"{"enabled":true,"server_address":"","duration":"1s"}"#,
    );
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    common::wait_for("the revert", 5, || {
        common::json(&n.http("GET", "/api/v1/profiling", b"").2)["data"]["enabled"] == false
    });
}

/// Loops `goroutine?debug=2` on `addr` until `stop` (bounded to 40 s); the number answered.
fn dump_loop(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(40);
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) && Instant::now() < end {
            let r = std::panic::catch_unwind(|| {
                common::request(
                    addr,
                    "GET",
                    "/debug/pprof/goroutine?debug=2",
                    &[],
                    b"",
                    Duration::from_secs(30),
                )
            });
            n += u64::from(r.is_ok());
        }
        n
    })
}

#[test]
fn a_thread_dump_is_answered_or_refused_within_5_s_under_looping_dumpers() {
    let n = common::boot().start();
    n.open_pull_only();
    let stop = Arc::new(AtomicBool::new(false));
    let loops: Vec<_> = (0..16)
        .map(|_| dump_loop(n.addr, Arc::clone(&stop)))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let mut worst = Duration::ZERO;
    let mut seen = Vec::new();
    for _ in 0..6 {
        let t = Instant::now();
        let (s, h, _) = n.http_with(
            "GET",
            "/debug/pprof/goroutine?debug=2",
            &[],
            b"",
            Duration::from_secs(30),
        );
        let took = t.elapsed();
        worst = worst.max(took);
        if s == 503 {
            assert!(
                common::header(&h, "retry-after").is_some(),
                "a refused dump says when to retry"
            );
        } else {
            assert_eq!(s, 200);
        }
        seen.push((s, took));
        let t = Instant::now();
        let (s, _, _) = n.http_with(
            "GET",
            "/api/v1/profiling",
            &[],
            b"",
            Duration::from_secs(10),
        );
        assert_eq!(s, 200);
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "GET /api/v1/profiling took {:?} beside the dumps",
            t.elapsed()
        );
    }
    stop.store(true, Ordering::SeqCst);
    let answered: u64 = loops.into_iter().map(|l| l.join().unwrap_or(0)).sum();
    eprintln!("FIGURE dumps beside 16 looping dumpers: {seen:?}; the loops got {answered} answers");
    assert!(
        worst <= Duration::from_secs(5),
        "a dump request waited {worst:?}: {seen:?}"
    );
}

#[test]
fn head_is_served_wherever_get_is() {
    let n = common::boot().start();
    // Bodies that do not change between the two requests (device counters and uptimes do).
    for path in [
        "/api/v1/devices?name=none",
        "/api/v1/scenarios",
        "/api/v1/profiling",
    ] {
        let (gs, gh, gb) = n.http("GET", path, b"");
        let (hs, hh, hb) = n.http("HEAD", path, b"");
        assert_eq!((gs, hs), (200, 200), "{path}");
        assert!(hb.is_empty(), "{path}: HEAD has no body");
        assert_eq!(
            common::header(&hh, "content-type"),
            common::header(&gh, "content-type"),
            "{path}"
        );
        assert_eq!(
            common::header(&hh, "content-length"),
            Some(gb.len().to_string().as_str()),
            "{path}"
        );
    }
    let (s, h, _) = n.http("PUT", "/api/v1/devices", b"");
    assert_eq!(s, 405);
    assert_eq!(common::header(&h, "allow"), Some("GET, HEAD"));
}

fn scenario_body(device: &str, start_at: &str) -> String {
    format!(
        r#"{{"name":"link-flap","device":"{device}","duration":"10s","start_at":"{start_at}"}}"#
    )
}

#[test]
fn scheduled_scenarios_can_be_cancelled_freeing_their_place() {
    let n = common::boot().start();
    let tomorrow = {
        let out = Command::new("date")
            .args(["-u", "-d", "+23 hours", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let mut ids = Vec::new();
    for _ in 0..64 {
        let r = json_post(
            &n,
            "/api/v1/scenarios",
            &scenario_body("nl6-dev-0000", &tomorrow),
        );
        assert_eq!(r.0, 201, "{}", String::from_utf8_lossy(&r.2));
        ids.push(common::json(&r.2)["data"]["id"].as_u64().unwrap());
    }
    let full = json_post(
        &n,
        "/api/v1/scenarios",
        &scenario_body("nl6-dev-0000", &tomorrow),
    );
    assert_eq!(full.0, 429);
    let del = |id: &str| {
        n.http_with(
            "DELETE",
            &format!("/api/v1/scenarios/{id}"),
            &[("Content-Type", "application/json")],
            b"",
            Duration::from_secs(10),
        )
    };
    let r = del(&ids[3].to_string());
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    assert_eq!(common::json(&r.2)["data"]["state"], "cancelled");
    // The place is free again, and the list says what happened.
    let r = json_post(
        &n,
        "/api/v1/scenarios",
        &scenario_body("nl6-dev-0000", &tomorrow),
    );
    assert_eq!(r.0, 201, "{}", String::from_utf8_lossy(&r.2));
    let list = common::json(&n.http("GET", "/api/v1/scenarios", b"").2);
    let cancelled: Vec<_> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{list}");
    assert_eq!(cancelled[0]["id"], ids[3]);
    // Cancelling twice, an unknown id, or not a number: each says so.
    let r = del(&ids[3].to_string());
    assert_eq!(r.0, 409, "{}", String::from_utf8_lossy(&r.2));
    let r = del("999999");
    assert_eq!(r.0, 404, "{}", String::from_utf8_lossy(&r.2));
    let r = del("x");
    assert_eq!(r.0, 400, "{}", String::from_utf8_lossy(&r.2));
    // A running one is cancelled too: the device's interface comes back up.
    let r = json_post(
        &n,
        "/api/v1/scenarios",
        r#"{"name":"link-flap","device":"nl6-dev-0001","duration":"1h"}"#,
    );
    // 64 are active again: free one first.
    assert_eq!(r.0, 429);
    assert_eq!(del(&ids[0].to_string()).0, 200);
    let r = json_post(
        &n,
        "/api/v1/scenarios",
        r#"{"name":"link-flap","device":"nl6-dev-0001","duration":"1h"}"#,
    );
    assert_eq!(r.0, 201, "{}", String::from_utf8_lossy(&r.2));
    let id = common::json(&r.2)["data"]["id"].as_u64().unwrap();
    let r = del(&id.to_string());
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    common::wait_for("the interface back up", 10, || {
        let v = common::json(&n.http("GET", "/api/v1/devices?name=nl6-dev-0001", b"").2);
        v["data"][0]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["oper_status"] == "up")
    });
}

#[test]
fn an_snmp_response_pdu_is_not_a_bad_community() {
    let f = Fleet::start(FleetConfig::default().with_devices(1).with_snmp_port(0)).unwrap();
    let target = f.devices()[0].snmp_addr().unwrap();
    // SEQUENCE { version 1 (v2c), "public", Response-PDU { id 1, 0, 0, varbinds {} } }
    let response: &[u8] = &[
        0x30, 0x18, 0x02, 0x01, 0x01, 0x04, 0x06, b'p', b'u', b'b', b'l', b'i', b'c', 0xa2, 0x0b,
        0x02, 0x01, 0x01, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x30, 0x00,
    ];
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.send_to(response, target).unwrap();
    let counters = || {
        let r = api::route(&Request::new("GET", "/api/v1/devices"), &f).unwrap();
        common::json(&r.body)["data"][0]["counters"].clone()
    };
    common::wait_for("the PDU counted", 5, || counters()["not_requests"] == 1);
    let c = counters();
    assert_eq!(c["bad_community"], 0, "{c}");
    assert_eq!(c["malformed"], 0, "{c}");
    f.stop();
}
