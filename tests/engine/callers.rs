//! Every caller in every stack is proven by the machine code (see `callers_support`): CPU profiles, the
//! goroutine (thread dump) profile and `threadcreate` of the real binary, under loads that cross libc's
//! frameless `sendmsg`/`recvmsg`/`sendto`/`recvfrom`/`poll`, `memcpy`, `malloc`/`free`, `munmap` and the
//! vDSO's `clock_gettime` (the lab with `-traffic 10ms` and a GET load, and the 30 000-device
//! `-device-net` fleet under a spread GET load). No edge may contradict the code, and at least 99.5 % of
//! the samples must end in a thread root (the rest in a named stop frame).
//!
//! `NL6_VERIFY_BINARY=path` runs another build (e.g. a release build, or an older one to measure it).
use crate::callers_support;
use crate::common;
use crate::fleet_common;

use callers_support::{verify, Process, Verdict};
use common::{boot, json, Nl6};
use fleet_common::{device_ip, get_request, load, DEVICES};
use nl6_profile::proto::{self, Profile};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Share of samples that must end in a thread root with every edge proven (of those not cut at the
/// recorded depth).
const ROOTED: f64 = 0.995;
/// The stop frame of a stack deeper than the engine records (64 frames, truncated at the root end): an
/// honest cut, not a wrong edge. Under `-traffic` the gNMI thread's tokio/tonic stacks pass 64 frames
/// in a debug build (71 in a dump), so those samples are counted apart and reported, not as rooted.
const TOO_DEEP: &str = "[unwind: deeper than the recorded frames]";
/// Seconds of CPU profile per load (kept short: the musl suite runs this too).
const SECONDS: u32 = 3;

fn boot_under_test(args: &[&str]) -> Nl6 {
    let b = boot().args(args);
    match std::env::var("NL6_VERIFY_BINARY") {
        Ok(path) if !path.is_empty() => b.binary(&path).start(),
        _ => b.start(),
    }
}

fn fetch(n: &Nl6, path: &str, secs: u32) -> Profile {
    let (status, _, body) = n.http_with(
        "GET",
        path,
        &[],
        b"",
        Duration::from_secs(u64::from(secs) + 30),
    );
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    proto::decode(&body).expect("a pprof profile")
}

fn report(what: &str, v: &Verdict) {
    eprintln!(
        "engine_callers: {what}: {} samples, {:.2} % rooted, {} stopped, {} fabricated, {} unended; stops {:?}",
        v.samples,
        100.0 * v.rooted_share(),
        v.stopped,
        v.fabricated,
        v.unended,
        v.stops
    );
    for f in &v.failures {
        eprintln!("{f}");
    }
}

fn assert_proven(what: &str, v: &Verdict, min_samples: i64) {
    report(what, v);
    assert!(
        v.samples >= min_samples,
        "{what}: only {} samples",
        v.samples
    );
    assert_eq!(v.fabricated, 0, "{what}: edges the code contradicts");
    assert_eq!(
        v.unended, 0,
        "{what}: stacks ending in neither a root nor a stop"
    );
    let too_deep = v.stops.get(TOO_DEEP).copied().unwrap_or(0);
    let whole = (v.samples - too_deep).max(1);
    assert!(
        whole >= min_samples / 2,
        "{what}: only {whole} samples not cut at the recorded depth"
    );
    let rooted = v.rooted as f64 / whole as f64;
    assert!(
        rooted >= ROOTED,
        "{what}: {:.2} % of the samples not cut at the recorded depth end in a thread root",
        100.0 * rooted
    );
}

/// GETs spread over `count` devices at `addr(i)`, fire and forget (answers drained), until `stop`.
fn spread_load(
    addr: impl Fn(u32) -> SocketAddr + Send + 'static,
    count: u32,
    stop: Arc<AtomicBool>,
) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let mut buf = [0u8; 1500];
    let mut i = 0u32;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..16 {
            let _ = sock.send_to(&get_request(i as i32, "1.3.6.1.2.1.1.5.0"), addr(i % count));
            i = i.wrapping_add(1);
        }
        while sock.recv_from(&mut buf).is_ok() {}
    }
}

/// The lab per port with every subsystem busy (`-traffic 10ms`) and a GET load: the CPU profile, the
/// goroutine profile (every thread's stack through the same signal-context walk) and `threadcreate`.
#[test]
fn lab_under_traffic_every_caller_is_proven() {
    let n = boot_under_test(&["-devices", "20", "-snmp-port", "0", "-traffic", "10ms"]);
    n.open_pull_only();
    let (status, _, body) = n.http("GET", "/api/v1/devices?limit=1", b"");
    assert_eq!(status, 200);
    let v = json(&body);
    let port = v["data"][0]["snmp"]["port"].as_u64().expect("port") as u16;
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            spread_load(move |_| SocketAddr::from(([127, 0, 0, 1], port)), 1, stop)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let proc_ = Process::open(n.pid());
    let cpu = fetch(
        &n,
        &format!("/debug/pprof/profile?seconds={SECONDS}"),
        SECONDS,
    );
    let mut dumps = Verdict::default();
    let t0 = Instant::now();
    for _ in 0..5 {
        let g = verify(&proc_, &fetch(&n, "/debug/pprof/goroutine", 0), true);
        dumps.samples += g.samples;
        dumps.rooted += g.rooted;
        dumps.stopped += g.stopped;
        dumps.fabricated += g.fabricated;
        dumps.unended += g.unended;
        dumps.failures.extend(g.failures);
        for (k, c) in g.stops {
            *dumps.stops.entry(k).or_default() += c;
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(30));
    let created = verify(&proc_, &fetch(&n, "/debug/pprof/threadcreate", 0), false);
    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap();
    assert_proven("lab cpu", &verify(&proc_, &cpu, true), 50);
    assert_proven("lab goroutine", &dumps, 20);
    assert_proven("lab threadcreate", &created, 3);
}

/// The 30 000-device fleet at its own addresses under a spread GET load: every caller proven, and the
/// hottest stack reads the send path from the serving loop down to `sendmsg`.
#[test]
fn fleet_under_spread_load_every_caller_is_proven() {
    let n = boot_under_test(&["-devices", "30000", "-device-net", "127.1.0.0/16"]);
    n.open_pull_only();
    let (status, _, body) = n.http("GET", "/api/v1/devices?limit=1", b"");
    assert_eq!(status, 200);
    let port = json(&body)["data"][0]["snmp"]["port"]
        .as_u64()
        .expect("port") as u16;
    let stop = Arc::new(AtomicBool::new(false));
    let loaders: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                spread_load(
                    move |i| SocketAddr::from((device_ip(i), port)),
                    DEVICES,
                    stop,
                )
            })
        })
        .collect();
    let waiter = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || load(port, 1, stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    let proc_ = Process::open(n.pid());
    let cpu = fetch(
        &n,
        &format!("/debug/pprof/profile?seconds={SECONDS}"),
        SECONDS,
    );
    stop.store(true, Ordering::Relaxed);
    for l in loaders {
        l.join().unwrap();
    }
    let (sent, _, _) = waiter.join().unwrap();
    assert!(sent > 100, "the load ran: {sent}");
    let v = verify(&proc_, &cpu, true);
    assert_proven("fleet cpu", &v, 40);

    // The heaviest stack (by samples, leaf first, names of the outermost function per location).
    let text = |i: i64| cpu.string_table[i as usize].clone();
    let name_of = |id: u64| {
        let l = cpu.location.iter().find(|l| l.id == id).unwrap();
        l.line
            .last()
            .and_then(|ln| cpu.function.iter().find(|f| f.id == ln.function_id))
            .map_or(String::new(), |f| text(f.name))
    };
    let mut stacks: std::collections::BTreeMap<Vec<String>, i64> = Default::default();
    for s in &cpu.sample {
        let names: Vec<String> = s.location_id.iter().map(|&id| name_of(id)).collect();
        *stacks.entry(names).or_default() += s.value[0];
    }
    // The send path's biggest stack (the receive path can outweigh it on a loaded machine): its frames
    // must all be there, in order.
    let (top, count) = stacks
        .iter()
        .filter(|e| e.0.iter().any(|f| f.contains("sendmsg")))
        .max_by_key(|e| *e.1)
        .expect("no sample in sendmsg under the spread load");
    eprintln!(
        "engine_callers: fleet's biggest send stack ({count} samples):\n  {}",
        top.join("\n  ")
    );
    let pos = |needle: &str| top.iter().position(|f| f.contains(needle));
    let chain = [
        pos("sendmsg"),
        pos("nl6::netsys::"),
        pos("nl6::lab::send::send_from_retrying"),
        pos("nl6::lab::snmp::serve::run"),
    ];
    assert!(
        chain.iter().all(Option::is_some) && chain.windows(2).all(|w| w[0] < w[1]),
        "the biggest stack is the send path: {top:?}"
    );
}
