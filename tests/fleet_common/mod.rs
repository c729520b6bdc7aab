//! Helpers shared by the fleet integration tests: free loopback ports, external tools (bounded waits are
//! `common::wait_for`), and counting peers for INFORMs, TCP syslog and NetFlow ([`receivers`]).
#![allow(dead_code)]

pub mod receivers;

use nl6::lab::snmp::ber::{Oid, Value};
use nl6::lab::snmp::{pdu, Message};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Runs net-snmp's `tool` (snmpget, snmpwalk, snmpbulkwalk) against `target` as a v2c manager with
/// community `public`, numeric OIDs, a 2 s timeout and 2 retries, then `extra`; its stdout, or a panic
/// naming the tool and its stderr.
pub fn snmp_tool(tool: &str, target: &str, extra: &[&str]) -> String {
    let mut args = vec!["-v2c", "-c", "public", "-On", "-t", "2", "-r", "2", target];
    args.extend_from_slice(extra);
    let out = run(tool, &args);
    assert!(
        out.status.success(),
        "{tool} {target} {extra:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The MIB-II rows an `snmpwalk` of a whole device prints: the system group (8 objects) and, for each of
/// its 4 interfaces, 22 ifTable and 19 ifXTable columns.
pub const WALK_ROWS: usize = 8 + 4 * (22 + 19);

/// The rows of `walk` (an `snmpwalk -On` output) under MIB-II, its end-of-view line left out.
pub fn walk_rows(walk: &str) -> usize {
    walk.lines()
        .filter(|l| l.starts_with(".1.3.6.1.2.1.") && !l.contains("No more variables"))
        .count()
}

/// A child process killed (by its own pid) when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Devices of the `-device-net` fleet tests.
pub const DEVICES: u32 = 30_000;

/// The address of device `i` of a `-device-net 127.1.0.0/16` fleet.
pub fn device_ip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 1, 0, 0)) + 1 + i)
}

/// An SNMPv2c GET of `oid` with request id `id`, encoded.
pub fn get_request(id: i32, oid: &str) -> Vec<u8> {
    Message {
        version: 1,
        community: b"public".to_vec(),
        pdu_type: pdu::GET,
        request_id: id,
        error_status: 0,
        error_index: 0,
        varbinds: vec![(Oid::parse(oid).unwrap(), Value::Null)],
    }
    .encode()
}

/// Sends one GET sysName.0 to `to` and returns the reply's source and sysName.
pub fn get_sysname(sock: &UdpSocket, to: SocketAddr, id: i32) -> Option<(SocketAddr, String)> {
    sock.send_to(&get_request(id, "1.3.6.1.2.1.1.5.0"), to)
        .unwrap();
    let mut buf = [0u8; 1500];
    loop {
        let (n, from) = sock.recv_from(&mut buf).ok()?;
        let m = Message::decode(&buf[..n]).expect("a response");
        if m.request_id != id {
            continue; // a late answer to an earlier, retried request
        }
        let Value::OctetString(name) = &m.varbinds[0].1 else {
            panic!("sysName is a string: {m:?}")
        };
        return Some((from, String::from_utf8_lossy(name).into_owned()));
    }
}

/// Tight GET load over every device address from `senders` threads of this process, each waiting for
/// each answer; returns (requests, unanswered, latencies).
pub fn load(port: u16, senders: u32, stop: Arc<AtomicBool>) -> (u64, u64, Vec<Duration>) {
    load_spread(device_ip(0), DEVICES, 1, port, senders, stop)
}

/// [`load`] over a fleet of `devices` whose device 0 is at `first`: request `k` of the run goes to
/// device `k × step mod devices` (a `step` prime to `devices` visits every device, spread over the range).
pub fn load_spread(
    first: Ipv4Addr,
    devices: u32,
    step: u64,
    port: u16,
    senders: u32,
    stop: Arc<AtomicBool>,
) -> (u64, u64, Vec<Duration>) {
    let handles: Vec<_> = (0..senders)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
                sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let (mut sent, mut lost, mut lat) = (0u64, 0u64, Vec::new());
                let mut k = u64::from(t);
                while !stop.load(Ordering::Relaxed) {
                    let i = (k * step % u64::from(devices)) as u32;
                    let to = SocketAddr::from((Ipv4Addr::from(u32::from(first) + i), port));
                    let t0 = Instant::now();
                    sent += 1;
                    match get_sysname(&sock, to, sent as i32) {
                        Some((from, name)) => {
                            assert_eq!(from, to, "the reply's source is the address asked");
                            assert_eq!(name, format!("nl6-dev-{i:04}"));
                            lat.push(t0.elapsed());
                        }
                        None => lost += 1,
                    }
                    k += u64::from(senders);
                }
                (sent, lost, lat)
            })
        })
        .collect();
    let mut total = (0, 0, Vec::new());
    for h in handles {
        let (s, l, lat) = h.join().unwrap();
        total.0 += s;
        total.1 += l;
        total.2.extend(lat);
    }
    total
}

/// The `subsystem` label values of the lab's own work (a sample under one of them, or with a frame in
/// `nl6::lab::`, is the lab's).
pub const LAB_LABELS: [&str; 8] = [
    "snmp",
    "trap",
    "syslog",
    "flow",
    "scenario",
    "scheduler",
    "gnmi",
    "gnmi-dialout",
];

/// Whose self time a CPU sample is, from its function names (leaf first): `None` when not the profiler's;
/// `Some(true)` for the heap sampler's per-allocation path (its countdown and allocator wrapper, which
/// every allocation takes: a call of its own in a debug build, inlined in a release one); `Some(false)`
/// for the rest of the profiling machinery. The leaf is taken past inlined thread-local accessors; every
/// thread's root passes through the engine's spawn wrapper, so only the leaf says whose work it is.
pub fn profiler_self(names: &[String]) -> Option<bool> {
    let leaf = names
        .iter()
        .find(|f| !f.starts_with("std::thread::local::"))
        .filter(|f| f.contains("nl6_profile::"))?;
    let alloc_path = leaf.contains("nl6_profile::heap::")
        && [
            "countdown",
            "GlobalAlloc>::alloc",
            "GlobalAlloc>::dealloc",
            "GlobalAlloc>::realloc",
        ]
        .iter()
        .any(|n| leaf.contains(n));
    Some(alloc_path)
}

/// user + system CPU ticks of `pid` (`/proc/<pid>/stat` fields 14 and 15).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// One CPU sample: its subsystem label (or ""), the function names of its stack (leaf first), its count.
pub type Sample = (String, Vec<String>, i64);

/// The CPU samples of a pprof profile.
pub fn samples_of(body: &[u8]) -> Vec<Sample> {
    let p: nl6_profile::proto::Profile = nl6_profile::proto::decode(body).expect("a pprof profile");
    let text = |i: i64| p.string_table[i as usize].clone();
    let key = p.string_table.iter().position(|s| s == "subsystem");
    let function = |id: u64| p.function.iter().find(|f| f.id == id).map(|f| text(f.name));
    p.sample
        .iter()
        .map(|s| {
            let label = s
                .label
                .iter()
                .find(|l| Some(l.key as usize) == key)
                .map_or(String::new(), |l| text(l.str));
            let names = s
                .location_id
                .iter()
                .filter_map(|id| p.location.iter().find(|l| l.id == *id))
                .flat_map(|l| l.line.iter().filter_map(|ln| function(ln.function_id)))
                .collect();
            (label, names, s.value[0])
        })
        .collect()
}
