//! The fleet at the seed's scale: 30 000 devices, each at its own loopback address
//! (`-device-net 127.1.0.0/16`), with SNMP and the gNMI target on, served by a handful of threads. One
//! boot checks the budget (boot time, threads, RSS, idle CPU), net-snmp's answers and a gNMI Get at the
//! first, a middle and the last address, a complete walk, the source address of every reply, and a GET
//! load over every address from this process while a CPU profile is taken. Per-port mode keeps the same thread bound at 10 000 devices; the refusals are
//! one line each.
use crate::common;
use crate::fleet_common;
use crate::gnmi_support;

use common::{boot, json, status_field, threads_of, Nl6};
use fleet_common::{
    cpu_ticks, device_ip, get_sysname, load, profiler_self, samples_of, snmp_tool, walk_rows,
    Sample, DEVICES, WALK_ROWS,
};
use gnmi_support::stream as gnmi_stream;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const THREAD_BOUND: usize = 64;
/// Boot budget of the issue: 30 000 devices listening within 3 s.
const BOOT_LIMIT: Duration = Duration::from_secs(3);

fn snmp_port(n: &Nl6) -> u16 {
    let (status, _, body) = n.http("GET", "/api/v1/devices?limit=1", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v = json(&body);
    assert_eq!(v["total"], DEVICES, "{v}");
    assert_eq!(v["data"][0]["snmp"]["address"], "127.1.0.1", "{v}");
    v["data"][0]["snmp"]["port"].as_u64().expect("port") as u16
}

fn snmp(tool: &str, target: &str, oid: &str) -> String {
    snmp_tool(tool, target, &[oid])
}

/// CPU samples of a `profile?seconds=N` scrape.
fn profile_samples(n: &Nl6, seconds: u32) -> Vec<Sample> {
    let (status, _, body) = n.http_with(
        "GET",
        &format!("/debug/pprof/profile?seconds={seconds}"),
        &[],
        b"",
        Duration::from_secs(u64::from(seconds) + 30),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    samples_of(&body)
}

#[test]
fn thirty_thousand_devices_at_their_own_addresses_on_a_handful_of_threads() {
    let t0 = Instant::now();
    let n = boot()
        .args(&[
            "-devices",
            "30000",
            "-device-net",
            "127.1.0.0/16",
            "-gnmi-port",
            "0",
        ])
        .start();
    let boot_time = t0.elapsed();
    let pid = n.pid();
    let port = snmp_port(&n);
    let (threads, rss_kib) = (threads_of(pid), status_field(pid, "VmRSS:"));
    let ticks0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(10));
    let idle = (cpu_ticks(pid) - ticks0) as f64 / 100.0 / 10.0;
    eprintln!(
        "fleet_scale: 30000 devices with gNMI: boot {boot_time:?}, {threads} threads, RSS {} MiB, idle CPU {:.1}% of a core",
        rss_kib / 1024,
        idle * 100.0
    );
    assert!(boot_time <= BOOT_LIMIT, "boot took {boot_time:?}");
    assert!(threads <= THREAD_BOUND, "{threads} threads");
    assert!(rss_kib <= 300 * 1024, "RSS {rss_kib} KiB");
    assert!(idle <= 0.05, "idle CPU {:.1}% of a core", idle * 100.0);

    for i in [0, DEVICES / 2, DEVICES - 1] {
        let target = format!("{}:{port}", device_ip(i));
        let out = snmp("snmpget", &target, ".1.3.6.1.2.1.1.5.0");
        assert!(
            out.contains(&format!("STRING: \"nl6-dev-{i:04}\"")),
            "{target}: {out}"
        );
    }
    assert_eq!(device_ip(DEVICES - 1), Ipv4Addr::new(127, 1, 117, 48));
    gnmi_names_its_devices(&n);
    let walk = snmp("snmpwalk", &format!("{}:{port}", device_ip(7)), ".1");
    assert_eq!(
        walk_rows(&walk),
        WALK_ROWS,
        "a complete walk of one device (system, ifTable, ifXTable): {walk}"
    );
    assert!(walk.contains("STRING: \"nl6-dev-0007\""), "{walk}");

    // The source of a reply is the address that was asked, not the socket's wildcard or 127.0.0.1.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for (k, i) in [3u32, 12_345, 29_998].into_iter().enumerate() {
        let to = SocketAddr::from((device_ip(i), port));
        let (from, name) = get_sysname(&sock, to, k as i32 + 1).expect("an answer");
        assert_eq!(from, to, "reply to {to} came from {from}");
        assert_eq!(name, format!("nl6-dev-{i:04}"));
    }

    n.open_pull_only();
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || load(port, 2, stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    let samples = profile_samples(&n, 5);
    stop.store(true, Ordering::Relaxed);
    let (sent, lost, mut lat) = loader.join().unwrap();
    assert!(sent > 1000, "the load ran: {sent} requests");
    lat.sort();
    let p99 = lat[lat.len() * 99 / 100];
    eprintln!("fleet_scale: GET load: {sent} requests, {lost} unanswered, p99 {p99:?}");
    assert_eq!(lost, 0, "every request answered");

    let lab = fleet_common::LAB_LABELS;
    let is_lab = |label: &str, names: &[String]| {
        lab.contains(&label) || names.iter().any(|f| f.contains("nl6::lab::"))
    };
    let sum =
        |f: &dyn Fn(&Sample) -> bool| -> i64 { samples.iter().filter(|s| f(s)).map(|s| s.2).sum() };
    let total = sum(&|_| true);
    let in_lab = sum(&|s| is_lab(&s.0, &s.1));
    let snmp_labelled = sum(&|s| is_lab(&s.0, &s.1) && s.0 == "snmp");
    // The profiler's own work is its self time (fleet_common::profiler_self); the heap sampler's
    // per-allocation path is counted apart: its cost is the heap bench's (≤ 3 %).
    let leaf = |s: &Sample| -> Option<String> {
        profiler_self(&s.1).map(|_| {
            s.1.iter()
                .find(|f| f.contains("nl6_profile::"))
                .cloned()
                .unwrap_or_default()
        })
    };
    let machinery = sum(&|s| profiler_self(&s.1) == Some(false));
    let allocation = sum(&|s| profiler_self(&s.1) == Some(true));
    eprintln!(
        "fleet_scale: profile: {total} samples, {in_lab} in lab code, {snmp_labelled} of them `snmp`, \
         {machinery} in profiling machinery, {allocation} in the heap sampler's per-allocation path"
    );
    assert!(in_lab > 50, "the load was sampled: {in_lab} lab samples");
    assert!(
        snmp_labelled * 100 >= in_lab * 95,
        "`snmp` on {snmp_labelled} of {in_lab} lab samples"
    );
    let machinery_leaves: Vec<String> = samples.iter().filter_map(leaf).collect();
    assert!(
        machinery * 100 <= total * 2,
        "profiling machinery on {machinery} of {total} samples: {machinery_leaves:?}"
    );
    assert!(
        allocation * 100 <= total * 3,
        "the heap sampler's allocation path on {allocation} of {total} samples: {machinery_leaves:?}"
    );
}

/// The one gNMI listener answers at the first, a middle and the last device address, each as its device.
fn gnmi_names_its_devices(n: &Nl6) {
    let (status, _, body) = n.http("GET", "/api/v1/devices?limit=1", b"");
    assert_eq!(status, 200);
    let port = json(&body)["data"][0]["gnmi"]["port"]
        .as_u64()
        .unwrap_or_else(|| panic!("no gnmi port: {}", String::from_utf8_lossy(&body)))
        as u16;
    let rt = gnmi_stream::runtime();
    for i in [0, DEVICES / 2, DEVICES - 1] {
        let at = SocketAddr::from((device_ip(i), port));
        let name = rt.block_on(async {
            let mut c = gnmi_stream::client(at).await;
            tokio::time::timeout(Duration::from_secs(10), gnmi_stream::get_hostname(&mut c)).await
        });
        let name = name
            .unwrap_or_else(|_| panic!("{at}: no Get answer in 10 s"))
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(name, format!("nl6-dev-{i:04}"), "gNMI at {at}");
    }
}

#[test]
fn per_port_mode_keeps_the_thread_bound_at_ten_thousand_devices() {
    let n = boot().args(&["-devices", "10000"]).start();
    let threads = threads_of(n.pid());
    assert!(threads <= THREAD_BOUND, "{threads} threads");
    let (_, _, body) = n.http("GET", "/api/v1/devices?offset=9999&limit=1", b"");
    let v = json(&body);
    assert_eq!(v["total"], 10_000, "{v}");
    let last = &v["data"][0];
    assert_eq!(last["name"], "nl6-dev-9999", "{v}");
    let target = format!("127.0.0.1:{}", last["snmp"]["port"]);
    let out = snmp("snmpget", &target, ".1.3.6.1.2.1.1.5.0");
    assert!(out.contains("STRING: \"nl6-dev-9999\""), "{out}");
}

#[test]
fn device_net_refusals_are_one_line_and_start_nothing() {
    let refusal = |args: &[&str], code: i32, needles: &[&str]| {
        let out = boot().args(args).run();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("nl6: "), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        }
    };
    // A /24 holds 254 devices (every address but the first and the last): 300 do not fit.
    refusal(
        &["-devices", "300", "-device-net", "127.2.0.0/24"],
        2,
        &["-device-net", "127.2.0.0/24", "300"],
    );
    refusal(
        &["-devices", "1", "-device-net", "127.2.0.0/33"],
        2,
        &["-device-net"],
    );
    // Devices at 127.x cannot send to an address off loopback, nor anyone to an IPv6 target.
    refusal(
        &[
            "-devices",
            "2",
            "-device-net",
            "127.2.0.0/24",
            "-trap-target",
            "192.0.2.9:162",
        ],
        2,
        &[
            "-trap-target 192.0.2.9:162",
            "127.0.0.0/8",
            "-device-net range of this host's own",
        ],
    );
    refusal(
        &[
            "-devices",
            "2",
            "-device-net",
            "127.2.0.0/24",
            "-flow-target",
            "[::1]:2055",
        ],
        2,
        &["-flow-target [::1]:2055", "IPv6"],
    );
    // TEST-NET-1 is never local: the addresses are not this host's.
    refusal(
        &["-devices", "2", "-device-net", "192.0.2.0/24"],
        2,
        &["192.0.2.1", "ip route add local 192.0.2.0/24 dev lo"],
    );
    // A port another process holds, even one that shares ports (SO_REUSEPORT), is not joined.
    let taken = nl6::netsys::bind_shared_port("0.0.0.0:0".parse().unwrap()).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    refusal(
        &[
            "-devices",
            "3",
            "-device-net",
            "127.2.0.0/24",
            "-snmp-port",
            &port,
        ],
        1,
        &[
            &format!("0.0.0.0:{port}"),
            "nl6-dev-0000 … nl6-dev-0002",
            "-snmp-port 0",
        ],
    );
    // Out of descriptors per port: the limit, the need, and -device-net as the way around it.
    let out = boot()
        .nofile(64)
        .args(&["-devices", "200", "-snmp-port", "0"])
        .run();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ulimit -n 264") && err.contains("-device-net"),
        "{err}"
    );
    assert!(
        !err.contains("-snmp-port 0"),
        "the port is not the problem: {err}"
    );
    // With -device-net the same limit is plenty: 4 sockets serve 200 devices.
    let n = boot()
        .nofile(64)
        .args(&["-devices", "200", "-device-net", "127.2.0.0/24"])
        .start();
    assert!(threads_of(n.pid()) <= THREAD_BOUND);
}

/// Under `-device-net` a device's traps, syslog messages and flow records leave from its own address.
#[test]
fn notifications_syslog_and_flows_come_from_the_device_address() {
    use nl6::lab::config::DeviceNet;
    use nl6::lab::syslog::Transport;
    use nl6::lab::{Fleet, FleetConfig};
    let rx = |_| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s
    };
    let (traps, syslog, flows) = (rx(0), rx(1), rx(2));
    let at = |s: &UdpSocket| s.local_addr().unwrap();
    let hour = Duration::from_secs(3600);
    let cfg = FleetConfig::default()
        .with_devices(3)
        .with_snmp_port(0)
        .with_device_net(Some(DeviceNet::parse("127.3.0.0/24").unwrap()))
        .with_trap_target(Some(at(&traps)), hour)
        .with_syslog_target(Some((Transport::Udp, at(&syslog))), hour)
        .with_flow_target(Some(at(&flows)), Duration::from_millis(100));
    let fleet = Fleet::start(cfg).unwrap();
    let ip = |i: u8| std::net::IpAddr::V4(Ipv4Addr::new(127, 3, 0, i + 1));
    assert_eq!(fleet.devices()[2].snmp_addr().unwrap().ip(), ip(2));
    let mut buf = [0u8; 2048];
    assert!(fleet.set_link(2, 1, false));
    let (_, from) = traps.recv_from(&mut buf).expect("a linkDown trap");
    assert_eq!(from.ip(), ip(2), "the trap comes from device 2's address");
    // The link change's syslog message (device 2), then one of device 1's.
    let (n, from) = syslog
        .recv_from(&mut buf)
        .expect("the link change's syslog message");
    let mut from_syslog = vec![(from.ip(), String::from_utf8_lossy(&buf[..n]).into_owned())];
    assert!(fleet.emit_syslog(1, "hello from device 1"));
    let (n, from) = syslog.recv_from(&mut buf).expect("a syslog message");
    from_syslog.push((from.ip(), String::from_utf8_lossy(&buf[..n]).into_owned()));
    for (from, text) in &from_syslog {
        let device = (0..3u8)
            .find(|&i| text.contains(&format!("nl6-dev-000{i}")))
            .expect(text);
        assert_eq!(*from, ip(device), "{text}");
    }
    let mut flow_sources = std::collections::BTreeSet::new();
    let end = Instant::now() + Duration::from_secs(5);
    while flow_sources.len() < 3 && Instant::now() < end {
        if let Ok((_, from)) = flows.recv_from(&mut buf) {
            assert!((0..3).any(|i| from.ip() == ip(i)), "flow from {from}");
            flow_sources.insert(from.ip());
        }
    }
    assert_eq!(
        flow_sources.len(),
        3,
        "every device exports from its own address"
    );
    fleet.stop();
}
