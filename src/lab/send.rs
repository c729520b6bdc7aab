//! Sending a datagram as a device: what the SNMP agent, traps, syslog over UDP and NetFlow share. Under
//! `-device-net` every device sends from its own address ([`send_as`], through `sendmsg` with
//! `IP_PKTINFO` in [`crate::netsys`]); otherwise from whatever the socket is bound to. Every send retries
//! EINTR and waits once, briefly, for room in a full send buffer ([`crate::ready`]), then reports whether
//! the OS took the datagram: the caller counts what was refused. Owns no socket and counts nothing.
#![forbid(unsafe_code)]

use super::device::Device;
use crate::ready::{poll_until, PollFd};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
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

#[cfg(test)]
mod tests {
    use super::*;

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
