//! Many datagrams a system call: [`RecvBatch`] takes up to [`BATCH_MAX`] waiting datagrams from a UDP
//! socket at once (`recvmmsg`), each with its sender and the local address it was sent to (the socket's
//! `IP_PKTINFO` / `IPV6_RECVPKTINFO`, when on), and [`send_batch`] hands the kernel a slice of
//! [`Outgoing`] datagrams at once (`sendmmsg`), each to its own destination and, when given, from its
//! own source address (`IP_PKTINFO` / `IPV6_PKTINFO` per message). A busy server pays two system calls
//! per batch instead of two per datagram. IPv4 and IPv6. Thin wrappers; no policy.
//!
//! Each call passes memory this module owns for the call's duration: the headers, addresses and control
//! buffers are built afresh in the caller's frame for every call, pointing into buffers that do not
//! move during it.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// The most datagrams one system call moves; [`send_batch`] splits longer slices, [`RecvBatch::new`]
/// caps its room at it.
pub const BATCH_MAX: usize = 64;

/// Room for one packet-info control message (IPv4 12 bytes, IPv6 20), aligned as cmsg(3) requires.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 64]);

/// One datagram to send: its bytes, its destination and, when `from` is set, the local address it
/// leaves from (which the host must own, of `to`'s family), whatever the socket is bound to.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub bytes: &'a [u8],
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
}

/// One datagram a [`RecvBatch::recv`] took: its bytes (cut to the batch's buffer size when
/// `truncated`), its sender and the local address it was sent to (`None` when the socket does not ask
/// for packet info).
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub bytes: &'a [u8],
    pub peer: SocketAddr,
    pub destination: Option<IpAddr>,
    pub truncated: bool,
}

/// What the kernel said of one received datagram (its bytes stay in the batch's buffer).
#[derive(Debug, Clone, Copy)]
struct Meta {
    len: usize,
    peer: SocketAddr,
    destination: Option<IpAddr>,
    truncated: bool,
}

/// Reusable room for up to `n` datagrams of `size` bytes each, filled by [`RecvBatch::recv`]. The
/// buffers are allocated zeroed (untouched pages cost no memory until a datagram lands in them).
pub struct RecvBatch {
    size: usize,
    bufs: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<Control>,
    got: Vec<Meta>,
}

impl RecvBatch {
    /// Room for `n` datagrams (1 ..= [`BATCH_MAX`]) of up to `size` bytes (at least 1) each.
    pub fn new(n: usize, size: usize) -> RecvBatch {
        let n = n.clamp(1, BATCH_MAX);
        let size = size.max(1);
        RecvBatch {
            size,
            bufs: vec![0; n * size],
            // SAFETY: plain data; all-zero is valid.
            names: vec![unsafe { zeroed() }; n],
            controls: vec![Control([0; 64]); n],
            got: Vec::with_capacity(n),
        }
    }

    /// How many datagrams one receive can take.
    pub fn capacity(&self) -> usize {
        self.names.len()
    }

    /// Takes the datagrams waiting on `sock`, up to [`RecvBatch::capacity`], in one `recvmmsg`: the
    /// count (≥ 1), each readable by [`RecvBatch::get`] until the next call. Waits for the first only
    /// when `sock` is blocking (then takes what else is already there); EAGAIN and EINTR come back as
    /// errors of those kinds.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.got.clear();
        let n = self.capacity();
        // SAFETY: plain data; all-zero is valid.
        let mut iovs: [libc::iovec; BATCH_MAX] = unsafe { zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH_MAX] = unsafe { zeroed() };
        for i in 0..n {
            iovs[i] = libc::iovec {
                iov_base: self.bufs[i * self.size..].as_mut_ptr().cast(),
                iov_len: self.size,
            };
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.controls[i].0.as_mut_ptr().cast();
            h.msg_controllen = size_of::<Control>() as _;
        }
        // SAFETY: the first `n` headers point at this batch's buffers, addresses and control room,
        // each with its length; none moves or is read elsewhere during the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE as _,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        for h in &hdrs[..r as usize] {
            let len = h.msg_len as usize;
            let m = &h.msg_hdr;
            // SAFETY: the kernel filled `msg_name` with `msg_namelen` bytes of a socket address.
            let peer = unsafe { socket_addr(&*m.msg_name.cast(), m.msg_namelen) };
            self.got.push(Meta {
                len: len.min(self.size),
                // A UDP socket always names the sender; a family we do not read is "unspecified".
                peer: peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
                // SAFETY: the kernel filled `msg_control` within `msg_controllen`.
                destination: unsafe { destination(m) },
                truncated: m.msg_flags & libc::MSG_TRUNC != 0,
            });
        }
        Ok(self.got.len())
    }

    /// How many datagrams the last [`RecvBatch::recv`] took.
    pub fn len(&self) -> usize {
        self.got.len()
    }

    /// True when the last receive took nothing (or none was made).
    pub fn is_empty(&self) -> bool {
        self.got.is_empty()
    }

    /// The `i`-th datagram of the last receive (`i` < [`RecvBatch::len`]).
    pub fn get(&self, i: usize) -> Received<'_> {
        let m = self.got[i];
        Received {
            bytes: &self.bufs[i * self.size..i * self.size + m.len],
            peer: m.peer,
            destination: m.destination,
            truncated: m.truncated,
        }
    }

    /// Every datagram of the last receive, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = Received<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Reads a socket address the kernel wrote (`len` bytes of it); None for another family.
///
/// # Safety
/// `s` holds at least `len` initialised bytes of a socket address.
unsafe fn socket_addr(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match s.ss_family as libc::c_int {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            let a = &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            let a = &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The local address a received datagram was sent to, from its packet-info control message.
///
/// # Safety
/// `m`'s control buffer was filled by the kernel within `msg_controllen`.
unsafe fn destination(m: &libc::msghdr) -> Option<IpAddr> {
    let mut found = None;
    let mut c = libc::CMSG_FIRSTHDR(m);
    while !c.is_null() {
        let data = libc::CMSG_DATA(c);
        match ((*c).cmsg_level, (*c).cmsg_type) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                let info: libc::in_pktinfo = std::ptr::read_unaligned(data.cast());
                found = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    info.ipi_addr.s_addr,
                ))));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                let info: libc::in6_pktinfo = std::ptr::read_unaligned(data.cast());
                found = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(m, c);
    }
    found
}

/// `a` as the kernel reads it, with its length.
fn raw_addr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: plain data; all-zero is valid.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match a {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            let v4 = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            v4.sin_family = libc::AF_INET as libc::sa_family_t;
            v4.sin_port = a.port().to_be();
            v4.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            let v6 = unsafe {
                &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            v6.sin6_port = a.port().to_be();
            v6.sin6_addr.s6_addr = a.ip().octets();
            v6.sin6_flowinfo = a.flowinfo();
            v6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (s, len as libc::socklen_t)
}

/// Writes `from` as a source-address control message into `control`; its length.
///
/// # Safety
/// `h.msg_control` points at `control`, which is large enough for one packet-info message.
unsafe fn put_source(h: &mut libc::msghdr, from: IpAddr) -> usize {
    let (level, kind, len) = match from {
        IpAddr::V4(_) => (
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            size_of::<libc::in_pktinfo>(),
        ),
        IpAddr::V6(_) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_PKTINFO,
            size_of::<libc::in6_pktinfo>(),
        ),
    };
    let space = libc::CMSG_SPACE(len as u32) as usize;
    h.msg_controllen = space as _;
    let c = libc::CMSG_FIRSTHDR(h);
    (*c).cmsg_level = level;
    (*c).cmsg_type = kind;
    (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
    let data = libc::CMSG_DATA(c);
    match from {
        IpAddr::V4(ip) => {
            let mut info: libc::in_pktinfo = zeroed();
            info.ipi_spec_dst.s_addr = u32::from(ip).to_be();
            std::ptr::write_unaligned(data.cast::<libc::in_pktinfo>(), info);
        }
        IpAddr::V6(ip) => {
            let mut info: libc::in6_pktinfo = zeroed();
            info.ipi6_addr.s6_addr = ip.octets();
            std::ptr::write_unaligned(data.cast::<libc::in6_pktinfo>(), info);
        }
    }
    space
}

/// Sends `msgs` on `sock` with as few `sendmmsg` calls as [`BATCH_MAX`] allows, each datagram to its
/// `to` and from its `from` when set. How many were sent, in order: fewer than `msgs.len()` when the
/// kernel refused `msgs[n]` (a full buffer, EINTR, a bad source) after taking the first `n`, so the
/// caller retries or counts from there; an error only when it refused the first.
pub fn send_batch(sock: &UdpSocket, msgs: &[Outgoing<'_>]) -> io::Result<usize> {
    let mut sent = 0;
    for chunk in msgs.chunks(BATCH_MAX) {
        match send_chunk(sock, chunk) {
            Ok(n) if n == chunk.len() => sent += n,
            Ok(n) => return Ok(sent + n),
            Err(e) if sent == 0 => return Err(e),
            Err(_) => return Ok(sent),
        }
    }
    Ok(sent)
}

/// One `sendmmsg` of at most [`BATCH_MAX`] datagrams.
fn send_chunk(sock: &UdpSocket, msgs: &[Outgoing<'_>]) -> io::Result<usize> {
    let n = msgs.len().min(BATCH_MAX);
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: plain data; all-zero is valid.
    let mut names: [libc::sockaddr_storage; BATCH_MAX] = unsafe { zeroed() };
    let mut controls = [Control([0; 64]); BATCH_MAX];
    let mut iovs: [libc::iovec; BATCH_MAX] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; BATCH_MAX] = unsafe { zeroed() };
    for (i, m) in msgs[..n].iter().enumerate() {
        let (name, len) = raw_addr(m.to);
        names[i] = name;
        iovs[i] = libc::iovec {
            iov_base: m.bytes.as_ptr() as *mut libc::c_void,
            iov_len: m.bytes.len(),
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = len;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        if let Some(from) = m.from {
            h.msg_control = controls[i].0.as_mut_ptr().cast();
            h.msg_controllen = size_of::<Control>() as _;
            // SAFETY: `msg_control` points at `controls[i]`, 64 bytes ≥ CMSG_SPACE(20).
            unsafe { put_source(h, from) };
        }
    }
    // SAFETY: the first `n` headers point at this frame's addresses, iovecs and control messages and at
    // the callers' bytes (which sendmmsg only reads), each with its length.
    let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

#[cfg(test)]
mod tests;
