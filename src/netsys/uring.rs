//! Thousands of UDP sockets served in one system call a batch: a [`UdpRing`] keeps a multishot
//! `recvmsg` armed on every socket it watches (io_uring), each datagram landing in a buffer of the
//! ring's own pool with its sender and the socket's drop count, and queues answers as `sendmsg`
//! requests. One `io_uring_enter` then submits every queued answer and waits for the next requests,
//! whichever sockets they came to: where `epoll` pays a wait, a receive and a send a socket, the ring
//! pays one call a batch. Per-port SNMP serving uses it; [`probe`] tells whether this kernel can
//! (multishot `recvmsg`, provided buffer rings, deferred task work: Linux 6.1), so the caller falls
//! back to `epoll`.
//!
//! Memory the kernel writes or reads after a call returns is owned here and never moves: the buffer
//! ring and its buffers (one anonymous mapping, so only the pages datagrams touched cost: about 1 MiB
//! a ring once every buffer has been used), the receive header template (boxed), and the send slots (a
//! boxed slice; a slot is reused only after its completion). Dropping the ring on its issuing thread
//! cancels every request and waits for the cancellation before any of that memory is freed; dropped
//! elsewhere, or when the cancellation fails, the memory is leaked rather than freed under the kernel.
#![allow(unsafe_code)]

use super::batch::{control_of, raw_addr, socket_addr, RawAddr, Received, RecvControl};
use io_uring::types::{CancelBuilder, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Buffers in the pool (a power of two): the datagrams the kernel can land before the thread reaps
/// them. When they run out, a socket's receive ends (its datagrams wait in the socket) and is re-armed.
const BUFS: u16 = 256;
/// One buffer: the receive header (16 bytes), the sender's address, the control room, and a whole UDP
/// datagram (65 535 bytes at most), so nothing is cut short. Only the pages a datagram touches cost.
const BUF_SIZE: usize = 16 + NAME_LEN + CONTROL_LEN + 65_536;
const NAME_LEN: usize = size_of::<libc::sockaddr_storage>();
/// Room for a datagram's control messages, as a [`RecvBatch`](super::RecvBatch) has.
const CONTROL_LEN: usize = size_of::<RecvControl>();
/// Answers in flight at once; past that an answer goes by a plain send (the caller's).
const SEND_SLOTS: usize = 512;
const SQ_ENTRIES: u32 = 1024;
const CQ_ENTRIES: u32 = 8192;
const GROUP: u16 = 0;
const TAG_SEND: u64 = 1 << 62;
const TAG_WAKE: u64 = 1 << 63;
const PAGE: usize = 4096;

/// What a [`UdpRing::drain`] found.
#[derive(Debug)]
pub enum Event<'a> {
    /// A datagram came to socket `token` (its index in the ring's list).
    Datagram { token: usize, got: Received<'a> },
    /// The answer queued with `tag` left (`ok`) or was refused by the kernel.
    Sent { tag: usize, ok: bool },
    /// Socket `token`'s receive failed [`GIVE_UP_AFTER`] times in a row without a datagram (`error`,
    /// the last failure): it is no longer armed, so a broken socket cannot keep the thread spinning.
    Broken { token: usize, error: io::Error },
}

/// Failures in a row after which a socket's receive is no longer armed again.
pub const GIVE_UP_AFTER: u8 = 3;

/// The provided buffers: the ring of entries the kernel takes buffers from, and the buffers, in one
/// anonymous mapping (page-aligned, zero pages until written: a buffer costs the pages its datagrams
/// touched).
struct Pool {
    base: *mut u8,
    entries: *mut types::BufRingEntry,
    bufs: *mut u8,
    tail: u16,
}

impl Pool {
    /// The entry ring's room, in whole pages (the buffers start page-aligned after it).
    const ENTRIES_ROOM: usize =
        (BUFS as usize * size_of::<types::BufRingEntry>()).div_ceil(PAGE) * PAGE;
    const SIZE: usize = Self::ENTRIES_ROOM + BUFS as usize * BUF_SIZE;

    fn new() -> io::Result<Pool> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is named.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        Ok(Pool {
            base,
            entries: base.cast(),
            // SAFETY: inside the mapping (ENTRIES_ROOM < SIZE).
            bufs: unsafe { base.add(Self::ENTRIES_ROOM) },
            tail: 0,
        })
    }

    /// A pool that owns nothing (what a leaked pool is replaced by).
    fn empty() -> Pool {
        Pool {
            base: std::ptr::null_mut(),
            entries: std::ptr::null_mut(),
            bufs: std::ptr::null_mut(),
            tail: 0,
        }
    }

    /// Hands buffer `bid` (back) to the kernel; seen once [`Pool::publish`] moves the tail.
    fn give(&mut self, bid: u16) {
        let at = (self.tail & (BUFS - 1)) as usize;
        // SAFETY: `at` < BUFS entries; the kernel reads an entry only once the published tail passes
        // it, and the tail (entry 0's reserved field) is not touched by the setters.
        let e = unsafe { &mut *self.entries.add(at) };
        e.set_addr(self.bufs as u64 + bid as u64 * BUF_SIZE as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is a u16 inside the page-aligned entry array, shared with the kernel, which
        // reads it with acquire ordering.
        let tail = unsafe { &*types::BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, as the kernel wrote them.
    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let bid = (bid % BUFS) as usize;
        // SAFETY: inside the pool's allocation; the kernel wrote these bytes before posting the
        // completion, and does not write this buffer again until it is given back.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * BUF_SIZE), len.min(BUF_SIZE)) }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: the mapping made in `new`, unmapped once; the ring that used it let go of it
            // first (UdpRing's drop leaks the pool instead when it could not make sure of that).
            unsafe { libc::munmap(self.base.cast(), Self::SIZE) };
        }
    }
}

/// One answer in flight: what its `sendmsg` points at, kept until its completion.
struct SendSlot {
    name: RawAddr,
    iov: libc::iovec,
    hdr: libc::msghdr,
    bytes: Vec<u8>,
    tag: usize,
}

/// A ring serving a list of UDP sockets (see the module doc).
pub struct UdpRing {
    // Dropped first, after `Drop` cancelled every request (or leaked the memory below).
    ring: IoUring,
    fds: Vec<RawFd>,
    wake: RawFd,
    started: bool,
    /// The thread that enabled the ring: only it may cancel and unregister (SINGLE_ISSUER).
    issuer: Option<std::thread::ThreadId>,
    /// Each socket's receive failures in a row.
    failures: Vec<u8>,
    recv_hdr: Box<libc::msghdr>,
    pool: Pool,
    slots: Box<[SendSlot]>,
    free: Vec<usize>,
    rearm: Vec<usize>,
}

// SAFETY: the raw pointers point only into memory this value owns (the pool, the boxed header and
// slots), which moves with it and is used by one thread at a time.
unsafe impl Send for UdpRing {}

impl std::fmt::Debug for UdpRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UdpRing({} sockets)", self.fds.len())
    }
}

impl UdpRing {
    /// A ring watching `sockets` (token *i* for `sockets[i]`, which must outlive the ring) and `wake`,
    /// a descriptor that becomes readable to end a [`UdpRing::wait`] (a stop).
    pub fn new(sockets: &[&UdpSocket], wake: RawFd) -> io::Result<UdpRing> {
        // Single issuer with deferred task work: the kernel runs the receives' completions when the
        // serving thread waits, in one go, instead of interrupting it per datagram. The ring starts
        // disabled, so the thread that will serve (not the one building it) becomes its issuer.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_r_disabled()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)?;
        let mut pool = Pool::new()?;
        // SAFETY: the entry array is page-aligned, BUFS entries long, and outlives the registration
        // (the ring is dropped first).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(pool.entries as u64, BUFS, GROUP, 0)?
        };
        for bid in 0..BUFS {
            pool.give(bid);
        }
        pool.publish();
        // SAFETY: plain data; all-zero is valid.
        let mut recv_hdr: Box<libc::msghdr> = Box::new(unsafe { zeroed() });
        recv_hdr.msg_namelen = NAME_LEN as libc::socklen_t;
        recv_hdr.msg_controllen = CONTROL_LEN as _;
        let slots = (0..SEND_SLOTS)
            .map(|_| SendSlot {
                // SAFETY: plain data; all-zero is valid.
                name: unsafe { zeroed() },
                iov: libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                },
                hdr: unsafe { zeroed() },
                bytes: Vec::new(),
                tag: 0,
            })
            .collect();
        Ok(UdpRing {
            ring,
            fds: sockets.iter().map(|s| s.as_raw_fd()).collect(),
            wake,
            started: false,
            issuer: None,
            failures: vec![0; sockets.len()],
            recv_hdr,
            pool,
            slots,
            free: (0..SEND_SLOTS).rev().collect(),
            rearm: Vec::new(),
        })
    }

    /// Enables the ring on the calling thread, which becomes its issuer (the serving thread calls it
    /// before it serves; the first [`UdpRing::wait`] does otherwise), and arms every socket's receive
    /// and the wake-up. An error leaves the ring unusable: the caller serves another way.
    pub fn start(&mut self) -> io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.ring.submitter().register_enable_rings()?;
        self.issuer = Some(std::thread::current().id());
        // Registered descriptors: no file lookup and reference count per receive and send (8 % of a
        // saturated serving thread's time, measured).
        self.ring.submitter().register_files(&self.fds)?;
        for token in 0..self.fds.len() {
            self.arm(token)?;
        }
        let poll = opcode::PollAdd::new(types::Fd(self.wake), libc::POLLIN as u32)
            .build()
            .user_data(TAG_WAKE);
        self.push(poll)?;
        self.started = true;
        Ok(())
    }

    /// Queues `e`, submitting what is queued first when the submission queue is full.
    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry queued here points at memory this ring owns and keeps until the
            // entry's completion (or the ring's cancellation at drop).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// Arms the multishot receive of socket `token`.
    fn arm(&mut self, token: usize) -> io::Result<()> {
        let e = opcode::RecvMsgMulti::new(types::Fixed(token as u32), &*self.recv_hdr, GROUP)
            .build()
            .user_data(token as u64);
        self.push(e)
    }

    /// Submits what is queued (the answers) and waits until something completes or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.start()?;
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Hands every completion to `f`: each datagram (its bytes valid only during the call, its buffer
    /// given back after) and each answer sent or refused. A receive that ended is armed again (the
    /// pool ran dry: its datagrams wait in the socket), unless it failed [`GIVE_UP_AFTER`] times in a
    /// row ([`Event::Broken`]); the wake-up is not (it means stop).
    pub fn drain(&mut self, mut f: impl FnMut(Event<'_>)) -> io::Result<()> {
        let UdpRing {
            ring,
            recv_hdr,
            pool,
            slots,
            free,
            rearm,
            failures,
            ..
        } = self;
        for cqe in ring.completion() {
            let (ud, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            if ud == TAG_WAKE {
                continue;
            }
            if ud & TAG_SEND != 0 {
                let slot = (ud & !TAG_SEND) as usize;
                let s = &mut slots[slot];
                s.bytes = Vec::new();
                free.push(slot);
                f(Event::Sent {
                    tag: s.tag,
                    ok: res >= 0,
                });
                continue;
            }
            let token = ud as usize;
            if res >= 0 || res == -libc::ENOBUFS {
                failures[token] = 0;
            } else {
                failures[token] = failures[token].saturating_add(1);
            }
            if let Some(bid) = cqueue::buffer_select(flags) {
                if res >= 0 {
                    if let Ok(out) = types::RecvMsgOut::parse(pool.buf(bid, res as usize), recv_hdr)
                    {
                        f(Event::Datagram {
                            token,
                            got: received(&out),
                        });
                    }
                }
                pool.give(bid);
            }
            if !cqueue::more(flags) {
                if failures[token] < GIVE_UP_AFTER {
                    rearm.push(token);
                } else {
                    f(Event::Broken {
                        token,
                        error: io::Error::from_raw_os_error(-res),
                    });
                }
            }
        }
        pool.publish();
        while let Some(token) = self.rearm.pop() {
            if let Err(e) = self.arm(token) {
                self.rearm.push(token); // armed by the next drain
                return Err(e);
            }
        }
        Ok(())
    }

    /// Queues `bytes` to `to` on socket `token`, to leave with the next [`UdpRing::wait`]; its
    /// completion comes back as [`Event::Sent`] with `tag`. Hands the bytes back when every slot is in
    /// flight or the queue refused it (the caller sends them itself).
    pub fn send(
        &mut self,
        token: usize,
        bytes: Vec<u8>,
        to: SocketAddr,
        tag: usize,
    ) -> Result<(), Vec<u8>> {
        let Some(slot) = self.free.pop() else {
            return Err(bytes);
        };
        let s = &mut self.slots[slot];
        let (name, len) = raw_addr(to);
        s.name = name;
        s.bytes = bytes;
        s.iov = libc::iovec {
            iov_base: s.bytes.as_ptr() as *mut libc::c_void,
            iov_len: s.bytes.len(),
        };
        // SAFETY: plain data; all-zero is valid.
        s.hdr = unsafe { zeroed() };
        s.hdr.msg_name = (&mut s.name as *mut RawAddr).cast();
        s.hdr.msg_namelen = len;
        s.hdr.msg_iov = &mut s.iov;
        s.hdr.msg_iovlen = 1;
        s.tag = tag;
        let e = opcode::SendMsg::new(types::Fixed(token as u32), &s.hdr)
            .build()
            .user_data(TAG_SEND | slot as u64);
        if self.push(e).is_err() {
            let s = &mut self.slots[slot];
            self.free.push(slot);
            return Err(std::mem::take(&mut s.bytes));
        }
        Ok(())
    }
}

impl Drop for UdpRing {
    fn drop(&mut self) {
        // Every request ends before the memory it points at is freed (the fields drop after this).
        // Only the issuer may cancel: dropped elsewhere, or when the cancellation did not finish, the
        // pool and the send slots are leaked rather than freed under the kernel.
        // A ring never enabled (no issuer) never took a request, even one `start` queued.
        let cancelled = match self.issuer {
            None => true,
            Some(id) => {
                id == std::thread::current().id()
                    && self
                        .ring
                        .submitter()
                        .register_sync_cancel(
                            Some(Timespec::from(Duration::from_secs(1))),
                            CancelBuilder::any(),
                        )
                        .is_ok()
            }
        };
        if cancelled {
            let _ = self.ring.submitter().unregister_buf_ring(GROUP);
        } else {
            let pool = std::mem::replace(&mut self.pool, Pool::empty());
            std::mem::forget(pool);
            std::mem::forget(std::mem::take(&mut self.slots));
            // SAFETY: plain data; all-zero is valid.
            let hdr = std::mem::replace(&mut self.recv_hdr, Box::new(unsafe { zeroed() }));
            Box::leak(hdr);
        }
    }
}

/// A parsed receive as the module's [`Received`]: bytes, sender, drop count.
fn received<'o>(out: &'o types::RecvMsgOut<'_>) -> Received<'o> {
    let (name, control, payload) = (out.name_data(), out.control_data(), out.payload_data());
    // SAFETY: plain data; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let n = name.len().min(NAME_LEN);
    // SAFETY: `n` bytes fit in both.
    unsafe {
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            n,
        )
    };
    // SAFETY: `storage` holds the `n` bytes of the sender's address the kernel wrote.
    let peer = unsafe { socket_addr(&storage, n as libc::socklen_t) };
    Received::new(
        payload,
        peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        control_of(control),
        out.is_payload_truncated(),
    )
}

/// Whether this kernel serves UDP through a [`UdpRing`]: one datagram sent to a loopback socket must
/// come back through the ring within a second. The reason when not (an old kernel, io_uring disabled
/// by `kernel.io_uring_disabled` or a seccomp filter).
///
/// It runs on a thread of its own: tearing a ring down can leave the kernel's last work for the ring
/// on the thread that issued it, which interrupts that thread's next blocking call (`EINTR` from a
/// `recv` with a timeout: `fleet_notify`'s in-process fleet failed so, every run), so the caller's
/// thread never issues.
pub fn probe() -> Result<(), Unavailable> {
    std::thread::Builder::new()
        .name("io-uring-probe".into())
        .spawn(probe_here)
        .map_err(Unavailable::NoThread)?
        .join()
        .unwrap_or(Err(Unavailable::Panicked))
}

/// Why this kernel does not serve UDP through a [`UdpRing`] ([`probe`]).
#[derive(Debug)]
pub enum Unavailable {
    /// No thread could be spawned for the probe.
    NoThread(io::Error),
    Panicked,
    /// The ring took the socket but the datagram never came through it.
    Silent,
    /// A call of the probe failed (`ENOSYS`, `EPERM`: io_uring absent or disabled).
    Call(io::Error),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoThread(e) => write!(f, "no thread for the probe: {e}"),
            Unavailable::Panicked => f.write_str("the probe panicked"),
            Unavailable::Silent => {
                f.write_str("a datagram sent to the probe socket never came through the ring")
            }
            Unavailable::Call(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Unavailable {}

fn probe_here() -> Result<(), Unavailable> {
    let try_it = || -> io::Result<bool> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        sock.set_nonblocking(true)?;
        let (_wake_tx, wake_rx) = std::os::unix::net::UnixDatagram::pair()?;
        let mut ring = UdpRing::new(&[&sock], wake_rx.as_raw_fd())?;
        let peer = UdpSocket::bind("127.0.0.1:0")?;
        peer.send_to(b"nl6 io_uring probe", sock.local_addr()?)?;
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut seen = false;
        while !seen && Instant::now() < deadline {
            ring.wait(Duration::from_millis(100))?;
            ring.drain(|e| {
                if let Event::Datagram { got, .. } = e {
                    seen |= got.bytes == b"nl6 io_uring probe";
                }
            })?;
        }
        Ok(seen)
    };
    match try_it() {
        Ok(true) => Ok(()),
        Ok(false) => Err(Unavailable::Silent),
        Err(e) => Err(Unavailable::Call(e)),
    }
}

#[cfg(test)]
mod tests;
