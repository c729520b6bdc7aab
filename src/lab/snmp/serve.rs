//! The SNMP serving threads: a fixed few plain OS threads ([`SERVING_THREADS`] at most, labelled `snmp`
//! from birth) answer every device, whatever `-devices` is. Each blocks in its own `epoll(7)` set over
//! its share of the sockets and a shared wake-up socket, then drains what is ready without blocking: a
//! wake-up costs in proportion to the sockets that are ready, not to the thousands a per-port thread
//! watches.
//!
//! Two ways to listen ([`Listener`]):
//! - per port (`-snmp-port BASE` or `0`): one socket per device, spread over the threads;
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
use crate::ready::{Epoll, Events};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most serving threads a fleet runs, whatever its size.
pub const SERVING_THREADS: usize = 4;
/// Datagrams read from one socket before the thread looks at its other ready sockets.
const BURST: usize = 32;
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

/// Splits `listeners` into at most [`SERVING_THREADS`] groups (round robin: device i and i + 4 share a
/// thread in per-port mode).
pub fn groups(listeners: Vec<Listener>) -> Vec<Vec<Listener>> {
    let n = listeners.len().min(SERVING_THREADS);
    let mut out: Vec<Vec<Listener>> = (0..n).map(|_| Vec::new()).collect();
    for (i, l) in listeners.into_iter().enumerate() {
        out[i % n].push(l);
    }
    out
}

/// A serving thread's readiness set: its group's sockets (token *i* for `group[i]`) and its handle on
/// the wake-up socket (token `group.len()`), which it keeps open, since a closed descriptor leaves the
/// set.
#[derive(Debug)]
pub struct Watch {
    set: Epoll,
    _wake: UnixDatagram,
}

/// Builds `group`'s [`Watch`] with `wake` (from [`Waker::watcher`]) before the thread starts, so a
/// refusal (the descriptor limit) stops startup.
pub fn watch(group: &[Listener], wake: UnixDatagram) -> std::io::Result<Watch> {
    let set = Epoll::new()?;
    for (i, l) in group.iter().enumerate() {
        set.add_readable(l.socket.as_raw_fd(), i as u64)?;
    }
    set.add_readable(wake.as_raw_fd(), group.len() as u64)?;
    Ok(Watch { set, _wake: wake })
}

/// One serving thread's loop: waits for any of `group`'s sockets in `watch` (from [`watch`]), answers
/// what arrived, until stop (its wake-up socket becomes readable at stop).
pub fn run(serving: &Serving<'_>, group: &[Listener], watch: &Watch) {
    crate::lab::probe!("snmp.loop");
    let mut events = Events::with_capacity(EVENTS);
    let mut buf = vec![0u8; 65_535];
    while !serving.stop.load(Ordering::Relaxed) {
        if watch.set.wait(&mut events, WAIT_TIMEOUT).is_err() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        for token in events.tokens() {
            match group.get(token as usize) {
                Some(l) if !serving.stop.load(Ordering::Relaxed) => drain(serving, l, &mut buf),
                _ => {} // the wake-up socket, or stopping: the loop's test sees the flag
            }
        }
    }
}

/// Answers up to [`BURST`] datagrams waiting on `l`.
fn drain(serving: &Serving<'_>, l: &Listener, buf: &mut [u8]) {
    for _ in 0..BURST {
        let received = match &l.route {
            Route::Device(i) => l
                .socket
                .recv_from(buf)
                .map(|(n, peer)| Some((n, peer, *i, None))),
            Route::Net(net) => {
                crate::netsys::recv_with_destination(&l.socket, buf).map(|(n, peer, dst)| {
                    let dst = dst?;
                    let i = net.device_at(dst, serving.devices.len())?;
                    Some((n, SocketAddr::V4(peer), i, Some(dst)))
                })
            }
        };
        let (n, peer, index, from) = match received {
            Ok(Some(x)) => x,
            Ok(None) => continue, // not for one of our addresses: dropped
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return, // drained (EAGAIN) or a transient error: back to the wait
        };
        let device = &serving.devices[index];
        if let Some(bytes) = respond(device, &buf[..n], serving.community) {
            crate::lab::probe!("snmp.reply");
            let sent = match (from, peer) {
                (Some(from), SocketAddr::V4(to)) => send_from_retrying(&l.socket, &bytes, to, from),
                _ => send_retrying(&l.socket, &bytes, peer),
            };
            let counter = if sent {
                &device.counters.snmp_responses
            } else {
                &device.counters.send_errors
            };
            DeviceCounters::inc(counter);
        }
    }
}
