//! Many datagrams a system call: [`RecvBatch`] takes up to [`BATCH_MAX`] waiting datagrams from a UDP
//! socket at once (`recvmmsg`), each with its sender and the local address it was sent to (the socket's
//! `IP_PKTINFO` / `IPV6_RECVPKTINFO`, when on), and [`send_batch`] hands the kernel a slice of
//! [`Outgoing`] datagrams at once (`sendmmsg`), each to its own destination and, when given, from its
//! own source address (`IP_PKTINFO` / `IPV6_PKTINFO` per message). A busy server pays two system calls
//! per batch instead of two per datagram. IPv4 and IPv6. Thin wrappers; no policy.
//!
//! Each call passes memory this module owns for the call's duration: a [`RecvBatch`]'s headers are
//! built once and point into its own heap buffers (which never move or grow); a send's headers are
//! built in its frame for the datagrams it sends, no more.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed, MaybeUninit};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The most datagrams one system call moves; [`send_batch`] splits longer slices, [`RecvBatch::new`]
/// caps its room at it.
pub const BATCH_MAX: usize = 64;

/// Room for a sent datagram's packet-info control message (IPv4 12 bytes, IPv6 20: 40 with its
/// header), aligned as cmsg(3) requires.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 64]);

/// A received datagram's control room: a packet-info message (40 bytes with its header, IPv6), a drop
/// count (`SO_RXQ_OVFL`, 24) and an arrival time (`SO_TIMESTAMPNS`, 32), aligned as cmsg(3) requires.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(super) struct RecvControl([u8; 96]);

/// One datagram to send: its bytes, its destination and, when `from` is set, the local address it
/// leaves from (which the host must own, of `to`'s family), whatever the socket is bound to.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub bytes: &'a [u8],
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
}

/// One datagram a [`RecvBatch::recv`] took: its bytes (cut to the batch's buffer size when
/// `truncated`), its sender, the local address it was sent to (`None` when the socket does not ask
/// for packet info), the socket's count of datagrams the kernel dropped so far for want of room
/// (`None` unless [`crate::netsys::count_drops`] turned it on) and when the kernel received it (`None`
/// unless [`crate::netsys::stamp_arrivals`] turned it on).
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub bytes: &'a [u8],
    pub peer: SocketAddr,
    pub destination: Option<IpAddr>,
    pub dropped: Option<u32>,
    pub arrived: Option<SystemTime>,
    pub truncated: bool,
}

/// What a datagram's control messages said: the local address it was sent to, the socket's drop
/// count and the time the kernel received it, each when present.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Ancillary {
    pub destination: Option<IpAddr>,
    pub dropped: Option<u32>,
    pub arrived: Option<SystemTime>,
}

impl<'a> Received<'a> {
    /// A datagram's parts as a receive found them: its control messages read into [`Ancillary`].
    pub(super) fn new(
        bytes: &'a [u8],
        peer: SocketAddr,
        ancillary: Ancillary,
        truncated: bool,
    ) -> Received<'a> {
        let Ancillary {
            destination,
            dropped,
            arrived,
        } = ancillary;
        Received {
            bytes,
            peer,
            destination,
            dropped,
            arrived,
            truncated,
        }
    }
}

/// What the kernel said of one received datagram (its bytes stay in the batch's buffer).
#[derive(Debug, Clone, Copy)]
struct Meta {
    len: usize,
    peer: SocketAddr,
    ancillary: Ancillary,
    truncated: bool,
}

/// Reusable room for up to `n` datagrams of `size` bytes each, filled by [`RecvBatch::recv`]. The
/// buffers are allocated zeroed (untouched pages cost no memory until a datagram lands in them).
pub struct RecvBatch {
    size: usize,
    bufs: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<RecvControl>,
    iovs: Vec<libc::iovec>,
    /// Built once by [`RecvBatch::new`], pointing into `bufs`, `names`, `controls` and `iovs`.
    hdrs: Vec<libc::mmsghdr>,
    got: Vec<Meta>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into this value's own heap buffers, which
// move with it (a move of the struct does not move what its Vecs hold) and are never shared.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `n` datagrams (1 ..= [`BATCH_MAX`]) of up to `size` bytes (at least 1) each.
    pub fn new(n: usize, size: usize) -> RecvBatch {
        let n = n.clamp(1, BATCH_MAX);
        let size = size.max(1);
        let mut b = RecvBatch {
            size,
            bufs: vec![0; n * size],
            // SAFETY: plain data; all-zero is valid.
            names: vec![unsafe { zeroed() }; n],
            controls: vec![RecvControl([0; 96]); n],
            // SAFETY: plain data; all-zero is valid (the pointers are set below).
            iovs: vec![unsafe { zeroed() }; n],
            hdrs: vec![unsafe { zeroed() }; n],
            got: Vec::with_capacity(n),
        };
        for i in 0..n {
            b.iovs[i] = libc::iovec {
                iov_base: b.bufs[i * size..].as_mut_ptr().cast(),
                iov_len: size,
            };
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_name = (&mut b.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = b.controls[i].0.as_mut_ptr().cast();
        }
        b
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
        // The kernel shortens these to what it wrote: each call gives back the full room.
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = size_of::<RecvControl>() as _;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: the `n` headers point at this batch's buffers, addresses and control room, each with
        // its length (set in `new`); none moves or is read elsewhere during the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE as _,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        for h in &self.hdrs[..r as usize] {
            let len = h.msg_len as usize;
            let m = &h.msg_hdr;
            // SAFETY: the kernel filled `msg_name` with `msg_namelen` bytes of a socket address.
            let peer = unsafe { socket_addr(&*m.msg_name.cast(), m.msg_namelen) };
            // SAFETY: the kernel filled `msg_control` within `msg_controllen`.
            let ancillary = unsafe { control(m) };
            self.got.push(Meta {
                len: len.min(self.size),
                // A UDP socket always names the sender; a family we do not read is "unspecified".
                peer: peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
                ancillary,
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
        Received::new(
            &self.bufs[i * self.size..i * self.size + m.len],
            m.peer,
            m.ancillary,
            m.truncated,
        )
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
pub(super) unsafe fn socket_addr(
    s: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
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

/// The local address a received datagram was sent to (its packet-info control message), the
/// socket's drop count (its `SO_RXQ_OVFL` message) and its arrival time (`SCM_TIMESTAMPNS`), each
/// when present.
///
/// # Safety
/// `m`'s control buffer was filled by the kernel within `msg_controllen`.
unsafe fn control(m: &libc::msghdr) -> Ancillary {
    let mut a = Ancillary::default();
    let mut c = libc::CMSG_FIRSTHDR(m);
    while !c.is_null() {
        match ((*c).cmsg_level, (*c).cmsg_type) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                if let Some(info) = cmsg_data::<libc::in_pktinfo>(c) {
                    let ip = Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr));
                    a.destination = Some(IpAddr::V4(ip));
                }
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                if let Some(info) = cmsg_data::<libc::in6_pktinfo>(c) {
                    a.destination = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
                }
            }
            (libc::SOL_SOCKET, crate::netsys::SO_RXQ_OVFL) => {
                if let Some(n) = cmsg_data::<u32>(c) {
                    a.dropped = Some(n);
                }
            }
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                if let Some(t) = cmsg_data::<libc::timespec>(c) {
                    let since = Duration::new(t.tv_sec as u64, t.tv_nsec as u32);
                    a.arrived = Some(UNIX_EPOCH + since);
                }
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(m, c);
    }
    a
}

/// The `T` a control message carries, unless the kernel cut the message short (too little room:
/// MSG_CTRUNC), which is then not read past its end.
///
/// # Safety
/// `c` points at a control message header the kernel wrote, within its control buffer.
unsafe fn cmsg_data<T>(c: *const libc::cmsghdr) -> Option<T> {
    #[allow(clippy::unnecessary_cast)] // usize on glibc, u32 on musl
    let len = (*c).cmsg_len as usize;
    let whole = len >= libc::CMSG_LEN(size_of::<T>() as u32) as usize;
    whole.then(|| std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<T>()))
}

/// What `control`, control messages the kernel wrote (aligned as a `cmsghdr`), says, as [`control`]
/// reads them.
pub(super) fn control_of(control_bytes: &[u8]) -> Ancillary {
    if control_bytes.len() < size_of::<libc::cmsghdr>()
        || control_bytes
            .as_ptr()
            .align_offset(std::mem::align_of::<libc::cmsghdr>())
            != 0
    {
        return Ancillary::default();
    }
    // SAFETY: plain data; all-zero is valid.
    let mut m: libc::msghdr = unsafe { zeroed() };
    m.msg_control = control_bytes.as_ptr() as *mut libc::c_void;
    m.msg_controllen = control_bytes.len() as _;
    // SAFETY: the control buffer is the kernel's, aligned and `msg_controllen` long; only read.
    unsafe { control(&m) }
}

/// A destination as the kernel reads it: IPv4 or IPv6, by its family field.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

/// `a` as the kernel reads it, with its length.
pub(super) fn raw_addr(a: SocketAddr) -> (RawAddr, libc::socklen_t) {
    match a {
        SocketAddr::V4(a) => {
            // SAFETY: plain data; all-zero is valid.
            let mut v4: libc::sockaddr_in = unsafe { zeroed() };
            v4.sin_family = libc::AF_INET as libc::sa_family_t;
            v4.sin_port = a.port().to_be();
            v4.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            (RawAddr { v4 }, len)
        }
        SocketAddr::V6(a) => {
            // SAFETY: plain data; all-zero is valid.
            let mut v6: libc::sockaddr_in6 = unsafe { zeroed() };
            v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            v6.sin6_port = a.port().to_be();
            v6.sin6_addr.s6_addr = a.ip().octets();
            v6.sin6_flowinfo = a.flowinfo();
            v6.sin6_scope_id = a.scope_id();
            let len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            (RawAddr { v6 }, len)
        }
    }
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

/// One `sendmmsg` of at most [`BATCH_MAX`] datagrams. Only the entries sent are written (the rest of
/// each array stays uninitialised): a batch of one costs what one datagram needs.
fn send_chunk(sock: &UdpSocket, msgs: &[Outgoing<'_>]) -> io::Result<usize> {
    let n = msgs.len().min(BATCH_MAX);
    if n == 0 {
        return Ok(0);
    }
    let mut names = [MaybeUninit::<RawAddr>::uninit(); BATCH_MAX];
    let mut controls = [MaybeUninit::<Control>::uninit(); BATCH_MAX];
    let mut iovs = [MaybeUninit::<libc::iovec>::uninit(); BATCH_MAX];
    let mut hdrs = [MaybeUninit::<libc::mmsghdr>::uninit(); BATCH_MAX];
    for (i, m) in msgs[..n].iter().enumerate() {
        let (name, len) = raw_addr(m.to);
        let name = names[i].write(name);
        let iov = iovs[i].write(libc::iovec {
            iov_base: m.bytes.as_ptr() as *mut libc::c_void,
            iov_len: m.bytes.len(),
        });
        // SAFETY: plain data; all-zero is valid.
        let hdr = hdrs[i].write(unsafe { zeroed() });
        let h = &mut hdr.msg_hdr;
        h.msg_name = (name as *mut RawAddr).cast();
        h.msg_namelen = len;
        h.msg_iov = iov;
        h.msg_iovlen = 1;
        if let Some(from) = m.from {
            let control = controls[i].write(Control([0; 64]));
            h.msg_control = control.0.as_mut_ptr().cast();
            h.msg_controllen = size_of::<Control>() as _;
            // SAFETY: `msg_control` points at `control`, 64 bytes ≥ CMSG_SPACE(20).
            unsafe { put_source(h, from) };
        }
    }
    // SAFETY: the first `n` headers are initialised and point at this frame's initialised addresses,
    // iovecs and control messages and at the callers' bytes (which sendmmsg only reads), each with its
    // length; `MaybeUninit<T>` has `T`'s layout.
    let r = unsafe {
        libc::sendmmsg(
            sock.as_raw_fd(),
            hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
            n as libc::c_uint,
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

#[cfg(test)]
mod tests;
