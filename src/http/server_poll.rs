//! The poll thread of [`super`]: accepts, watches every parked connection for what its phase waits for,
//! queues the ready ones for the workers, closes those past their deadline, and keeps the server's limits
//! (connections in all, per client address, bytes of answers waiting for slow readers). Owns the parked
//! connections; never reads or writes a client's socket itself.
#![deny(unsafe_code)]

use super::conn::{park, Conn, Due};
use super::{lock, ServerConfig, Shared};
use crate::http::sys::{self, PollFd};
use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv6Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the listener is left alone after an accept error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Longest the poll thread sleeps without looking at deadlines and the stop flag.
const POLL_TICK: Duration = Duration::from_millis(500);
/// Least time between two log lines about the per-address limit.
const PEER_LOG_EVERY: Duration = Duration::from_secs(60);

/// A client address as the per-address limit counts it: an IPv4 address (IPv4-mapped IPv6 included), or
/// the /64 of an IPv6 one (one host's usual share).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PeerKey(IpAddr);

impl PeerKey {
    pub(super) fn of(ip: IpAddr) -> PeerKey {
        match ip {
            IpAddr::V4(v4) => PeerKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    PeerKey(IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
                }
            },
        }
    }
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/64"),
        }
    }
}

/// Open connections per client address (all of them: parked, queued or being served).
#[derive(Default)]
pub(super) struct PeerTable(Mutex<HashMap<PeerKey, usize>>);

/// One connection's place in the [`PeerTable`]; dropping it (with the connection) gives the place back.
pub(super) struct PeerSlot {
    table: Arc<PeerTable>,
    pub(super) key: PeerKey,
}

impl PeerSlot {
    /// Counts a new connection of `key`; returns its slot and how many that address now has open.
    pub(super) fn claim(table: &Arc<PeerTable>, key: PeerKey) -> (PeerSlot, usize) {
        let mut counts = lock(&table.0);
        let n = counts.entry(key).or_insert(0);
        *n += 1;
        let open = *n;
        drop(counts);
        let slot = PeerSlot {
            table: Arc::clone(table),
            key,
        };
        (slot, open)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = lock(&self.table.0);
        if let Some(n) = counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// The poll thread's memory of what it has logged, so each burst is one line.
#[derive(Default)]
struct Logged {
    accept_failing: bool,
    over_connections: bool,
    over_output: bool,
    peer_at: Option<Instant>,
}

pub(super) fn poll_loop(shared: &Arc<Shared>, listener: TcpListener, mut wake_rx: UnixStream) {
    let config = &shared.config;
    let mut parked: Vec<Conn> = Vec::new();
    let mut listener_paused_until: Option<Instant> = None;
    let mut logged = Logged::default();
    let mut fds: Vec<PollFd> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        parked.append(&mut lock(&shared.returned));
        let now = Instant::now();
        if listener_paused_until.is_some_and(|t| now >= t) {
            listener_paused_until = None;
        }
        let (mut ready, timeout) = sort_out(&mut parked, config, now);
        let timeout = listener_paused_until.map_or(timeout, |t| {
            timeout.min(t.saturating_duration_since(now))
        });
        fds.clear();
        fds.push(PollFd::readable(wake_rx.as_raw_fd()));
        fds.push(PollFd::readable(if listener_paused_until.is_none() {
            listener.as_raw_fd()
        } else {
            -1
        }));
        fds.extend(parked.iter().map(Conn::interest));
        // Connections already due are served at once; the poll then only collects what else is ready.
        let wait = if ready.is_empty() {
            timeout.max(Duration::from_millis(1))
        } else {
            Duration::ZERO
        };
        if let Err(e) = sys::poll(&mut fds, wait) {
            eprintln!("nl6: http: poll failed: {e}");
            std::thread::sleep(ACCEPT_PAUSE);
            continue;
        }
        if fds[0].is_ready() {
            let mut sink = [0u8; 256];
            while matches!(wake_rx.read(&mut sink), Ok(n) if n > 0) {}
        }
        let mut still_parked = Vec::with_capacity(parked.len());
        for (c, fd) in parked.drain(..).zip(&fds[2..]) {
            if fd.is_ready() {
                ready.push(c);
            } else {
                still_parked.push(c);
            }
        }
        parked = still_parked;
        if fds[1].is_ready() {
            accept_all(shared, &listener, &mut parked, &mut logged, &mut listener_paused_until);
        }
        let queued = {
            let mut q = lock(&shared.queue);
            q.extend(ready);
            q.len()
        };
        if queued > 0 {
            shared.queue_ready.notify_all();
        }
        limit_connections(&mut parked, queued, config, &mut logged);
        limit_pending_output(&mut parked, config, &mut logged);
    }
}

/// Takes out of `parked` the connections due now: those to serve are returned, those past their
/// deadline are dropped (closed). Also returns how long the poll may sleep before the next deadline.
fn sort_out(parked: &mut Vec<Conn>, config: &ServerConfig, now: Instant) -> (Vec<Conn>, Duration) {
    let mut ready = Vec::new();
    let mut timeout = POLL_TICK;
    let mut kept = Vec::with_capacity(parked.len());
    for c in parked.drain(..) {
        let (at, due) = c.due(config);
        if now >= at {
            if let Due::Serve = due {
                ready.push(c);
            }
        } else if c.answer_ready() {
            ready.push(c);
        } else {
            timeout = timeout.min(at - now);
            kept.push(c);
        }
    }
    *parked = kept;
    (ready, timeout)
}

/// Accepts every pending connection; an address over its limit loses its connection longest without
/// progress. Accept errors pause the listener.
fn accept_all(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    parked: &mut Vec<Conn>,
    logged: &mut Logged,
    paused_until: &mut Option<Instant>,
) {
    let config = &shared.config;
    loop {
        match listener.accept() {
            Ok((stream, addr)) => {
                if logged.accept_failing {
                    eprintln!("nl6: http: accepting again");
                    logged.accept_failing = false;
                }
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let key = PeerKey::of(addr.ip());
                let (slot, open) = PeerSlot::claim(&shared.peers, key);
                parked.push(park(Conn::new(stream, slot, Instant::now())));
                if open > config.max_per_peer {
                    close_stalest_of(parked, key);
                    let now = Instant::now();
                    if logged.peer_at.is_none_or(|t| now >= t + PEER_LOG_EVERY) {
                        eprintln!(
                            "nl6: http: {key} holds {} connections, the per-address limit: closing its oldest (at most one such line a minute)",
                            config.max_per_peer
                        );
                        logged.peer_at = Some(now);
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
            Err(e) => {
                if !logged.accept_failing {
                    eprintln!("nl6: http: accept failed: {e}; retrying (logged once until it recovers)");
                    logged.accept_failing = true;
                }
                *paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                break;
            }
        }
    }
}

/// Closes the parked connection of `key` that has gone longest without progress.
fn close_stalest_of(parked: &mut Vec<Conn>, key: PeerKey) {
    let stalest = parked
        .iter()
        .enumerate()
        .filter(|(_, c)| c.peer.key == key)
        .min_by_key(|(_, c)| c.since)
        .map(|(i, _)| i);
    if let Some(i) = stalest {
        parked.swap_remove(i);
    }
}

/// Over `max_connections` held (parked + queued), closes the parked connections longest without
/// progress (accepted or last answered longest ago), whatever they are doing.
fn limit_connections(parked: &mut Vec<Conn>, queued: usize, config: &ServerConfig, logged: &mut Logged) {
    let held = parked.len() + queued;
    if held <= config.max_connections {
        if logged.over_connections && held < config.max_connections {
            eprintln!("nl6: http: back under the connection limit ({held} held)");
            logged.over_connections = false;
        }
        return;
    }
    let n = (held - config.max_connections).min(parked.len());
    if n > 0 {
        let mut order: Vec<(Instant, usize)> =
            parked.iter().enumerate().map(|(i, c)| (c.since, i)).collect();
        order.select_nth_unstable(n - 1);
        close_indices(parked, order[..n].iter().map(|&(_, i)| i));
    }
    if !logged.over_connections {
        eprintln!(
            "nl6: http: {held} connections held, the limit is {}: closing {n} (those longest without a finished request first; logged once until back under the limit)",
            config.max_connections
        );
        logged.over_connections = true;
    }
}

/// Over `max_pending_output` bytes of answers waiting for parked slow readers, closes the readers that
/// took nothing for longest until back under.
fn limit_pending_output(parked: &mut Vec<Conn>, config: &ServerConfig, logged: &mut Logged) {
    let mut writers: Vec<(Instant, usize, usize)> = parked
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.pending_output().map(|o| (o.last_progress, o.remaining(), i)))
        .collect();
    let mut total: usize = writers.iter().map(|w| w.1).sum();
    if total <= config.max_pending_output {
        if logged.over_output && total < config.max_pending_output / 2 {
            eprintln!("nl6: http: back under the limit of answers waiting for slow readers");
            logged.over_output = false;
        }
        return;
    }
    let before = total;
    writers.sort_unstable();
    let mut doomed = Vec::new();
    for &(_, bytes, i) in &writers {
        if total <= config.max_pending_output {
            break;
        }
        total -= bytes;
        doomed.push(i);
    }
    let closed = doomed.len();
    close_indices(parked, doomed.into_iter());
    if !logged.over_output {
        eprintln!(
            "nl6: http: {} KiB of answers wait for clients that do not read them, the limit is {} KiB: closing the {closed} that took nothing for longest (logged once until back under)",
            before / 1024,
            config.max_pending_output / 1024
        );
        logged.over_output = true;
    }
}

fn close_indices(parked: &mut Vec<Conn>, indices: impl Iterator<Item = usize>) {
    let mut doomed = vec![false; parked.len()];
    for i in indices {
        doomed[i] = true;
    }
    let mut i = 0;
    parked.retain(|_| {
        i += 1;
        !doomed[i - 1]
    });
}
