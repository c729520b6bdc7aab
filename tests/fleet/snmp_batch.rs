//! SNMP answers under batching (`recvmmsg` / `sendmmsg` under epoll, or io_uring per port): bursts of
//! GETs sent before any answer is read, so the serving threads find many requests waiting and answer
//! them together. Under `-device-net` each answer must still leave from the address that was asked
//! (checked by the client's socket, the peer's own view), and per port each from its device's port
//! (through io_uring and through epoll), with its device's sysName and its request's id. Requests the
//! kernel dropped are counted against `/proc/net/udp`; a `-device-net` socket's deep buffer queues a
//! burst instead of dropping it; and a ring costs the memory its datagrams touched.
use crate::common;
use crate::fleet_common;

use common::{boot, json, status_field, Nl6};
use fleet_common::get_request;
use nl6::lab::snmp::ber::Value;
use nl6::lab::snmp::Message;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Requests sent in one burst before any answer is read: enough that each serving socket finds many
/// waiting, few enough that no socket buffer (the agent's or this client's) overflows.
const WAVE: usize = 64;

/// Sends the requests of `asks` (request id, where to) from one socket in bursts of [`WAVE`], each
/// sent in full before any of its answers is read, then reads the burst's answers (10 s at most);
/// each answer as (source, sysName) by request id.
fn burst(asks: &[(i32, SocketAddr)]) -> HashMap<i32, (SocketAddr, String)> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = HashMap::new();
    let mut buf = [0u8; 1500];
    for wave in asks.chunks(WAVE) {
        for (id, to) in wave {
            sock.send_to(&get_request(*id, "1.3.6.1.2.1.1.5.0"), to)
                .unwrap();
        }
        let (want, start) = (got.len() + wave.len(), Instant::now());
        while got.len() < want && start.elapsed() < Duration::from_secs(10) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let m = Message::decode(&buf[..n]).expect("a response");
            let Value::OctetString(name) = &m.varbinds[0].1 else {
                panic!("sysName is a string: {m:?}")
            };
            got.insert(
                m.request_id,
                (from, String::from_utf8_lossy(name).into_owned()),
            );
        }
    }
    got
}

/// The devices' SNMP addresses, in index order, from the API.
fn addresses(n: &Nl6, count: usize) -> Vec<SocketAddr> {
    let (status, _, body) = n.http("GET", &format!("/api/v1/devices?limit={count}"), b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v = json(&body);
    (0..count)
        .map(|i| {
            let snmp = &v["data"][i]["snmp"];
            let ip: Ipv4Addr = snmp["address"].as_str().expect("address").parse().unwrap();
            SocketAddr::from((ip, snmp["port"].as_u64().expect("port") as u16))
        })
        .collect()
}

/// Checks that every request of `asks` was answered from the address asked, by device `device(id)`.
fn check(
    asks: &[(i32, SocketAddr)],
    got: &HashMap<i32, (SocketAddr, String)>,
    device: impl Fn(i32) -> usize,
) {
    assert_eq!(
        got.len(),
        asks.len(),
        "answered {} of {} requests",
        got.len(),
        asks.len()
    );
    for (id, to) in asks {
        let (from, name) = got.get(id).expect("answered");
        assert_eq!(from, to, "request {id} to {to} was answered from {from}");
        assert_eq!(
            *name,
            format!("nl6-dev-{:04}", device(*id)),
            "request {id} to {to}"
        );
    }
}

#[test]
fn under_device_net_every_answer_of_a_burst_leaves_from_the_address_asked() {
    const DEVICES: usize = 2000;
    let n = boot()
        .args(&["-devices", "2000", "-device-net", "127.6.0.0/16"])
        .start();
    let port = addresses(&n, 1)[0].port();
    // 512 requests to 512 addresses from one socket, in bursts: each serving socket finds many waiting,
    // for many different addresses, and answers them in one send.
    let asks: Vec<(i32, SocketAddr)> = (0..512)
        .map(|k| {
            let i = (k * 7 + 3) % DEVICES;
            let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 6, 0, 1)) + i as u32);
            (1000 + k as i32, SocketAddr::from((ip, port)))
        })
        .collect();
    let got = burst(&asks);
    check(&asks, &got, |id| ((id as usize - 1000) * 7 + 3) % DEVICES);
}

/// Starts `devices` per-port devices served the `io` way (`-snmp-io`), and checks that the fleet
/// says it serves that way ("io_uring" or "epoll" at `GET /api/v1/fleet`).
fn per_port(devices: &str, io: &str, says: &str) -> Nl6 {
    let n = boot().args(&["-devices", devices, "-snmp-io", io]).start();
    let (status, _, body) = n.http("GET", "/api/v1/fleet", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(json(&body)["snmp_io"], says, "-snmp-io {io}");
    n
}

#[test]
fn per_port_answers_of_a_burst_come_from_each_devices_port_through_io_uring() {
    per_port_burst(per_port("40", "uring", "io_uring"));
}

#[test]
fn per_port_answers_of_a_burst_come_from_each_devices_port_through_epoll() {
    per_port_burst(per_port("40", "epoll", "epoll"));
}

fn per_port_burst(n: Nl6) {
    const DEVICES: usize = 40;
    let at = addresses(&n, DEVICES);
    // Eight requests to each device's port at once: several wait on each socket.
    let asks: Vec<(i32, SocketAddr)> = (0..DEVICES * 8)
        .map(|k| (5000 + k as i32, at[k % DEVICES]))
        .collect();
    let got = burst(&asks);
    check(&asks, &got, |id| (id as usize - 5000) % DEVICES);
}

/// The kernel's drop count of the UDP socket bound to `port` on 127.0.0.1 (`/proc/net/udp`, its last
/// column): the independent count of what a full receive buffer lost.
fn kernel_drops(port: u16) -> u64 {
    let local = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let line = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
        .unwrap_or_else(|| panic!("no socket on {local} in /proc/net/udp:\n{table}"));
    line.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn requests_the_kernel_dropped_at_a_full_buffer_are_counted_not_lost_silently_through_io_uring() {
    kernel_drops_are_counted(per_port("1", "uring", "io_uring"));
}

#[test]
fn requests_the_kernel_dropped_at_a_full_buffer_are_counted_not_lost_silently_through_epoll() {
    kernel_drops_are_counted(per_port("1", "epoll", "epoll"));
}

/// Requests sent to `to` while the agent is stopped (it reads nothing), before any answer: `SENT` of
/// them, then the agent resumes and answers what its socket held. `while_stopped` runs before it
/// resumes. The answers counted (and those the kernel dropped at this client's own buffer, a busy
/// machine's loss), after one more request, which carries the socket's drop count to nl6.
const SENT: i32 = 3000;
fn flood_while_stopped(n: &Nl6, to: SocketAddr, while_stopped: impl FnOnce()) -> (u64, u64) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(n.pid() as i32, libc::SIGSTOP) }, 0);
    for id in 0..SENT {
        sock.send_to(&get_request(id, "1.3.6.1.2.1.1.5.0"), to)
            .unwrap();
    }
    while_stopped();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(n.pid() as i32, libc::SIGCONT) }, 0);
    let (mut answered, mut buf, start) = (0, [0u8; 1500], Instant::now());
    while answered < SENT as u64 && start.elapsed() < Duration::from_secs(20) {
        match sock.recv_from(&mut buf) {
            Ok(_) => answered += 1,
            Err(_) if answered > 0 => break, // 500 ms of quiet after the answers
            Err(_) => {}
        }
    }
    let client_dropped = kernel_drops(sock.local_addr().unwrap().port());
    // The kernel tells a socket's drops with the next datagram it queues after them: one more request.
    sock.send_to(&get_request(SENT, "1.3.6.1.2.1.1.5.0"), to)
        .unwrap();
    sock.recv_from(&mut buf)
        .expect("the request after the flood is answered");
    (answered, client_dropped)
}

/// nl6's count of the requests the kernel dropped at its SNMP sockets.
fn fleet_kernel_drops(n: &Nl6) -> u64 {
    let (status, _, body) = n.http("GET", "/api/v1/fleet", b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    json(&body)["snmp_kernel_drops"]
        .as_u64()
        .expect("snmp_kernel_drops")
}

fn kernel_drops_are_counted(n: Nl6) {
    let to = addresses(&n, 1)[0];
    // Stopped, the agent reads nothing: more requests than its receive buffer holds overflow it.
    let mut dropped = 0;
    let (answered, client_dropped) =
        flood_while_stopped(&n, to, || dropped = kernel_drops(to.port()));
    assert!(
        dropped > 0,
        "{SENT} requests to a stopped agent overflowed nothing"
    );
    assert_eq!(
        answered + dropped + client_dropped,
        SENT as u64,
        "every request is answered or dropped by the kernel ({client_dropped} answers at the client)"
    );
    assert_eq!(
        fleet_kernel_drops(&n),
        dropped,
        "nl6's count of kernel drops against /proc/net/udp's"
    );
}

#[test]
fn a_ring_costs_the_memory_its_datagrams_touched_not_its_whole_buffer_pool() {
    // Each ring's pool is 256 buffers of 64 KiB (16 MiB of address space); only what datagrams touch
    // may cost. Four devices, so every serving thread has a ring; after a few requests each.
    let rss = |io: &str, says: &str| {
        let n = per_port("4", io, says);
        let at = addresses(&n, 4);
        let asks: Vec<(i32, SocketAddr)> = (0..64).map(|k| (100 + k, at[k as usize % 4])).collect();
        assert_eq!(burst(&asks).len(), asks.len());
        status_field(n.pid(), "VmRSS:")
    };
    let (ring, epoll) = (rss("uring", "io_uring"), rss("epoll", "epoll"));
    assert!(
        ring < epoll + 4 * 1024,
        "VmRSS {ring} kB with io_uring against {epoll} kB with epoll"
    );
}

#[test]
fn under_device_net_a_burst_while_the_agent_is_off_the_cpu_is_queued_not_dropped() {
    // A -device-net socket carries the requests of many devices: its receive buffer is made deep
    // (4 MiB asked; granted past net.core.rmem_max to root), so 3 000 GETs sent while the agent is
    // stopped all wait to be answered. With the default 208 KiB about 270 fit and the rest are dropped.
    let n = boot()
        .args(&["-devices", "100", "-device-net", "127.7.0.0/16"])
        .start();
    let to = addresses(&n, 1)[0];
    let (answered, client_dropped) = flood_while_stopped(&n, to, || {});
    let dropped = fleet_kernel_drops(&n);
    assert_eq!(answered + dropped + client_dropped, SENT as u64);
    // SAFETY: geteuid(2) reads the process's own user id.
    let root = unsafe { libc::geteuid() } == 0;
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if root || rmem_max >= 4 << 20 {
        assert_eq!(
            dropped, 0,
            "{answered} answered, {dropped} dropped by the kernel"
        );
    } else {
        eprintln!("not root and rmem_max {rmem_max}: the buffer is capped, drops are only counted");
    }
}
