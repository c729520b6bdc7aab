//! The UDP system calls the lab's `-device-net` mode needs that std does not offer: a socket that shares
//! its port with the other serving threads' sockets (`SO_REUSEPORT`) and reports each datagram's
//! destination address (`IP_PKTINFO`), a receive that returns that address, and a send that picks its
//! source address (`sendmsg` with `IP_PKTINFO`), so one socket answers for a whole range of addresses,
//! each reply coming from the address that was asked. Thin wrappers only; no policy lives here. IPv4.
//! Also [`recv_from_until`]: a receive with a deadline that a signal neither ends early nor extends,
//! and ([`batch`]) many datagrams a system call: `recvmmsg` / `sendmmsg`, each datagram with its own
//! peer and local address.
//!
//! This is the one `unsafe` file of the lab's networking: each call passes memory it owns for the
//! call's duration.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

pub mod batch;
pub mod uring;
pub use batch::{send_batch, Outgoing, Received, RecvBatch, BATCH_MAX};

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_flag(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int for the call and its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut s: libc::sockaddr_in = unsafe { zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

/// `SO_RXQ_OVFL` (asm-generic/socket.h; the same on x86_64 and aarch64).
pub const SO_RXQ_OVFL: libc::c_int = 40;

/// Asks the kernel to tell, with every datagram received, how many it has dropped on `sock` so far for
/// want of room in its receive buffer (`SO_RXQ_OVFL`): [`batch::Received::dropped`].
pub fn count_drops(sock: &UdpSocket) -> io::Result<()> {
    set_flag(sock.as_raw_fd(), libc::SOL_SOCKET, SO_RXQ_OVFL)
}

/// Asks the kernel to stamp every datagram received on `sock` with the time it arrived
/// (`SO_TIMESTAMPNS`, the realtime clock): [`batch::Received::arrived`]. A reader that takes its
/// datagrams late still learns when each came.
pub fn stamp_arrivals(sock: &UdpSocket) -> io::Result<()> {
    set_flag(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
}

/// Asks for a receive buffer of `bytes` on `sock`, past `net.core.rmem_max` where the process may
/// (`SO_RCVBUFFORCE`, CAP_NET_ADMIN), else up to it (`SO_RCVBUF`): room for a burst while the reading
/// thread is off the CPU. Memory is taken only by what is queued. The size the kernel granted.
pub fn deepen_receive_buffer(sock: &UdpSocket, bytes: usize) -> io::Result<usize> {
    let want = bytes.min(i32::MAX as usize) as libc::c_int;
    let set = |name| {
        // SAFETY: `want` is a valid c_int for the call and its size is passed.
        check(unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&want as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        })
    };
    if set(libc::SO_RCVBUFFORCE).is_err() {
        set(libc::SO_RCVBUF)?;
    }
    let mut got: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `got` and `len` are valid for the call; the kernel writes at most `len` bytes.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(got as usize)
}

/// A non-blocking UDP socket bound to `addr` with `SO_REUSEPORT` (other sockets of this user may bind
/// the same port, and the kernel spreads datagrams over them) and `IP_PKTINFO` on.
pub fn bind_shared_port(addr: SocketAddrV4) -> io::Result<UdpSocket> {
    // SAFETY: socket(2) takes no memory; the descriptor is owned by the UdpSocket at once.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: `fd` was just created and nothing else owns it.
    let sock = unsafe { UdpSocket::from_raw_fd(fd) };
    set_flag(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT)?;
    set_flag(fd, libc::IPPROTO_IP, libc::IP_PKTINFO)?;
    let sa = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in for the call and its size is passed.
    check(unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })?;
    Ok(sock)
}

/// Room for one `IP_PKTINFO` control message, aligned as cmsg(3) requires.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Receives one datagram on `sock` (which has `IP_PKTINFO` on): its length, its sender and the local
/// address it was sent to (`None` when the kernel gave no `IP_PKTINFO`). EINTR and EAGAIN come back
/// as errors of those kinds.
pub fn recv_with_destination(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddrV4, Option<Ipv4Addr>)> {
    // SAFETY: plain data; all-zero is valid.
    let mut from: libc::sockaddr_in = unsafe { zeroed() };
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: every pointer in `msg` points at memory owned by this frame, with its length.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let peer = SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
        u16::from_be(from.sin_port),
    );
    let mut destination = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within msg_controllen;
    // an IP_PKTINFO message carries one in_pktinfo (read unaligned to be safe).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                let info: libc::in_pktinfo =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::in_pktinfo>());
                destination = Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, peer, destination))
}

/// Sends `bytes` to `to` from local address `from` (which the host must own) on `sock`, whatever the
/// socket is bound to, via `sendmsg` with an `IP_PKTINFO` source. Never inlined: profiles show the
/// fleet's send path as `sendmsg ← netsys::send_from ← …`, naming where the packet is built.
#[inline(never)]
pub fn send_from(
    sock: &UdpSocket,
    bytes: &[u8],
    to: SocketAddrV4,
    from: Ipv4Addr,
) -> io::Result<usize> {
    let mut dest = sockaddr(to);
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut dest as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
    let space = unsafe { libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as u32) } as usize;
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds `space` bytes (64 ≥ CMSG_SPACE(12)), so the first header and
    // its data lie inside it; the kernel only reads `bytes` (sendmsg never writes the iovec).
    let n = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::IPPROTO_IP;
        (*c).cmsg_type = libc::IP_PKTINFO;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) as _;
        let mut info: libc::in_pktinfo = zeroed();
        info.ipi_spec_dst.s_addr = u32::from(from).to_be();
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::in_pktinfo>(), info);
        libc::sendmsg(sock.as_raw_fd(), &msg, 0)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Receives one datagram on `sock` by `deadline`: `TimedOut` once it passes. A signal handler returning
/// mid-wait (the profiler's, up to 99 times a second) makes the kernel answer `EINTR` — `SO_RCVTIMEO`
/// receives are never restarted — so the wait is resumed with what is left of it, never cut short and
/// never lengthened. Sets `sock`'s read timeout.
pub fn recv_from_until(
    sock: &UdpSocket,
    buf: &mut [u8],
    deadline: std::time::Instant,
) -> io::Result<(usize, std::net::SocketAddr)> {
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no datagram before the deadline",
            ));
        }
        sock.set_read_timeout(Some(left))?;
        match sock.recv_from(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // SO_RCVTIMEO expiring is EAGAIN; the loop head turns it into TimedOut once the time is up.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A datagram sent 300 ms into a 2 s wait arrives although the waiting thread is signalled at
    /// 99 Hz (a wall-clock profile runs) meanwhile.
    #[test]
    fn a_receive_with_a_deadline_survives_signals() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // As the lab's callers do: a blocking receive with a timeout (which SA_RESTART does not restart).
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let to = rx.local_addr().unwrap();
        let session = crate::testwall::session();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .send_to(b"late", to)
                .unwrap();
        });
        let mut buf = [0u8; 16];
        let start = std::time::Instant::now();
        let got = recv_from_until(&rx, &mut buf, start + Duration::from_secs(2));
        sender.join().unwrap();
        let (n, _) = got.expect("the datagram, not an interrupted wait");
        assert_eq!(&buf[..n], b"late");
        // Nothing more comes: the wait ends at its deadline, not before.
        let start = std::time::Instant::now();
        let err = recv_from_until(&rx, &mut buf, start + Duration::from_millis(300)).unwrap_err();
        let waited = start.elapsed();
        drop(session);
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(
            waited >= Duration::from_millis(300),
            "cut short: {waited:?}"
        );
        assert!(
            waited < Duration::from_millis(900),
            "lengthened: {waited:?}"
        );
    }

    #[test]
    fn a_shared_port_socket_learns_the_destination_and_replies_from_it() {
        let a = bind_shared_port(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        let port = a.local_addr().unwrap().port();
        // A second socket on the same port: SO_REUSEPORT lets it bind.
        let _b = bind_shared_port(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).unwrap();
        let asked = SocketAddrV4::new(Ipv4Addr::new(127, 3, 2, 1), port);
        // Send until socket `a` gets one (the kernel may hash the flow to `_b`).
        let mut buf = [0u8; 64];
        a.set_nonblocking(false).unwrap();
        a.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut got = None;
        for _ in 0..20 {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"ping", asked).unwrap();
            if let Ok((n, peer, dst)) = recv_with_destination(&a, &mut buf) {
                got = Some((n, peer, dst, c));
                break;
            }
        }
        let (n, peer, dst, c) = got.expect("socket a received a datagram");
        assert_eq!(&buf[..n], b"ping");
        assert_eq!(dst, Some(*asked.ip()));
        send_from(&a, b"pong", peer, *asked.ip()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (n, from) = c.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"pong"[..], asked.into()));
    }
}
