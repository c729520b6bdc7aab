//! A fleet fully alive: nl6 with N devices (default 1 000 000 on `-device-net 127.0.0.0/12`) sending
//! traps, syslog and NetFlow at the default intervals (30 s, 10 s, 10 s) to counting sinks on loopback,
//! while benches/snmp_load.rs (a separate process) GETs sysName.0 across every device's address. After a
//! warm-up (every device past its first phase) it measures a window (default 60 s) and prints, per kind,
//! packets/s sent (nl6's own counters, `GET /api/v1/fleet`) and received (the sinks), the kernel's drops
//! at each sink socket (`/proc/net/udp`), what is left unaccounted (sent − received − kernel drops),
//! nl6's counted drops and skipped periods, the scheduler's lateness p50/p99/p99.9 over the window, the
//! SNMP load's GET/s and percentiles, and CPU (nl6, its busiest threads, the sinks, the load).
//!
//! `NL6_ALIVE_TRAPD=1` sends the traps to Debian's `snmptrapd` instead of the trap sink and counts its
//! lines: a real peer, to check at a smaller N that it and the counting sink agree.
//!
//! Knobs (environment): `NL6_ALIVE_DEVICES` (1000000), `NL6_ALIVE_NET` (127.0.0.0/12), `NL6_ALIVE_SECS`
//! (60), `NL6_ALIVE_WARMUP` (16 s: past the first trap phase at 15 s), `NL6_SNMP_LOAD` (the snmp_load
//! executable; scripts/bench-alive.sh passes it; unset: no SNMP load, said in the output),
//! `NL6_ALIVE_LOAD` ("1 4": client threads and requests in flight each), `NL6_ALIVE_PROFILE` (a path:
//! a 5 s CPU profile is taken in the middle of the window and written there), `NL6_ALIVE_TRAPD`.
//! Run: `scripts/bench-alive.sh` (or `cargo bench --bench fleet_alive`). Not a test: it measures.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nl6::lab::lateness::Snapshot;

fn knob(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn number(name: &str, default: u64) -> u64 {
    let v = knob(name, &default.to_string());
    v.parse().unwrap_or_else(|_| {
        eprintln!("fleet_alive: {name}={v:?} is not a whole number");
        std::process::exit(2)
    })
}

/// A UDP sink on loopback that counts datagrams, with a receive buffer large enough for a burst.
struct Sink {
    addr: SocketAddr,
    packets: Arc<AtomicU64>,
}

/// Sets `SO_RCVBUFFORCE` (root) or else `SO_RCVBUF` to `bytes`.
fn big_rcvbuf(s: &UdpSocket, bytes: i32) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: a valid socket descriptor and a pointer to an int of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

impl Sink {
    fn start(name: &str) -> Sink {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind a sink");
        big_rcvbuf(&s, 256 << 20);
        s.set_read_timeout(Some(Duration::from_millis(200))).ok();
        let addr = s.local_addr().unwrap();
        let packets = Arc::new(AtomicU64::new(0));
        let p = packets.clone();
        std::thread::Builder::new()
            .name(format!("sink-{name}"))
            .spawn(move || {
                let mut buf = [0u8; 65_536];
                loop {
                    if s.recv(&mut buf).is_ok() {
                        p.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .expect("sink thread");
        Sink { addr, packets }
    }
    fn count(&self) -> u64 {
        self.packets.load(Ordering::Relaxed)
    }
}

/// Debian's snmptrapd on a loopback port, one line per trap (`-F`), its lines counted.
struct Trapd {
    _child: Reaped,
    addr: SocketAddr,
    lines: Arc<AtomicU64>,
}

impl Trapd {
    fn start() -> Trapd {
        let port = UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("nl6-alive-trapd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("snmptrapd.conf");
        std::fs::write(
            &conf,
            "disableAuthorization yes\nauthCommunity log public\n",
        )
        .unwrap();
        let mut child = Command::new("snmptrapd")
            .args(["-f", "-Lo", "-C", "-c", conf.to_str().unwrap(), "-On"])
            .args(["-F", "TRAP %a\n", &format!("udp:127.0.0.1:{port}")])
            .env("SNMP_PERSISTENT_DIR", &dir)
            .env("MIBS", "")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("snmptrapd (Debian package snmptrapd)");
        let (out, lines) = (child.stdout.take().unwrap(), Arc::new(AtomicU64::new(0)));
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("TRAP ") {
                    l.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        std::thread::sleep(Duration::from_secs(1));
        Trapd {
            _child: Reaped(child),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            lines,
        }
    }
}

/// The kernel's drop count of the UDP socket bound to 127.0.0.1:`port` (`/proc/net/udp`, last column).
fn kernel_drops(port: u16) -> u64 {
    let want = format!("0100007F:{port:04X}");
    let t = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    t.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let drops = f.last().and_then(|v| v.parse::<u64>().ok());
            drops.filter(|_| f.get(1) == Some(&want.as_str()))
        })
        .sum()
}

/// User + system CPU ticks (100 a second) of `/proc/<path>/stat`, and the thread's name.
fn ticks(path: &str) -> (String, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{path}/stat")).unwrap_or_default();
    let name = stat
        .find('(')
        .zip(stat.rfind(')'))
        .map_or(String::new(), |(a, b)| stat[a + 1..b].to_string());
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    (name, f.get(11).unwrap_or(&0) + f.get(12).unwrap_or(&0))
}

/// Every thread of `pid`: (tid, name, ticks).
fn threads(pid: u32) -> Vec<(String, String, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .map(|e| {
            let tid = e.file_name().to_string_lossy().to_string();
            let (name, t) = ticks(&format!("{pid}/task/{tid}"));
            (tid, name, t)
        })
        .collect()
}

/// One HTTP GET to nl6's API; the body.
fn get(api: SocketAddr, path: &str) -> Vec<u8> {
    http(api, "GET", path, "")
}

/// One HTTP request (a JSON body when not empty); the reply's body.
fn http(api: SocketAddr, method: &str, path: &str, body: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(api).expect("connect to nl6's API");
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let at = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    reply.split_off(at)
}

/// What is read at each end of the window.
struct Reading {
    at: Instant,
    fleet: serde_json::Value,
    received: [u64; 3],
    drops: [u64; 3],
    nl6: Vec<(String, String, u64)>,
    me: u64,
}

const KINDS: [&str; 3] = ["trap", "syslog", "flow"];
const SENT: [&str; 3] = ["traps_sent", "syslog_sent", "flow_packets_sent"];

fn main() {
    let devices = number("NL6_ALIVE_DEVICES", 1_000_000);
    let secs = number("NL6_ALIVE_SECS", 60);
    let warmup = number("NL6_ALIVE_WARMUP", 16);
    let net = knob("NL6_ALIVE_NET", "127.0.0.0/12");
    let trapd = knob("NL6_ALIVE_TRAPD", "") == "1";
    let sinks = KINDS.map(Sink::start);
    let trapd = trapd.then(Trapd::start);
    let trap_addr = trapd.as_ref().map_or(sinks[0].addr, |t| t.addr);
    let snmp_port = UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.local_addr())
        .unwrap()
        .port();
    let nl6_bin = knob("NL6_BIN", env!("CARGO_BIN_EXE_nl6"));
    let mut nl6 = Command::new(&nl6_bin)
        .args(["-listen", "127.0.0.1:0", "-devices", &devices.to_string()])
        .args(["-device-net", &net, "-snmp-port", &snmp_port.to_string()])
        .args(["-trap-target", &trap_addr.to_string()])
        .args(["-syslog-target", &format!("udp://{}", sinks[1].addr)])
        .args(["-flow-target", &sinks[2].addr.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nl6");
    let t0 = Instant::now();
    let (tx, rx) = mpsc::channel();
    let stderr = nl6.stderr.take().unwrap();
    // Killed however this program ends (a panic included): never a fleet left running.
    let nl6 = Reaped(nl6);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    let api: SocketAddr = loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(l) if l.starts_with("nl6 listening on ") => {
                let a = l["nl6 listening on ".len()..].split(';').next();
                break a.and_then(|a| a.parse().ok()).expect("the API's address");
            }
            Ok(l) => log.push(l),
            Err(_) => {
                panic!("nl6 did not boot within 120 s: {log:?}");
            }
        }
    };
    let boot = t0.elapsed();
    let pid = nl6.0.id();
    println!(
        "fleet_alive: {devices} devices on {net}, boot {:.2} s, warm-up {warmup} s, window {secs} s, traps to {}",
        boot.as_secs_f64(),
        if trapd.is_some() { "snmptrapd" } else { "the counting sink" }
    );
    std::thread::sleep(Duration::from_secs(warmup));
    let load = start_load(devices, &net, snmp_port, secs);
    let read = |sinks: &[Sink; 3]| {
        // The sinks read on both sides of the API's reading (which takes a while at a million
        // devices), so the packets sent during it count half on each side.
        let early = [0, 1, 2].map(|i| sinks[i].count());
        let body = get(api, "/api/v1/fleet");
        let fleet: serde_json::Value = serde_json::from_slice(&body)
            .ok()
            .filter(|v: &serde_json::Value| v.get("totals").is_some())
            .unwrap_or_else(|| panic!("GET /api/v1/fleet: {}", String::from_utf8_lossy(&body)));
        let mut received = [0, 1, 2].map(|i| (early[i] + sinks[i].count()) / 2);
        let mut drops = [0, 1, 2].map(|i| kernel_drops(sinks[i].addr.port()));
        if let Some(t) = &trapd {
            received[0] = t.lines.load(Ordering::Relaxed);
            drops[0] = kernel_drops(t.addr.port());
        }
        Reading {
            at: Instant::now(),
            fleet,
            received,
            drops,
            nl6: threads(pid),
            me: ticks("self").1,
        }
    };
    let start = read(&sinks);
    let profile = std::env::var("NL6_ALIVE_PROFILE").ok();
    if let Some(path) = &profile {
        let on = r#"{"enabled":true,"server_address":""}"#;
        http(api, "POST", "/api/v1/profiling", on);
        std::thread::sleep(Duration::from_secs(secs / 2));
        let p = get(api, "/debug/pprof/profile?seconds=5");
        std::fs::write(path, p).expect("write the profile");
    }
    let left = Duration::from_secs(secs).saturating_sub(start.at.elapsed());
    std::thread::sleep(left);
    let end = read(&sinks);
    let load = load.map(finish_load);
    report(&start, &end, load, devices);
    if let Some(path) = profile {
        println!("profile: {path} (go tool pprof -top {path})");
    }
    while let Ok(l) = rx.try_recv() {
        log.push(l);
    }
    for l in log.iter().filter(|l| l.contains("scheduler")) {
        println!("nl6 said: {l}");
    }
    drop(nl6);
    drop(trapd);
}

/// A child process killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The SNMP load process over every device's address, when `NL6_SNMP_LOAD` names it.
fn start_load(devices: u64, net: &str, port: u16, secs: u64) -> Option<(Child, u32)> {
    let Ok(exe) = std::env::var("NL6_SNMP_LOAD") else {
        println!("no SNMP load: NL6_SNMP_LOAD is unset (scripts/bench-alive.sh sets it)");
        return None;
    };
    let first: std::net::Ipv4Addr = net.split('/').next().and_then(|a| a.parse().ok()).unwrap();
    let first = std::net::Ipv4Addr::from(u32::from(first) + 1);
    let shape = knob("NL6_ALIVE_LOAD", "1 4");
    let mut shape = shape.split_whitespace();
    let (threads, inflight) = (shape.next().unwrap_or("1"), shape.next().unwrap_or("4"));
    let child = Command::new(exe)
        .arg(format!("{first}:{port}"))
        .args(["-addrs", &devices.to_string(), "-secs", &secs.to_string()])
        .args(["-threads", threads, "-inflight", inflight])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start snmp_load");
    let pid = child.id();
    Some((child, pid))
}

/// The load's summary line and its CPU ticks.
fn finish_load((child, pid): (Child, u32)) -> (String, u64) {
    let cpu = ticks(&pid.to_string()).1;
    let out = child.wait_with_output().expect("snmp_load");
    let cpu = cpu.max(ticks(&pid.to_string()).1);
    (String::from_utf8_lossy(&out.stdout).trim().to_string(), cpu)
}

fn total(r: &Reading, key: &str) -> u64 {
    r.fleet["totals"][key].as_u64().unwrap_or(0)
}

fn report(a: &Reading, b: &Reading, load: Option<(String, u64)>, devices: u64) {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    let rate = |n: u64| n as f64 / secs;
    println!(
        "{:<8} {:>11} {:>11} {:>12} {:>13}",
        "kind", "sent/s", "received/s", "kernel drops", "unaccounted"
    );
    let mut all = [0u64; 4];
    for i in 0..3 {
        let sent = total(b, SENT[i]) - total(a, SENT[i]);
        let got = b.received[i] - a.received[i];
        let drops = b.drops[i] - a.drops[i];
        let lost = sent as i64 - got as i64 - drops as i64;
        println!(
            "{:<8} {:>11.0} {:>11.0} {:>12} {:>13}",
            KINDS[i],
            rate(sent),
            rate(got),
            drops,
            lost
        );
        for (x, v) in all.iter_mut().zip([sent, got, drops, lost.unsigned_abs()]) {
            *x += v;
        }
    }
    println!(
        "{:<8} {:>11.0} {:>11.0} {:>12} {:>13}",
        "all",
        rate(all[0]),
        rate(all[1]),
        all[2],
        all[3]
    );
    let counted = |k: &str| total(b, k) - total(a, k);
    let sched = |r: &Reading| {
        Snapshot::from_json(&r.fleet["scheduler"])
            .unwrap_or_else(|| panic!("no scheduler figures in GET /api/v1/fleet: {}", r.fleet))
    };
    let w = sched(b).since(&sched(a));
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "nl6 counted drops: send errors {}, syslog queue {}; scheduler: {} turns ({:.0}/s), lateness p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max since start {:.0} ms, skipped periods {}",
        counted("send_errors"),
        counted("syslog_dropped"),
        w.turns(),
        rate(w.turns()),
        ms(w.quantile_us(0.5)),
        ms(w.quantile_us(0.99)),
        ms(w.quantile_us(0.999)),
        ms(w.max_us),
        w.skipped_periods
    );
    let cpu = |t: u64| t as f64 / secs; // ticks are 1/100 s: this is % of one core
    let nl6_total: u64 =
        b.nl6.iter().map(|t| t.2).sum::<u64>() - a.nl6.iter().map(|t| t.2).sum::<u64>();
    let mut per: Vec<(String, u64)> = b
        .nl6
        .iter()
        .map(|(tid, name, t)| {
            let before = a.nl6.iter().find(|x| &x.0 == tid).map_or(0, |x| x.2);
            (name.clone(), t - before)
        })
        .collect();
    per.sort_by_key(|x| std::cmp::Reverse(x.1));
    let top: Vec<String> = per
        .iter()
        .take(4)
        .map(|(n, t)| format!("{n} {:.0} %", cpu(*t)))
        .collect();
    println!(
        "CPU (% of one core): nl6 {:.0} % ({}), sinks {:.0} %{}",
        cpu(nl6_total),
        top.join(", "),
        cpu(b.me - a.me),
        load.as_ref().map_or(String::new(), |(_, t)| format!(
            ", snmp_load {:.0} %",
            cpu(*t)
        ))
    );
    match load {
        Some((line, _)) => println!("snmp load over {devices} addresses: {line}"),
        None => println!("snmp load: none"),
    }
}
