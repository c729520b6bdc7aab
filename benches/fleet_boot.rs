//! How long a fleet of 1000 devices takes to boot and stop, and what it costs in RSS and threads
//! (from /proc/self/status), with every exporter on and pointed at a local sink.
use nl6::lab::syslog::Transport;
use nl6::lab::{Fleet, FleetConfig};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

fn status(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = sink.local_addr().unwrap();
    for devices in [4usize, 1000] {
        let (rss0, threads0) = (status("VmRSS:"), status("Threads:"));
        let cfg = FleetConfig::default()
            .with_devices(devices)
            .with_snmp_port(0)
            .with_trap_target(Some(target), Duration::from_secs(30))
            .with_syslog_target(Some((Transport::Udp, target)), Duration::from_secs(10))
            .with_flow_target(Some(target), Duration::from_secs(10));
        let t = Instant::now();
        let fleet = Fleet::start(cfg).unwrap();
        let boot = t.elapsed();
        std::thread::sleep(Duration::from_millis(500));
        let (rss1, threads1) = (status("VmRSS:"), status("Threads:"));
        let t = Instant::now();
        fleet.stop();
        let stop = t.elapsed();
        drop(fleet);
        println!(
            "fleet_boot: {devices:>5} devices: boot {:>7.1} ms, stop {:>7.1} ms, RSS +{:>6} KiB ({:.1} KiB/device), threads +{}",
            boot.as_secs_f64() * 1e3,
            stop.as_secs_f64() * 1e3,
            rss1.saturating_sub(rss0),
            rss1.saturating_sub(rss0) as f64 / devices as f64,
            threads1.saturating_sub(threads0)
        );
    }
}
