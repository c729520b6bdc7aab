//! Sending a datagram as a device: what the SNMP agent, traps, syslog over UDP and NetFlow share. Under
//! `-device-net` every device sends from its own address ([`send_as`], through `sendmsg` with
//! `IP_PKTINFO` in [`crate::netsys`]); otherwise from whatever the socket is bound to. Every send retries
//! EINTR and waits once, briefly, for room in a full send buffer ([`crate::ready`]), then reports whether
//! the OS took the datagram: the caller counts what was refused. Owns no socket and counts nothing.
//!
//! [`Outbox`]: datagrams gathered (the scheduler's jobs that fall due together) and handed to the kernel
//! [`BATCH_MAX`] a system call (`sendmmsg`, [`crate::netsys::send_batch`]), each from its device's own
//! address, each one's outcome told back to the caller for counting.
#![forbid(unsafe_code)]

use super::device::Device;
use crate::netsys::{send_batch, Outgoing, BATCH_MAX};
use crate::ready::{poll_until, PollFd};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// The longest a send waits for room when a (non-blocking) socket's send buffer is full, once, before
/// the datagram is given up and counted as a send error: short, as the serving thread has other
/// requests waiting.
const SEND_WAIT: Duration = Duration::from_millis(50);

/// Runs `send` on descriptor `fd`: EINTR is retried; EAGAIN waits up to `wait` for `fd` to become
/// writable (signals neither end nor extend the wait), then tries once more. False when the OS refused the datagram.
fn send_with(fd: RawFd, wait: Duration, mut send: impl FnMut() -> std::io::Result<usize>) -> bool {
    let mut waited = false;
    for _ in 0..8 {
        match send() {
            Ok(_) => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock && !waited => {
                waited = true;
                let mut fds = [PollFd::writable(fd)];
                // To the deadline: a profiler's signal must not end the wait and lose the datagram.
                let _ = poll_until(&mut fds, Instant::now() + wait);
            }
            Err(_) => return false,
        }
    }
    false
}

/// Sends one datagram ([`send_with`]: EINTR retried, a full buffer waited for once).
pub fn send_retrying(socket: &UdpSocket, bytes: &[u8], to: SocketAddr) -> bool {
    send_with(socket.as_raw_fd(), SEND_WAIT, || socket.send_to(bytes, to))
}

/// Sends from a chosen local address ([`send_with`]: EINTR retried, a full buffer waited for once).
pub fn send_from_retrying(
    socket: &UdpSocket,
    bytes: &[u8],
    to: SocketAddrV4,
    from: Ipv4Addr,
) -> bool {
    send_with(socket.as_raw_fd(), SEND_WAIT, || {
        crate::netsys::send_from(socket, bytes, to, from)
    })
}

/// Sends `bytes` to `to` from `device`'s own address when it has one (`-device-net`), else from
/// whatever `socket` is bound to; EINTR is retried. False when the OS refused it.
pub fn send_as(device: &Device, socket: &UdpSocket, bytes: &[u8], to: SocketAddr) -> bool {
    match (device.own_ip(), to) {
        (Some(from), SocketAddr::V4(to)) => send_from_retrying(socket, bytes, to, from),
        _ => send_retrying(socket, bytes, to),
    }
}

/// Datagrams waiting to go out together, each with the device (index) it is sent as.
#[derive(Debug, Default)]
pub struct Outbox {
    bytes: Vec<u8>,
    items: Vec<Item>,
}

#[derive(Debug, Clone, Copy)]
struct Item {
    start: usize,
    len: usize,
    to: SocketAddr,
    from: Option<IpAddr>,
    device: usize,
}

impl Outbox {
    /// Queues `bytes` to `to` as `device` (from its own address under `-device-net`).
    pub fn push(&mut self, device: &Device, bytes: &[u8], to: SocketAddr) {
        let from = match to {
            SocketAddr::V4(_) => device.own_ip().map(IpAddr::V4),
            SocketAddr::V6(_) => None,
        };
        self.items.push(Item {
            start: self.bytes.len(),
            len: bytes.len(),
            to,
            from,
            device: device.index(),
        });
        self.bytes.extend_from_slice(bytes);
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Sends every queued datagram on `socket`, [`BATCH_MAX`] a system call, in order, and tells
    /// `done(device, sent)` of each; then the box is empty. EINTR is retried; a full send buffer is
    /// waited for once per refused datagram (as [`send_retrying`]); another refusal gives that datagram
    /// up (`sent` false) and goes on with the next.
    pub fn flush(&mut self, socket: &UdpSocket, mut done: impl FnMut(usize, bool)) {
        let mut out: Vec<Outgoing<'_>> = Vec::with_capacity(BATCH_MAX.min(self.items.len()));
        let (mut at, mut waited) = (0, false);
        while at < self.items.len() {
            out.clear();
            out.extend(self.items[at..].iter().take(BATCH_MAX).map(|i| Outgoing {
                bytes: &self.bytes[i.start..i.start + i.len],
                to: i.to,
                from: i.from,
            }));
            match send_batch(socket, &out) {
                // Taken in order; when fewer, the next call starts at the refused one and tells why.
                Ok(n) => {
                    for i in &self.items[at..at + n] {
                        done(i.device, true);
                    }
                    at += n;
                    waited &= n == 0;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock && !waited => {
                    waited = true;
                    let mut fds = [PollFd::writable(socket.as_raw_fd())];
                    let _ = poll_until(&mut fds, Instant::now() + SEND_WAIT);
                }
                Err(_) => {
                    done(self.items[at].device, false);
                    at += 1;
                    waited = false;
                }
            }
        }
        self.items.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outbox_sends_every_datagram_from_its_device_and_tells_each_outcome() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let from = tx.local_addr().unwrap();
        let boot = Instant::now();
        let devices: Vec<Device> = (0..3).map(|i| Device::new(i, boot)).collect();
        let mut out = Outbox::default();
        // More than one system call's worth, each datagram naming its device and turn.
        for k in 0..BATCH_MAX + 6 {
            let d = &devices[k % 3];
            out.push(d, format!("{}:{k}", d.index()).as_bytes(), to);
        }
        assert_eq!(out.len(), BATCH_MAX + 6);
        let mut told = Vec::new();
        out.flush(&tx, |d, ok| told.push((d, ok)));
        assert!(out.is_empty());
        let want: Vec<(usize, bool)> = (0..BATCH_MAX + 6).map(|k| (k % 3, true)).collect();
        assert_eq!(told, want);
        let mut buf = [0u8; 64];
        for k in 0..BATCH_MAX + 6 {
            let (n, peer) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], format!("{}:{k}", k % 3).as_bytes(), "in order");
            assert_eq!(peer, from);
        }
        // A refused datagram (IPv6 to an IPv4 socket) is told as not sent; the rest still go.
        out.push(&devices[0], b"a", to);
        out.push(&devices[1], b"b", "[::1]:9".parse().unwrap());
        out.push(&devices[2], b"c", to);
        let mut told = Vec::new();
        out.flush(&tx, |d, ok| told.push((d, ok)));
        assert_eq!(told, [(0, true), (1, false), (2, true)]);
        for want in [b"a", b"c"] {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], want);
        }
    }

    #[test]
    fn a_send_into_a_full_buffer_waits_and_retries_once() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut calls = 0;
        let full = std::io::Error::from(ErrorKind::WouldBlock);
        let sent = send_with(socket.as_raw_fd(), SEND_WAIT, || {
            calls += 1;
            match calls {
                1 => Err(std::io::Error::from(ErrorKind::WouldBlock)),
                _ => Ok(1),
            }
        });
        assert!(sent && calls == 2, "sent {sent} after {calls} calls");
        let mut calls = 0;
        let sent = send_with(socket.as_raw_fd(), SEND_WAIT, || {
            calls += 1;
            Err(std::io::Error::from(full.kind()))
        });
        assert!(!sent && calls == 2, "gave up after {calls} calls");
    }

    /// A wall-clock profile signals every thread 99 times a second; the wait for room in a full buffer
    /// must outlast those signals (poll answers EINTR and is never restarted), not end at the first one
    /// and give the datagram up.
    #[test]
    fn a_signal_does_not_cut_the_wait_for_room_short() {
        use std::os::unix::net::UnixDatagram;
        let (tx, rx) = UnixDatagram::pair().unwrap();
        tx.set_nonblocking(true).unwrap();
        while tx.send(b"fill").is_ok() {}
        let session = crate::testwall::session();
        let drain = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            rx.recv(&mut [0u8; 8]).unwrap();
            rx
        });
        let t0 = std::time::Instant::now();
        let sent = send_with(tx.as_raw_fd(), Duration::from_secs(3), || tx.send(b"late"));
        let waited = t0.elapsed();
        drop(session);
        let _rx = drain.join().unwrap();
        assert!(
            sent,
            "the datagram was given up after {waited:?}, before room was made at 300 ms"
        );
    }
}
