//! The fleet at scale: boot time, threads, RSS and idle CPU of a fleet of 1 000, 10 000 and
//! 30 000 devices, per port (`-snmp-port 0`, one socket per device) and at their own addresses
//! (`-device-net 127.1.0.0/16`, also with the gNMI target on: `device-net+gnmi`, `-gnmi-port 0`), printed
//! beside the figures measured before the serving threads.
//!
//! Each configuration runs in a fresh child process (this program re-executed), so one fleet's memory
//! does not inflate the next one's RSS. Then the same for the real binary (`nl6 -listen 127.0.0.1:0`:
//! HTTP server, profiler and all): boot is the time to its `nl6 listening on` line. `NL6_IDLE_SECS` sets
//! the idle window (default 10 s).
//! Run: `cargo bench --bench fleet_scale`.
use nl6::lab::config::DeviceNet;
use nl6::lab::gnmi::config::GnmiConfig;
use nl6::lab::{Fleet, FleetConfig};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHILD: &str = "NL6_FLEET_SCALE_CHILD";

/// The one-thread-and-socket-per-device design's figures (static binary, this 2-core machine), printed
/// beside this build's rows for comparison.
const BEFORE: &[&str] = &[
    "before (one thread and one socket per device, per port):",
    "  10000 devices: boot 0.67 s, 10018 threads, RSS 161 MB, 40492 memory maps, idle CPU 11% of a core",
    "  16000 devices: boots, 16018 threads, 64766 memory maps",
    "  19000 devices: `starting fleet threads: Resource temporarily unavailable`",
    "  30000 devices: `cannot bind UDP …: No file descriptors available` at device 19995",
];

/// `field` of `/proc/<pid>/status` (kB for memory fields); `pid` may be `self`.
fn status_of(pid: impl std::fmt::Display, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of process `pid` (or `self`), in clock ticks (100 a second).
fn cpu_ticks_of(pid: impl std::fmt::Display) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// The release binary with `fleet_args`: boot to its `nl6 listening on` line (bounded at 30 s), then
/// threads, RSS and CPU over `idle`; the child is killed after.
fn measure_binary(label: &str, fleet_args: &[&str], idle: Duration) -> String {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nl6"))
        .args(["-listen", "127.0.0.1:0"])
        .args(fleet_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nl6");
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    // Reads stderr to its end, so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let booted = loop {
        match rx.recv_timeout(Duration::from_secs(30).saturating_sub(t.elapsed())) {
            Ok(l) if l.starts_with("nl6 listening on") => break Some(t.elapsed()),
            Ok(l) => lines.push(l),
            Err(_) => break None,
        }
    };
    let pid = child.id();
    let row = match booted {
        None => format!("  {label}: did not boot: {}", lines.join(" / ")),
        Some(boot) => {
            let ticks = cpu_ticks_of(pid);
            std::thread::sleep(idle);
            let cpu = (cpu_ticks_of(pid) - ticks) as f64 / 100.0 / idle.as_secs_f64();
            format!(
                "  {label}: boot {:>5.2} s to the listening line, {:>3} threads, RSS {:>4} MB, idle CPU {:.1}% of a core",
                boot.as_secs_f64(),
                status_of(pid, "Threads:"),
                status_of(pid, "VmRSS:") / 1024,
                cpu * 100.0
            )
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    row
}

fn memory_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

/// One measurement, in this (child) process.
fn measure(mode: &str, devices: usize, idle: Duration) {
    nl6::http::sys::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    let mut config = FleetConfig::default()
        .with_devices(devices)
        .with_snmp_port(0);
    if mode.starts_with("device-net") {
        config = config.with_device_net(Some(DeviceNet::parse("127.1.0.0/16").unwrap()));
    }
    if mode.ends_with("+gnmi") {
        config = config.with_gnmi(GnmiConfig::default().with_port(Some(0)));
    }
    let t = Instant::now();
    let fleet = match Fleet::start(config) {
        Ok(f) => f,
        Err(e) => {
            println!("  {devices:>5} devices, {mode:<15}: refused: nl6: {e}");
            return;
        }
    };
    let boot = t.elapsed();
    let (threads, rss, maps) = (
        status_of("self", "Threads:"),
        status_of("self", "VmRSS:"),
        memory_maps(),
    );
    let ticks = cpu_ticks_of("self");
    std::thread::sleep(idle);
    let cpu = (cpu_ticks_of("self") - ticks) as f64 / 100.0 / idle.as_secs_f64();
    println!(
        "  {devices:>5} devices, {mode:<15}: boot {:>6.2} s, {threads:>3} threads, RSS {:>4} MB, {maps:>5} memory maps, idle CPU {:.1}% of a core",
        boot.as_secs_f64(),
        rss / 1024,
        cpu * 100.0
    );
    fleet.stop();
}

fn main() {
    let idle = Duration::from_secs(
        std::env::var("NL6_IDLE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    if let Ok(which) = std::env::var(CHILD) {
        let (mode, devices) = which.split_once(':').expect("mode:devices");
        measure(mode, devices.parse().expect("devices"), idle);
        return;
    }
    for line in BEFORE {
        println!("fleet_scale: {line}");
    }
    println!("fleet_scale: after (a few SNMP serving threads; idle over {idle:?}):");
    let me = std::env::current_exe().expect("this bench's path");
    for (mode, devices) in [
        ("per-port", 1_000),
        ("device-net", 1_000),
        ("per-port", 10_000),
        ("device-net", 10_000),
        ("per-port", 30_000),
        ("device-net", 30_000),
        ("device-net+gnmi", 30_000),
    ] {
        let out = Command::new(&me)
            .env(CHILD, format!("{mode}:{devices}"))
            .output()
            .expect("run the measuring child");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            println!("fleet_scale: {line}");
        }
        if !out.status.success() {
            println!(
                "fleet_scale: {mode} {devices}: child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    println!("fleet_scale: the binary (nl6 -listen 127.0.0.1:0 …; idle over {idle:?}):");
    for (label, args) in [
        (
            " 1000 devices, per-port  ",
            &["-devices", "1000", "-snmp-port", "0"][..],
        ),
        (
            "10000 devices, per-port  ",
            &["-devices", "10000", "-snmp-port", "0"][..],
        ),
        (
            "30000 devices, device-net",
            &[
                "-devices",
                "30000",
                "-device-net",
                "127.1.0.0/16",
                "-snmp-port",
                "0",
            ][..],
        ),
        (
            "30000 devices, device-net, gNMI",
            &[
                "-devices",
                "30000",
                "-device-net",
                "127.1.0.0/16",
                "-snmp-port",
                "0",
                "-gnmi-port",
                "0",
            ][..],
        ),
    ] {
        println!("fleet_scale: {}", measure_binary(label, args, idle));
    }
}
