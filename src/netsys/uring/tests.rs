use super::*;
use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;

fn sockets(n: usize) -> Vec<UdpSocket> {
    (0..n)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

/// A ring over `socks` and the wake-up pair it watches (the second end), kept alive by the caller.
fn ring_over(socks: &[UdpSocket]) -> (UdpRing, (UnixDatagram, UnixDatagram)) {
    let refs: Vec<&UdpSocket> = socks.iter().collect();
    let (tx, rx) = UnixDatagram::pair().unwrap();
    let ring = UdpRing::new(&refs, rx.as_raw_fd()).unwrap();
    (ring, (tx, rx))
}

/// Drains `ring` until `want` datagrams came (or 5 s pass): (token, bytes, peer) each.
fn collect(ring: &mut UdpRing, want: usize) -> Vec<(usize, Vec<u8>, SocketAddr)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        ring.wait(Duration::from_millis(50)).unwrap();
        ring.drain(|e| {
            if let Event::Datagram { token, got: r } = e {
                got.push((token, r.bytes.to_vec(), r.peer));
            }
        })
        .unwrap();
    }
    got
}

#[test]
fn the_probe_passes_on_this_kernel() {
    // The test machines run Linux ≥ 6.1 with io_uring on: the serving path the fleet tests exercise.
    probe().unwrap();
}

#[test]
fn every_socket_gets_its_own_datagrams_and_each_answer_leaves_from_the_socket_asked() {
    // 200: the client's default receive buffer holds every answer unread.
    let socks = sockets(200);
    let (mut ring, _wake) = ring_over(&socks);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    for (i, s) in socks.iter().enumerate() {
        client
            .send_to(format!("to {i}").as_bytes(), s.local_addr().unwrap())
            .unwrap();
    }
    let got = collect(&mut ring, socks.len());
    assert_eq!(got.len(), socks.len());
    let client_addr = client.local_addr().unwrap();
    for (token, bytes, peer) in &got {
        assert_eq!(bytes, format!("to {token}").as_bytes());
        assert_eq!(*peer, client_addr);
    }
    // Answers: each queued on the socket it came to, all leaving with one wait.
    for (token, _, peer) in got {
        ring.send(token, format!("from {token}").into_bytes(), peer, token)
            .unwrap();
    }
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while sent < socks.len() && Instant::now() < deadline {
        ring.wait(Duration::from_millis(50)).unwrap();
        ring.drain(|e| {
            if let Event::Sent { ok, .. } = e {
                assert!(ok);
                sent += 1;
            }
        })
        .unwrap();
    }
    assert_eq!(sent, socks.len());
    let port_of: HashMap<u16, usize> = socks
        .iter()
        .enumerate()
        .map(|(i, s)| (s.local_addr().unwrap().port(), i))
        .collect();
    let mut buf = [0u8; 64];
    for _ in 0..socks.len() {
        let (n, from) = client.recv_from(&mut buf).unwrap();
        let i = port_of[&from.port()];
        assert_eq!(
            &buf[..n],
            format!("from {i}").as_bytes(),
            "answer from {from}"
        );
    }
}

#[test]
fn more_datagrams_than_buffers_are_all_received_once_receives_are_armed_again() {
    // 6 sockets × 100 datagrams = 600 > the pool's 256 buffers, sent before the ring is drained: the
    // receives that found no buffer end, the rest wait in their sockets, and re-arming takes them.
    let socks = sockets(6);
    let (mut ring, _wake) = ring_over(&socks);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    for round in 0..100 {
        for s in &socks {
            client
                .send_to(&[round as u8; 32], s.local_addr().unwrap())
                .unwrap();
        }
    }
    let got = collect(&mut ring, 600);
    assert_eq!(got.len(), 600);
    for t in 0..socks.len() {
        let rounds: Vec<u8> = got
            .iter()
            .filter(|(token, ..)| *token == t)
            .map(|(_, b, _)| b[0])
            .collect();
        assert_eq!(
            rounds,
            (0..100).collect::<Vec<u8>>(),
            "socket {t}, in order"
        );
    }
}

#[test]
fn the_socket_drop_count_comes_with_the_next_datagram() {
    let socks = sockets(1);
    crate::netsys::count_drops(&socks[0]).unwrap();
    let to = socks[0].local_addr().unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Before the ring exists nothing reads the socket: a burst past its buffer is dropped.
    for _ in 0..5_000 {
        let _ = client.send_to(&[7u8; 512], to);
    }
    // The kernel tells the running count with the next datagram it queues after a drop.
    std::thread::sleep(Duration::from_millis(50));
    let (mut ring, _wake) = ring_over(&socks);
    // The queued datagrams are taken first; then one more, queued after the drops, carries them.
    collect(&mut ring, 1);
    std::thread::sleep(Duration::from_millis(100));
    client.send_to(&[8u8; 16], to).unwrap();
    let mut dropped = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        ring.wait(Duration::from_millis(50)).unwrap();
        let mut any = false;
        ring.drain(|e| {
            if let Event::Datagram { got, .. } = e {
                any = true;
                dropped = dropped.max(got.dropped);
            }
        })
        .unwrap();
        if !any && dropped.is_some() {
            break;
        }
    }
    let dropped = dropped.expect("a drop count with the datagrams");
    assert!(dropped > 0 && dropped < 5_000, "dropped {dropped}");
}

#[test]
fn a_wait_returns_when_the_wake_socket_becomes_readable() {
    let socks = sockets(1);
    let (mut ring, (tx, _rx)) = ring_over(&socks);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        tx.send(&[1]).unwrap();
    });
    let start = Instant::now();
    ring.wait(Duration::from_secs(10)).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    t.join().unwrap();
}

#[test]
fn a_socket_whose_receives_keep_failing_is_given_up_not_spun_on() {
    // Socket 0's descriptor is made a pipe before the ring registers it: every receive fails
    // (ENOTSOCK). Re-armed for ever, each wait would return at once; given up, the waits block.
    let socks = sockets(2);
    let mut pipe = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors; dup2(2) makes socket 0's descriptor the pipe's read
    // end (the UdpSocket closes it at drop, the pipe's own descriptors are closed below).
    unsafe {
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        assert!(libc::dup2(pipe[0], socks[0].as_raw_fd()) >= 0);
    }
    let (mut ring, _wake) = ring_over(&socks);
    let (mut broken, mut turns) = (Vec::new(), 0);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        ring.wait(Duration::from_millis(50)).unwrap();
        ring.drain(|e| {
            if let Event::Broken { token, error } = e {
                broken.push((token, error.raw_os_error()));
            }
        })
        .unwrap();
        turns += 1;
    }
    assert_eq!(broken, vec![(0, Some(libc::ENOTSOCK))]);
    // Given up, a turn is a 50 ms wait (or one cut short by another test's profiling signal: at most
    // a few hundred in 500 ms); spinning, each takes microseconds.
    assert!(turns < 1_000, "{turns} turns in 500 ms: the ring spun");
    // The other socket is still served.
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .send_to(b"still here", socks[1].local_addr().unwrap())
        .unwrap();
    let got = collect(&mut ring, 1);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0, &got[0].1[..]), (1, &b"still here"[..]));
    // SAFETY: the pipe's own two descriptors, closed once.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
}
