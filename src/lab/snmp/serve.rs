//! The SNMP serving threads: a fixed few plain OS threads ([`SERVING_THREADS`] at most, labelled `snmp`
//! from birth) answer every device, whatever `-devices` is. Each waits on its share of the sockets in
//! one of two ways ([`Watch`]), so a wake-up costs in proportion to what is ready, not to the thousands
//! of sockets a per-port thread watches:
//!
//! - an io_uring ([`UdpRing`], per port, where the kernel allows it: `-snmp-io`): every socket keeps a
//!   receive armed, and one system call sends the answers queued since the last and waits for the next
//!   requests, whichever sockets they came to; as many threads as cores (at most four);
//! - an `epoll(7)` set (`-device-net`, or per port without a ring): a ready socket is read once per
//!   wake-up with `recvmmsg` (every request waiting, up to [`BATCH`]) and its answers leave in one
//!   `sendmmsg`, each from the address that was asked ([`crate::netsys::batch`]).
//!
//! What the kernel dropped at a socket's full receive buffer (a thread off the CPU under load) is not
//! lost silently: each socket reports its drops (`SO_RXQ_OVFL`) with the next request it queues, and
//! they are added up, before that request is answered, into the fleet's count (`snmp_kernel_drops` at
//! `GET /api/v1/fleet`, beside `snmp_io`, which says which way serves).
//!
//! Two ways to listen ([`Listener`]):
//! - per port (`-snmp-port BASE` or `0`): one socket per device, dealt round robin over the threads
//!   ([`groups`]);
//! - `-device-net CIDR`: one socket per thread, all on the same port (`SO_REUSEPORT`, bound to the
//!   wildcard address with `IP_PKTINFO`): the destination of each request names the device, and the
//!   answer leaves from that address ([`crate::netsys`]). Datagrams to addresses outside the fleet's
//!   range are dropped unanswered.
//!
//! The wake-up socket is never read: one byte written at stop leaves it readable, so every thread's
//! next wait returns at once and sees the stop flag.
#![forbid(unsafe_code)]

use super::super::device::{Device, DeviceCounters};
use super::super::device_net::DeviceNet;
use super::super::send::{send_from_retrying, send_retrying};
use super::respond;
use crate::netsys::uring::{Event, UdpRing};
use crate::netsys::{Outgoing, RecvBatch};
use crate::ready::{Epoll, Events};
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most serving threads a fleet runs, whatever its size.
pub const SERVING_THREADS: usize = 4;

/// How many threads serve: [`SERVING_THREADS`], but no more than the machine's cores when a ring
/// serves, since one ring answers any number of sockets and a thread beyond the cores only adds
/// context switches (per port, 10 000 devices, 2 cores: 2 threads answered 1.2× the GET/s of 4).
pub fn threads(ring: bool) -> usize {
    if !ring {
        return SERVING_THREADS;
    }
    let cores = std::thread::available_parallelism().map_or(SERVING_THREADS, |n| n.get());
    SERVING_THREADS.min(cores)
}
/// Datagrams taken from one socket by one receive (and answered by one send) before the thread looks at
/// its other ready sockets.
const BATCH: usize = 32;
/// The longest a serving thread waits before it looks at the stop flag when nothing wakes it: only a
/// backstop, as stop wakes every thread through the [`Waker`].
const WAIT_TIMEOUT: Duration = Duration::from_secs(2);
/// Ready sockets taken from one wait; more stay ready (level-triggered) for the next.
const EVENTS: usize = 256;

/// Which device a socket's datagrams are for.
#[derive(Debug)]
pub enum Route {
    /// Every datagram is for device `index`.
    Device(usize),
    /// The datagram's destination address names the device in this range.
    Net(DeviceNet),
}

/// A bound SNMP socket and the devices it answers for.
#[derive(Debug)]
pub struct Listener {
    pub socket: UdpSocket,
    pub route: Route,
}

/// What every serving thread reads.
pub struct Serving<'a> {
    pub devices: &'a [Arc<Device>],
    pub community: &'a [u8],
    pub stop: &'a AtomicBool,
    /// Where the requests the kernel dropped at these sockets' full buffers are added up.
    pub kernel_drops: &'a AtomicU64,
}

/// A stop signal for the serving threads: [`Waker::wake`] makes every thread's wait return.
#[derive(Debug)]
pub struct Waker {
    tx: UnixDatagram,
    rx: UnixDatagram,
}

impl Waker {
    pub fn new() -> std::io::Result<Waker> {
        let (tx, rx) = UnixDatagram::pair()?;
        tx.set_nonblocking(true)?;
        Ok(Waker { tx, rx })
    }
    /// Leaves the shared socket readable for good: every serving thread wakes.
    pub fn wake(&self) {
        let _ = self.tx.send(&[1]);
    }
    /// A serving thread's own handle on the shared socket, to wait on (cloned before the thread starts,
    /// so a failed clone stops startup instead of leaving a thread that serves nothing).
    pub fn watcher(&self) -> std::io::Result<UnixDatagram> {
        self.rx.try_clone()
    }
}

/// Splits `listeners` into at most `threads` groups, dealt round robin: with 2 threads, devices 0, 2,
/// 4 … on one and 1, 3, 5 … on the other, so any poller's requests spread over every thread (a split
/// into runs of consecutive devices was measured and left: ARCHITECTURE.md).
pub fn groups(listeners: Vec<Listener>, threads: usize) -> Vec<Vec<Listener>> {
    let n = listeners.len().min(threads.max(1));
    let mut out: Vec<Vec<Listener>> = (0..n).map(|_| Vec::new()).collect();
    for (i, l) in listeners.into_iter().enumerate() {
        out[i % n].push(l);
    }
    out
}

/// How a serving thread waits for its group's sockets: an `epoll(7)` set (its group's sockets, token
/// *i* for `group[i]`, and the wake-up socket, token `group.len()`), or, per port, a
/// [`UdpRing`] that receives and answers for all of them at once. Either keeps its handle on the
/// wake-up socket open, since a closed descriptor leaves the set.
#[derive(Debug)]
pub enum Watch {
    Epoll {
        set: Epoll,
        _wake: UnixDatagram,
    },
    Ring {
        ring: Box<UdpRing>,
        _wake: UnixDatagram,
    },
}

/// Builds `group`'s [`Watch`] with `wake` (from [`Waker::watcher`]) before the thread starts, so a
/// refusal (the descriptor limit) stops startup: a ring when `ring` and the group is per port
/// (`-device-net`'s shared sockets batch through `recvmmsg` already), else an epoll set.
pub fn watch(group: &[Listener], wake: UnixDatagram, ring: bool) -> std::io::Result<Watch> {
    if ring && group.iter().all(|l| matches!(l.route, Route::Device(_))) {
        let sockets: Vec<&UdpSocket> = group.iter().map(|l| &l.socket).collect();
        let ring = Box::new(UdpRing::new(&sockets, wake.as_raw_fd())?);
        return Ok(Watch::Ring { ring, _wake: wake });
    }
    Ok(Watch::Epoll {
        set: epoll_set(group, &wake)?,
        _wake: wake,
    })
}

/// An epoll set over `group`'s sockets (token *i* for `group[i]`) and `wake` (token `group.len()`).
fn epoll_set(group: &[Listener], wake: &UnixDatagram) -> std::io::Result<Epoll> {
    let set = Epoll::new()?;
    for (i, l) in group.iter().enumerate() {
        set.add_readable(l.socket.as_raw_fd(), i as u64)?;
    }
    set.add_readable(wake.as_raw_fd(), group.len() as u64)?;
    Ok(set)
}

/// One serving thread's loop: waits for any of `group`'s sockets in `watch` (from [`watch`]), answers
/// what arrived, until stop (its wake-up socket becomes readable at stop).
pub fn run(serving: &Serving<'_>, group: &[Listener], watch: Watch) {
    crate::lab::probe!("snmp.loop");
    match watch {
        Watch::Epoll { set, _wake } => run_epoll(serving, group, &set),
        Watch::Ring {
            mut ring,
            _wake: wake,
        } => match ring.start() {
            Ok(()) => run_ring(serving, group, &mut ring),
            // The probe passed, so this is rare (a limit reached meanwhile): said, and served anyway.
            Err(e) => {
                eprintln!("nl6: an SNMP serving thread's io_uring did not start ({e}); it serves by epoll");
                drop(ring);
                match epoll_set(group, &wake) {
                    Ok(set) => run_epoll(serving, group, &set),
                    Err(e) => eprintln!("nl6: an SNMP serving thread serves nothing: epoll: {e}"),
                }
            }
        },
    }
}

fn run_epoll(serving: &Serving<'_>, group: &[Listener], set: &Epoll) {
    let mut events = Events::with_capacity(EVENTS);
    let mut batch = RecvBatch::new(BATCH, 65_535);
    let mut replies = Vec::with_capacity(BATCH);
    // Each socket's drop count as last reported (the kernel's count is the socket's running total).
    let mut drops_seen = vec![0u32; group.len()];
    while !serving.stop.load(Ordering::Relaxed) {
        if set.wait(&mut events, WAIT_TIMEOUT).is_err() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        for token in events.tokens() {
            match group.get(token as usize) {
                Some(l) if !serving.stop.load(Ordering::Relaxed) => {
                    let seen = &mut drops_seen[token as usize];
                    answer(serving, l, &mut batch, &mut replies, seen)
                }
                _ => {} // the wake-up socket, or stopping: the loop's test sees the flag
            }
        }
    }
}

/// The per-port loop over a [`UdpRing`]: each wait sends the answers queued since the last and
/// returns with the next requests, whichever of the group's sockets they came to; an answer is counted
/// on its device when the kernel took it (or refused it).
fn run_ring(serving: &Serving<'_>, group: &[Listener], ring: &mut UdpRing) {
    let mut drops_seen = vec![0u32; group.len()];
    let mut replies: Vec<(usize, Vec<u8>, SocketAddr)> = Vec::new();
    let device_of = |token: usize| match group[token].route {
        Route::Device(i) => i,
        Route::Net(_) => unreachable!("a ring serves per-port sockets only"),
    };
    let count = |token: usize, sent: bool| count_answer(serving, device_of(token), sent);
    while !serving.stop.load(Ordering::Relaxed) {
        let drained = ring.wait(WAIT_TIMEOUT).and_then(|()| {
            ring.drain(|event| match event {
                Event::Datagram { token, got } => {
                    if let Some(total) = got.dropped {
                        add_drops(serving, total, &mut drops_seen[token]);
                    }
                    let device = &serving.devices[device_of(token)];
                    if let Some(bytes) = respond(device, got.bytes, serving.community) {
                        crate::lab::probe!("snmp.reply");
                        replies.push((token, bytes, got.peer));
                    }
                }
                Event::Sent { tag, ok } => count(tag, ok),
                Event::Broken { token, error } => eprintln!(
                    "nl6: SNMP device {}: its socket failed {} receives in a row ({error}); it is no \
                     longer answered",
                    device_of(token),
                    crate::netsys::uring::GIVE_UP_AFTER
                ),
            })
        });
        if drained.is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
        for (token, bytes, to) in replies.drain(..) {
            if let Err(bytes) = ring.send(token, bytes, to, token) {
                count(token, send_retrying(&group[token].socket, &bytes, to));
            }
        }
    }
    // At stop, the answers queued by the last turn still leave, and are counted.
    if ring.wait(Duration::ZERO).is_ok() {
        let _ = ring.drain(|event| {
            if let Event::Sent { tag, ok } = event {
                count(tag, ok)
            }
        });
    }
}

/// Adds what the kernel dropped on a socket since its last batch (the newest datagram carries the
/// socket's running total) to the fleet's count.
fn count_drops(serving: &Serving<'_>, batch: &RecvBatch, seen: &mut u32) {
    if let Some(total) = batch.iter().filter_map(|r| r.dropped).last() {
        add_drops(serving, total, seen);
    }
}

/// Adds a socket's drops since `seen` (its running `total` as last reported) to the fleet's count.
fn add_drops(serving: &Serving<'_>, total: u32, seen: &mut u32) {
    let new = total.wrapping_sub(*seen);
    if new > 0 {
        serving
            .kernel_drops
            .fetch_add(u64::from(new), Ordering::Relaxed);
    }
    *seen = total;
}

/// An answer ready to leave: its bytes, where to, from which address (`-device-net`), for which device.
struct Reply {
    bytes: Vec<u8>,
    to: SocketAddr,
    from: Option<IpAddr>,
    device: usize,
}

/// Answers what waits on the ready socket `l`: one `recvmmsg` (up to [`BATCH`] requests) and the
/// answers in one `sendmmsg`. One receive a readiness event: the set is level-triggered, so a socket
/// left with more is reported again at the next wait, and no receive is spent learning it is empty.
fn answer(
    serving: &Serving<'_>,
    l: &Listener,
    batch: &mut RecvBatch,
    replies: &mut Vec<Reply>,
    drops_seen: &mut u32,
) {
    loop {
        match batch.recv(&l.socket) {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return, // nothing after all (EAGAIN) or a transient error: back to the wait
        }
    }
    // Counted before answering, so whoever sees an answer sees the drops that came before it.
    count_drops(serving, batch, drops_seen);
    replies.clear();
    for r in batch.iter() {
        let (device, from) = match &l.route {
            Route::Device(i) => (*i, None),
            Route::Net(net) => {
                let found = match r.destination {
                    Some(IpAddr::V4(dst)) => net
                        .device_at(dst, serving.devices.len())
                        .map(|i| (i, Some(IpAddr::V4(dst)))),
                    _ => None,
                };
                match found {
                    Some(x) => x,
                    None => continue, // not for one of our addresses: dropped
                }
            }
        };
        if let Some(bytes) = respond(&serving.devices[device], r.bytes, serving.community) {
            crate::lab::probe!("snmp.reply");
            replies.push(Reply {
                bytes,
                to: r.peer,
                from,
                device,
            });
        }
    }
    send_replies(serving, &l.socket, replies);
}

/// Sends `replies` in one `sendmmsg` (a lone answer by one plain send); what the kernel did not take at
/// once (a full buffer, a signal) goes one by one with the single-datagram retries. Each answer is counted on its device: sent or a
/// send error.
fn send_replies(serving: &Serving<'_>, socket: &UdpSocket, replies: &[Reply]) {
    // One answer (a per-port socket's usual lot) goes by the plain send below: no batch to build.
    let batched: &[Reply] = if replies.len() > 1 { replies } else { &[] };
    let out: Vec<Outgoing<'_>> = batched
        .iter()
        .map(|r| Outgoing {
            bytes: &r.bytes,
            to: r.to,
            from: r.from,
        })
        .collect();
    let taken = if out.is_empty() {
        0
    } else {
        crate::netsys::send_batch(socket, &out).unwrap_or(0)
    };
    for (i, r) in replies.iter().enumerate() {
        let sent = i < taken
            || match (r.from, r.to) {
                (Some(IpAddr::V4(from)), SocketAddr::V4(to)) => {
                    send_from_retrying(socket, &r.bytes, to, from)
                }
                _ => send_retrying(socket, &r.bytes, r.to),
            };
        count_answer(serving, r.device, sent);
    }
}

/// Counts an answer on `device`: sent, or a send error.
fn count_answer(serving: &Serving<'_>, device: usize, sent: bool) {
    let counters = &serving.devices[device].counters;
    DeviceCounters::inc(if sent {
        &counters.snmp_responses
    } else {
        &counters.send_errors
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(n: usize) -> Vec<Listener> {
        (0..n)
            .map(|i| Listener {
                socket: UdpSocket::bind("127.0.0.1:0").expect("bind"),
                route: Route::Device(i),
            })
            .collect()
    }

    fn devices(g: &[Listener]) -> Vec<usize> {
        g.iter()
            .map(|l| match l.route {
                Route::Device(i) => i,
                Route::Net(_) => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn devices_are_dealt_round_robin_over_the_threads() {
        for (n, threads) in [(10, 2), (10, 4), (7, 3), (3, 4), (1, 4), (9, 1)] {
            let groups: Vec<Vec<usize>> = groups(listeners(n), threads)
                .iter()
                .map(|g| devices(g))
                .collect();
            assert_eq!(
                groups.len(),
                n.min(threads),
                "{n} devices, {threads} threads"
            );
            for (t, g) in groups.iter().enumerate() {
                let want: Vec<usize> = (t..n).step_by(groups.len()).collect();
                assert_eq!(g, &want, "{n} devices over {threads} threads: {groups:?}");
            }
        }
        assert!(groups(Vec::new(), 4).is_empty());
    }
}
