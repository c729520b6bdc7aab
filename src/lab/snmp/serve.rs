//! The SNMP serving threads: a fixed few plain OS threads ([`SERVING_THREADS`] at most, labelled `snmp`
//! from birth) answer every device, whatever `-devices` is. Each blocks in `poll(2)` over its share of
//! the sockets and a shared wake-up socket, then drains what is ready without blocking.
//!
//! Two ways to listen ([`Listener`]):
//! - per port (`-snmp-port BASE` or `0`): one socket per device, spread over the threads;
//! - `-device-net CIDR`: one socket per thread, all on the same port (`SO_REUSEPORT`, bound to the
//!   wildcard address with `IP_PKTINFO`): the destination of each request names the device, and the
//!   answer leaves from that address ([`crate::netsys`]). Datagrams to addresses outside the fleet's
//!   range are dropped unanswered.
//!
//! The wake-up socket is never read: one byte written at stop leaves it readable, so every thread's
//! next poll returns at once and sees the stop flag.
#![forbid(unsafe_code)]

use super::super::device::{Device, DeviceCounters};
use super::super::device_net::DeviceNet;
use super::super::send::{send_from_retrying, send_retrying};
use super::respond;
use crate::ready::{poll, PollFd};
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
/// backstop, as stop wakes every thread through the [`Waker`]; each poll of a per-port thread walks all
/// its sockets, so a short timeout would cost idle CPU in proportion to -devices.
const POLL_TIMEOUT: Duration = Duration::from_secs(2);

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

/// A stop signal for the serving threads: [`Waker::wake`] makes every thread's poll return.
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
    /// A serving thread's own handle on the shared socket, to poll (cloned before the thread starts,
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

/// One serving thread's loop: waits for any of `group`'s sockets, answers what arrived, until stop
/// (`wake`, from [`Waker::watcher`], becomes readable at stop).
pub fn run(serving: &Serving<'_>, group: &[Listener], wake: &UnixDatagram) {
    crate::lab::probe!("snmp.loop");
    let mut fds: Vec<PollFd> = group
        .iter()
        .map(|l| PollFd::readable(l.socket.as_raw_fd()))
        .chain(std::iter::once(PollFd::readable(wake.as_raw_fd())))
        .collect();
    let mut buf = vec![0u8; 65_535];
    while !serving.stop.load(Ordering::Relaxed) {
        if poll(&mut fds, POLL_TIMEOUT).is_err() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        for (l, fd) in group.iter().zip(&fds) {
            if fd.is_ready() && !serving.stop.load(Ordering::Relaxed) {
                drain(serving, l, &mut buf);
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
            Err(_) => return, // drained (EAGAIN) or a transient error: back to poll
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
