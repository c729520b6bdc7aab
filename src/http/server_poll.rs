//! The poll thread of [`super`]: accepts, watches every parked connection for what its phase waits for,
//! queues the ready ones for the workers, closes those past their deadline, and keeps the server's limits
//! (connections in all, per client address, bytes of answers waiting for slow readers). Owns the parked
//! connections; never reads or writes a client's socket itself.
#![deny(unsafe_code)]

use super::conn::{park, Conn, Due};
use super::peers::{PeerKey, PeerSlot};
use super::{lock, ServerConfig, Shared};
use crate::http::sys::{self, PollFd};
use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the listener is left alone after an accept error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// How long accepts must go on succeeding before "accepting again" is said (and a new failure logged).
const ACCEPT_RECOVERED: Duration = Duration::from_secs(2);
/// Longest the poll thread sleeps without looking at deadlines and the stop flag.
const POLL_TICK: Duration = Duration::from_millis(500);
/// Most connections accepted in one pass, so that those already accepted are read and answered between
/// batches of a flood instead of after it.
const ACCEPTS_PER_PASS: usize = 256;
/// Least time between two log lines about the per-address limit.
const PEER_LOG_EVERY: Duration = Duration::from_secs(60);

/// The poll thread's memory of what it has logged, so each burst is one line.
#[derive(Default)]
struct Logged {
    accept_failing: bool,
    /// The last accept that failed: the server has recovered only once accepts succeed for
    /// [`ACCEPT_RECOVERED`] after it (under a burst at the descriptor limit every pause frees a few
    /// descriptors, which a waiting client takes at once).
    accept_failed_at: Option<Instant>,
    over_connections: bool,
    over_output: bool,
    peer_at: Option<Instant>,
}

/// The parked connections, with their poll entries kept in step (`fds[i + 2]` watches `conns[i]`; the
/// first two watch the wake-up socket and the listener), so one pass of the loop costs what happened in
/// it, not what is held: deadlines are scanned only when the earliest is due, and bytes of waiting
/// answers are counted as connections come and go.
struct Parked {
    conns: Vec<Conn>,
    fds: Vec<PollFd>,
    /// Deferred answers: not watched on a socket; asked whether they are ready on every pass.
    waiting: Vec<Conn>,
    /// No deadline of `conns` is earlier.
    next_due: Instant,
    pending_bytes: usize,
    /// When this pass of the loop began: a connection accepted since has not been polled yet, and is
    /// never the one closed over a limit (it has had no chance to be served).
    pass_start: Instant,
}

impl Parked {
    fn add(&mut self, c: Conn, config: &ServerConfig) {
        if matches!(c.phase, super::conn::Phase::Waiting(_)) {
            self.waiting.push(c);
            return;
        }
        self.next_due = self.next_due.min(c.due(config).0);
        self.pending_bytes += c.pending_output().map_or(0, |o| o.remaining());
        self.fds.push(c.interest());
        self.conns.push(c);
    }

    fn take(&mut self, i: usize) -> Conn {
        self.fds.swap_remove(i + 2);
        let c = self.conns.swap_remove(i);
        self.pending_bytes -= c.pending_output().map_or(0, |o| o.remaining());
        c
    }

    /// Takes out the connections past their deadline: those to close are dropped, those to serve returned.
    fn expire(&mut self, config: &ServerConfig, now: Instant, ready: &mut Vec<Conn>) {
        if now >= self.next_due {
            self.next_due = now + POLL_TICK;
            for i in (0..self.conns.len()).rev() {
                let (at, due) = self.conns[i].due(config);
                if now >= at {
                    let c = self.take(i);
                    if let Due::Serve = due {
                        ready.push(c);
                    }
                } else {
                    self.next_due = self.next_due.min(at);
                }
            }
        }
        let mut i = 0;
        while i < self.waiting.len() {
            let c = &self.waiting[i];
            if c.answer_ready() || now >= c.due(config).0 {
                ready.push(self.waiting.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// How long the poll may sleep.
    fn timeout(&self, config: &ServerConfig, now: Instant) -> Duration {
        let waiting = self.waiting.iter().map(|c| c.due(config).0);
        let next = waiting.fold(self.next_due, Instant::min);
        next.saturating_duration_since(now)
            .min(POLL_TICK)
            .max(Duration::from_millis(1))
    }

    /// Takes out the connections the last poll found ready.
    fn take_ready(&mut self, ready: &mut Vec<Conn>) {
        for i in (0..self.conns.len()).rev() {
            if self.fds[i + 2].is_ready() {
                ready.push(self.take(i));
            }
        }
    }

    /// Closes the given connections (indices into `conns`).
    fn close(&mut self, mut indices: Vec<usize>) {
        indices.sort_unstable_by(|a, b| b.cmp(a));
        for i in indices {
            drop(self.take(i));
        }
    }
}

/// The poll thread: parks idle connections, hands ready ones to the workers, accepts new ones and keeps
/// the connection and pending-output limits, until the server stops.
pub(super) fn poll_loop(shared: &Arc<Shared>, listener: TcpListener, mut wake_rx: UnixStream) {
    let config = &shared.config;
    let mut parked = Parked {
        conns: Vec::new(),
        fds: vec![
            PollFd::readable(wake_rx.as_raw_fd()),
            PollFd::readable(listener.as_raw_fd()),
        ],
        waiting: Vec::new(),
        next_due: Instant::now() + POLL_TICK,
        pending_bytes: 0,
        pass_start: Instant::now(),
    };
    let mut listener_paused_until: Option<Instant> = None;
    let mut logged = Logged::default();
    while !shared.stop.load(Ordering::SeqCst) {
        for c in lock(&shared.returned).drain(..) {
            parked.add(c, config);
        }
        let now = Instant::now();
        parked.pass_start = now;
        if listener_paused_until.is_some_and(|t| now >= t) {
            listener_paused_until = None;
        }
        let mut ready = Vec::new();
        parked.expire(config, now, &mut ready);
        let timeout = arm_listener(&mut parked, &listener, listener_paused_until, config, now);
        // Connections already due are served at once; the poll then only collects what else is ready.
        let wait = if ready.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        if let Err(e) = sys::poll(&mut parked.fds, wait) {
            eprintln!("nl6: http: poll failed: {e}");
            std::thread::sleep(ACCEPT_PAUSE);
            continue;
        }
        if parked.fds[0].is_ready() {
            let mut sink = [0u8; 256];
            while matches!(wake_rx.read(&mut sink), Ok(n) if n > 0) {}
        }
        parked.take_ready(&mut ready);
        hand_to_workers(shared, ready);
        if parked.fds[1].is_ready() {
            let mut pass = AcceptPass {
                parked: &mut parked,
                logged: &mut logged,
                paused_until: &mut listener_paused_until,
            };
            pass.accept_all(shared, &listener);
        }
        limit_connections(&mut parked, shared.peers.open(), config, &mut logged);
        limit_pending_output(&mut parked, config, &mut logged);
    }
}

/// Arms the listener's poll slot (disarmed while accepting is paused after an error) and returns how
/// long the poll may wait: until the next connection deadline, or the pause's end if sooner.
fn arm_listener(
    parked: &mut Parked,
    listener: &TcpListener,
    paused_until: Option<Instant>,
    config: &ServerConfig,
    now: Instant,
) -> Duration {
    let mut timeout = parked.timeout(config, now);
    if let Some(t) = paused_until {
        timeout = timeout.min(
            t.saturating_duration_since(now)
                .max(Duration::from_millis(1)),
        );
    }
    parked.fds[1] = PollFd::readable(match paused_until {
        None => listener.as_raw_fd(),
        Some(_) => -1,
    });
    timeout
}

/// Queues connections that are ready (or due) for the workers and wakes them.
fn hand_to_workers(shared: &Shared, ready: Vec<Conn>) {
    let queued = {
        let mut q = lock(&shared.queue);
        q.extend(ready);
        q.len()
    };
    if queued > 0 {
        shared.queue_ready.notify_all();
    }
}

/// What one pass of accepting works on.
struct AcceptPass<'a> {
    parked: &'a mut Parked,
    logged: &'a mut Logged,
    paused_until: &'a mut Option<Instant>,
}

impl AcceptPass<'_> {
    /// Accepts pending connections (at most [`ACCEPTS_PER_PASS`]), keeping both limits after each one (so
    /// a burst from the listen queue never holds more than the limit); an address over its limit loses
    /// its connection longest without progress. Accept errors pause the listener.
    fn accept_all(&mut self, shared: &Arc<Shared>, listener: &TcpListener) {
        let config = &shared.config;
        for _ in 0..ACCEPTS_PER_PASS {
            match listener.accept() {
                Ok((stream, addr)) => {
                    let recovered = self
                        .logged
                        .accept_failed_at
                        .is_none_or(|t| t.elapsed() >= ACCEPT_RECOVERED);
                    if self.logged.accept_failing && recovered {
                        eprintln!("nl6: http: accepting again");
                        self.logged.accept_failing = false;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let key = PeerKey::of(addr.ip());
                    let (slot, open) = PeerSlot::claim(&shared.peers, key);
                    self.parked
                        .add(park(Conn::new(stream, slot, Instant::now())), config);
                    if open > config.max_per_peer {
                        self.limit_peer(key, open, config);
                    }
                    limit_connections(self.parked, shared.peers.open(), config, self.logged);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        // Descriptors ran out before the connection limit did (a low `ulimit -n`):
                        // make room as the limit would, so a new client still gets its turn.
                        close_stalest(self.parked, (config.max_connections / 64).max(1), None);
                    }
                    if !self.logged.accept_failing {
                        eprintln!("nl6: http: accept failed: {e}; retrying (logged once until it recovers)");
                        self.logged.accept_failing = true;
                    }
                    self.logged.accept_failed_at = Some(Instant::now());
                    *self.paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                    break;
                }
            }
        }
    }

    /// Closes a little more than the excess of `key` (1/32 of the per-address limit), so a flood at the
    /// limit costs one pass over the parked connections per batch.
    fn limit_peer(&mut self, key: PeerKey, open: usize, config: &ServerConfig) {
        let excess = open - config.max_per_peer + config.max_per_peer / 32;
        close_stalest(self.parked, excess, Some(key));
        let now = Instant::now();
        if self
            .logged
            .peer_at
            .is_none_or(|t| now >= t + PEER_LOG_EVERY)
        {
            eprintln!(
                "nl6: http: {key} holds {} connections, the per-address limit: closing its oldest (at most one such line a minute)",
                config.max_per_peer
            );
            self.logged.peer_at = Some(now);
        }
    }
}

/// Closes the `n` parked connections (of `key` only, when given) longest without progress: accepted or
/// last answered longest ago, whatever they are doing; never one accepted in this pass. Returns how many
/// were closed.
fn close_stalest(parked: &mut Parked, n: usize, key: Option<PeerKey>) -> usize {
    let mut order: Vec<(Instant, usize)> = parked
        .conns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.since < parked.pass_start && key.is_none_or(|k| c.peer.key == k))
        .map(|(i, c)| (c.since, i))
        .collect();
    let n = n.min(order.len());
    if n == 0 {
        return 0;
    }
    order.select_nth_unstable(n - 1);
    parked.close(order[..n].iter().map(|&(_, i)| i).collect());
    n
}

/// Over `max_connections` open (`held`: parked, queued, being served), closes the parked connections
/// longest without progress, a little more than the excess (1/64 of the limit) so that a flood at the
/// limit costs one pass per batch, not one per connection.
fn limit_connections(parked: &mut Parked, held: usize, config: &ServerConfig, logged: &mut Logged) {
    if held <= config.max_connections {
        // Well under, not just under the batch's mark: one line per burst.
        if logged.over_connections && held < config.max_connections - config.max_connections / 8 {
            eprintln!("nl6: http: back under the connection limit ({held} held)");
            logged.over_connections = false;
        }
        return;
    }
    let n = close_stalest(
        parked,
        held - config.max_connections + config.max_connections / 64,
        None,
    );
    if !logged.over_connections {
        eprintln!(
            "nl6: http: {held} connections held, the limit is {}: closing {n} (those longest without a finished request first; logged once until back under the limit)",
            config.max_connections
        );
        logged.over_connections = true;
    }
}

/// Over `max_pending_output` bytes of answers waiting for parked slow readers, closes the readers that
/// took nothing for longest until back under; the one that took something last is always kept, so a
/// single answer larger than the limit still goes out to a client that reads it.
fn limit_pending_output(parked: &mut Parked, config: &ServerConfig, logged: &mut Logged) {
    if parked.pending_bytes <= config.max_pending_output {
        if logged.over_output && parked.pending_bytes < config.max_pending_output / 2 {
            eprintln!("nl6: http: back under the limit of answers waiting for slow readers");
            logged.over_output = false;
        }
        return;
    }
    let before = parked.pending_bytes;
    let mut writers: Vec<(Instant, usize, usize)> = parked
        .conns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.pending_output()
                .map(|o| (o.last_progress, o.remaining(), i))
        })
        .collect();
    writers.sort_unstable();
    writers.pop();
    let mut total = before;
    let mut doomed = Vec::new();
    for &(_, bytes, i) in &writers {
        if total <= config.max_pending_output {
            break;
        }
        total -= bytes;
        doomed.push(i);
    }
    let closed = doomed.len();
    parked.close(doomed);
    if !logged.over_output {
        eprintln!(
            "nl6: http: {} KiB of answers wait for clients that do not read them, the limit is {} KiB: closing the {closed} that took nothing for longest (logged once until back under)",
            before / 1024,
            config.max_pending_output / 1024
        );
        logged.over_output = true;
    }
}
