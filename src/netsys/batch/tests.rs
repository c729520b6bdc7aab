use super::*;
use crate::netsys::bind_shared_port;
use std::time::{Duration, Instant, SystemTime};

/// A socket that reports each datagram's destination, blocking with a short timeout.
fn server() -> (UdpSocket, u16) {
    let s = bind_shared_port(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

/// Receives on `s` until `want` datagrams came (5 s at most), each as (bytes, peer, destination).
fn collect(
    s: &UdpSocket,
    batch: &mut RecvBatch,
    want: usize,
) -> Vec<(Vec<u8>, SocketAddr, Option<IpAddr>)> {
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < want && start.elapsed() < Duration::from_secs(5) {
        if batch.recv(s).is_ok() {
            got.extend(
                batch
                    .iter()
                    .map(|r| (r.bytes.to_vec(), r.peer, r.destination)),
            );
        }
    }
    got
}

fn asked(i: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([127, 3, 2, i], port))
}

#[test]
fn a_batch_receive_names_each_datagrams_sender_and_destination() {
    let (s, port) = server();
    let clients: Vec<UdpSocket> = (0..8)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    for (i, c) in clients.iter().enumerate() {
        c.send_to(format!("to {}", i + 1).as_bytes(), asked(i as u8 + 1, port))
            .unwrap();
    }
    let mut batch = RecvBatch::new(16, 2048);
    let got = collect(&s, &mut batch, 8);
    assert_eq!(got.len(), 8, "{got:?}");
    for (i, c) in clients.iter().enumerate() {
        let me = c.local_addr().unwrap();
        let (bytes, _, dst) = got
            .iter()
            .find(|g| g.1 == me)
            .expect("a datagram from each client");
        assert_eq!(bytes, format!("to {}", i + 1).as_bytes());
        assert_eq!(*dst, Some(asked(i as u8 + 1, port).ip()));
    }
}

#[test]
fn a_batch_send_leaves_each_datagram_from_its_own_source() {
    let (s, port) = server();
    let clients: Vec<UdpSocket> = (0..8)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let replies: Vec<Vec<u8>> = (0..8)
        .map(|i| format!("from {}", i + 1).into_bytes())
        .collect();
    let out: Vec<Outgoing<'_>> = clients
        .iter()
        .zip(&replies)
        .enumerate()
        .map(|(i, (c, bytes))| Outgoing {
            bytes,
            to: c.local_addr().unwrap(),
            from: Some(asked(i as u8 + 1, port).ip()),
        })
        .collect();
    assert_eq!(send_batch(&s, &out).unwrap(), 8);
    let mut buf = [0u8; 64];
    for (i, c) in clients.iter().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (n, source) = c.recv_from(&mut buf).unwrap();
        // The client's own view: the reply comes from the address it would have asked.
        assert_eq!(
            (&buf[..n], source),
            (replies[i].as_slice(), asked(i as u8 + 1, port))
        );
    }
}

#[test]
fn a_long_slice_goes_out_in_several_calls_and_all_arrives() {
    let (s, _) = server();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let to = rx.local_addr().unwrap();
    let bodies: Vec<[u8; 2]> = (0..150u16).map(|i| i.to_be_bytes()).collect();
    let out: Vec<Outgoing<'_>> = bodies
        .iter()
        .map(|b| Outgoing {
            bytes: b,
            to,
            from: None,
        })
        .collect();
    assert_eq!(send_batch(&s, &out).unwrap(), 150);
    let mut batch = RecvBatch::new(BATCH_MAX, 16);
    let got = collect(&rx, &mut batch, 150);
    let mut seen: Vec<u16> = got
        .iter()
        .map(|g| u16::from_be_bytes([g.0[0], g.0[1]]))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..150).collect::<Vec<_>>());
    // A plain socket asks for no packet info: no destination, the sender still named.
    let sender = SocketAddr::from(([127, 0, 0, 1], s.local_addr().unwrap().port()));
    assert!(
        got.iter().all(|g| g.1 == sender && g.2.is_none()),
        "{:?}",
        got.first()
    );
}

#[test]
fn a_datagram_longer_than_the_room_is_cut_and_said_so() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"0123456789", rx.local_addr().unwrap()).unwrap();
    tx.send_to(b"0123", rx.local_addr().unwrap()).unwrap();
    let mut batch = RecvBatch::new(4, 4);
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 2 && start.elapsed() < Duration::from_secs(5) {
        if batch.recv(&rx).is_ok() {
            got.extend(batch.iter().map(|r| (r.bytes.to_vec(), r.truncated)));
        }
    }
    assert_eq!(
        got,
        vec![(b"0123".to_vec(), true), (b"0123".to_vec(), false)]
    );
}

#[test]
fn a_refused_source_stops_the_batch_where_it_is() {
    let (s, port) = server();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = c.local_addr().unwrap();
    // 192.0.2.1 (TEST-NET-1) is no address of this host: the kernel refuses it as a source.
    let foreign = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
    let good = Outgoing {
        bytes: b"ok",
        to,
        from: Some(asked(9, port).ip()),
    };
    let bad = Outgoing {
        bytes: b"no",
        to,
        from: foreign,
    };
    assert!(send_batch(&s, &[bad, good]).is_err());
    assert_eq!(send_batch(&s, &[good, bad, good]).unwrap(), 1);
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 8];
    let (n, from) = c.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"ok"[..], asked(9, port)));
}

#[test]
fn ipv6_sources_and_destinations() {
    let s = UdpSocket::bind("[::1]:0").expect("this test needs IPv6 loopback (::1)");
    super::super::set_flag(s.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO).unwrap();
    let c = UdpSocket::bind("[::1]:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let out = Outgoing {
        bytes: b"six",
        to: c.local_addr().unwrap(),
        from: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    };
    assert_eq!(send_batch(&s, &[out]).unwrap(), 1);
    let mut buf = [0u8; 8];
    let (n, from) = c.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"six"[..], s.local_addr().unwrap()));
    // And back: a batch receive names the IPv6 sender.
    c.send_to(b"back", s.local_addr().unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut batch = RecvBatch::new(2, 16);
    assert_eq!(batch.recv(&s).unwrap(), 1);
    assert_eq!(
        (batch.get(0).bytes, batch.get(0).peer),
        (&b"back"[..], c.local_addr().unwrap())
    );
    assert_eq!(
        batch.get(0).destination,
        Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        "IPV6_PKTINFO names the address the datagram was sent to"
    );
}

#[test]
fn a_batch_receive_tells_the_sockets_drops_with_the_next_datagram_after_them() {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    crate::netsys::count_drops(&s).unwrap();
    s.set_nonblocking(true).unwrap();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = s.local_addr().unwrap();
    for _ in 0..5000 {
        c.send_to(b"fill", to).unwrap();
    }
    let mut batch = RecvBatch::new(BATCH_MAX, 16);
    let mut seen = 0;
    while let Ok(n) = batch.recv(&s) {
        seen += n;
    }
    assert!(
        seen > 0 && seen < 5000,
        "took {seen} of 5000: nothing overflowed"
    );
    c.send_to(b"next", to).unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert_eq!(batch.recv(&s).unwrap(), 1);
    assert_eq!(batch.get(0).dropped, Some(5000 - seen as u32));
}

#[test]
fn a_stamped_socket_tells_when_each_datagram_arrived_not_when_it_was_read() {
    let (s, port) = server();
    crate::netsys::stamp_arrivals(&s).unwrap();
    crate::netsys::count_drops(&s).unwrap();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut batch = RecvBatch::new(4, 64);
    // The kernel turns stamping on at its next turn of deferred work, not within the setsockopt: until
    // then it stamps at the read. So a few tries, each read 50 ms after its send (at most 20 tries).
    let mut seen = Vec::new();
    for _ in 0..20 {
        let before = SystemTime::now();
        c.send_to(b"stamped", ("127.0.0.1", port)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let slept = SystemTime::now();
        assert_eq!(batch.recv(&s).unwrap(), 1);
        let read = SystemTime::now();
        let r = batch.get(0);
        assert_eq!(r.bytes, b"stamped");
        // The packet-info message comes too: the control room holds both.
        assert_eq!(r.destination, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let arrived = r.arrived.expect("an arrival time on a stamped socket");
        assert!(
            arrived >= before && arrived <= read,
            "{arrived:?} outside the try"
        );
        // Stamped at arrival, the datagram is older than the sleep's end (a wall-clock step here would
        // fail this); stamped at the read, it is younger.
        if arrived < slept {
            let (plain, port) = server();
            c.send_to(b"plain", ("127.0.0.1", port)).unwrap();
            assert_eq!(batch.recv(&plain).unwrap(), 1);
            assert_eq!(batch.get(0).arrived, None, "stamped though not asked");
            return;
        }
        seen.push(read.duration_since(arrived).unwrap_or_default());
    }
    panic!("every stamp was the read's time, not the arrival's (read − stamp: {seen:?})");
}

#[test]
fn a_control_message_cut_short_is_not_read_past_its_end() {
    // One SCM_TIMESTAMPNS message in an aligned room, its timespec whole after it, and the length the
    // kernel wrote: whole, or cut short (MSG_CTRUNC) to 8 of the timespec's 16 bytes.
    let stamp = |data_len: usize| {
        let mut room = [0u64; 8];
        // SAFETY: arithmetic only.
        let len = unsafe { libc::CMSG_LEN(data_len as u32) } as usize;
        // SAFETY: plain data; all-zero is valid (musl's header has padding fields glibc's has not).
        let mut hdr: libc::cmsghdr = unsafe { zeroed() };
        hdr.cmsg_len = len as _;
        hdr.cmsg_level = libc::SOL_SOCKET;
        hdr.cmsg_type = libc::SCM_TIMESTAMPNS;
        let t = libc::timespec {
            tv_sec: 1_700_000_000,
            tv_nsec: 5,
        };
        let at = room.as_mut_ptr().cast::<libc::cmsghdr>();
        // SAFETY: the header and the timespec after it fit in `room` (16 + 16 ≤ 64 bytes), which is
        // aligned for both.
        unsafe {
            at.write(hdr);
            libc::CMSG_DATA(at).cast::<libc::timespec>().write(t);
        }
        // SAFETY: `room` is 64 initialised bytes and `len` ≤ 64.
        let view = unsafe { std::slice::from_raw_parts(room.as_ptr().cast::<u8>(), len) };
        control_of(view).arrived
    };
    let whole = size_of::<libc::timespec>();
    assert_eq!(
        stamp(whole),
        Some(UNIX_EPOCH + Duration::new(1_700_000_000, 5))
    );
    assert_eq!(stamp(whole / 2), None, "read past a message cut short");
}
