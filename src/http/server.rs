//! The bounded HTTP/1.1 server: one poll thread that accepts and parks sockets, and a fixed pool of
//! workers that read, call the handler and write. It owns every socket of the serving side; handlers only
//! see [`Request`] values and return [`Response`] values.
//!
//! Shape (why: tiny_http stops accepting for good on one accept error, grows a thread per busy connection
//! and sets no timeouts; see ARCHITECTURE.md):
//! - The **poll thread** watches the listener, a wake-up socket and every parked connection (idle
//!   keep-alive sockets and sockets whose request has not fully arrived). A readable socket goes to the
//!   work queue; a socket parked past its deadline (idle timeout, or the time allowed to receive a request)
//!   is dropped. Accept errors (EMFILE, ENFILE, ENOBUFS, …) are logged once per burst and the listener is
//!   left out of the poll set for a short pause; they are never fatal.
//! - **Workers** (a fixed number) take a readable socket, read what is there without waiting (`httparse`
//!   decides whether a request head is complete; bodies are `Content-Length` only, chunked bodies get 411),
//!   and either answer or hand the socket back to be parked. A worker therefore never waits for a slow
//!   sender. Writes have a deadline (the write timeout plus the handler's
//!   [`Response::extra_write_time`]), enforced per `write` call, so a slow reader holds a worker for at most
//!   that long.
//! - Thread count is `1 + workers`, whatever the number of connections.
//! - **Memory is bounded by two limits**: a connection buffers at most one request head ([`MAX_HEAD`])
//!   plus `max_body` (the binary sets it to the largest body a route accepts, 64 KiB), and the server
//!   holds at most `max_connections` sockets waiting (parked or queued for a worker; default 4096). When
//!   an accept takes it over the limit, the poll thread closes the oldest idle keep-alive connections
//!   (clients reconnect transparently), and only when none is idle the ones whose request has waited
//!   longest; it logs one line per burst (`nl6: http: … connections held, the limit: closing …`) and one
//!   when back under the limit. New connections are never refused for it, so a flood of idle sockets
//!   cannot lock a curl out. An idle socket keeps no buffer capacity.
//!
//! Never parses HTTP itself beyond framing (httparse reads heads), never spawns per connection, never
//! blocks a worker on a read.
#![deny(unsafe_code)]

use super::sys::{self, PollFd};
use super::{Request, Response};
use wire::{frame, write_response, Framed};
pub use wire::{plain_refusal, reason, Refusal, MAX_HEAD};

#[path = "server_wire.rs"]
mod wire;
use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a handler is: a request value in, a response value out. Shared by every worker.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

const READ_PEEK: Duration = Duration::from_millis(20);
/// Most a worker reads and discards after a refusal before closing (Go discards up to 256 KiB too).
const LINGER_BYTES: usize = 256 * 1024;
/// Longest a worker lingers after a refusal.
const LINGER_TIME: Duration = Duration::from_millis(200);
/// How long the listener is left alone after an accept error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Longest the poll thread sleeps without looking at deadlines and the stop flag.
const POLL_TICK: Duration = Duration::from_millis(500);

/// Server limits. Defaults: 16 workers, 10 s idle, 10 s to receive a request, 30 s write, 1 MiB body,
/// 4096 waiting connections.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    workers: usize,
    idle_timeout: Duration,
    request_timeout: Duration,
    write_timeout: Duration,
    max_body: usize,
    max_connections: usize,
    refusal: fn(&Refusal) -> Response,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            workers: 16,
            idle_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_body: 1024 * 1024,
            max_connections: 4096,
            refusal: plain_refusal,
        }
    }
}

impl ServerConfig {
    /// Number of worker threads. Defaults to 16.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }
    /// How long a keep-alive connection may sit idle. Defaults to 10 s.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }
    /// How long a request (head and body) may take to arrive once it has started. Defaults to 10 s.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }
    /// Deadline for writing a response, added to the handler's own `extra_write_time`. Defaults to 30 s.
    pub fn write_timeout(mut self, d: Duration) -> Self {
        self.write_timeout = d;
        self
    }
    /// Largest request body read (413 above it; surfaces may refuse smaller ones). Each waiting
    /// connection may buffer this much plus a head, so set it to the largest body a route accepts.
    /// Defaults to 1 MiB.
    pub fn max_body(mut self, n: usize) -> Self {
        self.max_body = n;
        self
    }
    /// How the server's own refusals (400, 411, 413, 431: before any handler) are answered, so each
    /// surface can keep its error shape. Defaults to [`plain_refusal`] (text/plain).
    pub fn refusal(mut self, f: fn(&Refusal) -> Response) -> Self {
        self.refusal = f;
        self
    }
    /// Most connections held waiting (parked idle or mid-request, or queued for a worker); beyond it the
    /// oldest idle ones are closed (see the module notes). Defaults to 4096.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }
}

/// A socket and whatever part of its next request has arrived.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// When the first byte of the pending request arrived (None: idle between requests).
    request_started: Option<Instant>,
    /// When the socket was last parked (idle deadline base).
    parked_at: Instant,
}

/// State shared by the poll thread and the workers.
struct Shared {
    config: ServerConfig,
    handler: Arc<Handler>,
    stop: AtomicBool,
    queue: Mutex<VecDeque<Conn>>,
    queue_ready: Condvar,
    returned: Mutex<Vec<Conn>>,
    wake_tx: UnixStream,
}

impl Shared {
    fn wake(&self) {
        // A full wake socket means a wake-up is already pending: nothing to do.
        let _ = (&self.wake_tx).write(&[1]);
    }
}

/// A running server. [`Server::shutdown`] stops it; dropping it leaves it running (as `main` wants).
pub struct Server {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` and starts the poll thread and the workers.
    pub fn bind(
        addr: impl ToSocketAddrs,
        config: ServerConfig,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Server::from_listener(listener, config, handler)
    }

    /// Serves an already bound listener.
    pub fn from_listener(
        listener: TcpListener,
        config: ServerConfig,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        let workers = config.workers;
        let shared = Arc::new(Shared {
            config,
            handler,
            stop: AtomicBool::new(false),
            queue: Mutex::new(VecDeque::new()),
            queue_ready: Condvar::new(),
            returned: Mutex::new(Vec::new()),
            wake_tx,
        });
        let mut threads = Vec::with_capacity(workers + 1);
        for i in 0..workers {
            let s = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("http-worker-{i}"))
                    .spawn(move || worker_loop(&s))?,
            );
        }
        let s = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name("http-poll".to_string())
                .spawn(move || poll_loop(&s, listener, wake_rx))?,
        );
        Ok(Server {
            local_addr,
            shared,
            threads,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, drops parked connections, lets workers finish their current request, and joins.
    pub fn shutdown(self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake();
        self.shared.queue_ready.notify_all();
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking handler is caught before it can poison these locks; recover anyway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn poll_loop(shared: &Shared, listener: TcpListener, mut wake_rx: UnixStream) {
    let config = &shared.config;
    let mut parked: Vec<Conn> = Vec::new();
    let mut listener_paused_until: Option<Instant> = None;
    let mut accept_failing = false;
    let mut over_limit = false;
    let mut fds: Vec<PollFd> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        parked.append(&mut lock(&shared.returned));
        let now = Instant::now();
        if listener_paused_until.is_some_and(|t| now >= t) {
            listener_paused_until = None;
        }
        // Drop connections past their deadline.
        parked.retain(|c| now < deadline(c, config));
        let mut timeout = POLL_TICK;
        for c in &parked {
            timeout = timeout.min(deadline(c, config).saturating_duration_since(now));
        }
        if let Some(t) = listener_paused_until {
            timeout = timeout.min(t.saturating_duration_since(now));
        }
        fds.clear();
        fds.push(PollFd::readable(wake_rx.as_raw_fd()));
        fds.push(PollFd::readable(if listener_paused_until.is_none() {
            listener.as_raw_fd()
        } else {
            -1
        }));
        fds.extend(
            parked
                .iter()
                .map(|c| PollFd::readable(c.stream.as_raw_fd())),
        );
        match sys::poll(&mut fds, timeout.max(Duration::from_millis(1))) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) => {
                eprintln!("nl6: http: poll failed: {e}");
                std::thread::sleep(ACCEPT_PAUSE);
                continue;
            }
        }
        if fds[0].is_ready() {
            let mut sink = [0u8; 256];
            while matches!(wake_rx.read(&mut sink), Ok(n) if n > 0) {}
        }
        let mut ready = Vec::new();
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
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if accept_failing {
                            eprintln!("nl6: http: accepting again");
                            accept_failing = false;
                        }
                        if stream.set_nonblocking(false).is_err()
                            || stream.set_read_timeout(Some(READ_PEEK)).is_err()
                        {
                            continue;
                        }
                        let _ = stream.set_nodelay(true);
                        parked.push(Conn {
                            stream,
                            buf: Vec::new(),
                            request_started: None,
                            parked_at: Instant::now(),
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                    Err(e) => {
                        if !accept_failing {
                            eprintln!("nl6: http: accept failed: {e}; retrying (logged once until it recovers)");
                            accept_failing = true;
                        }
                        listener_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                        break;
                    }
                }
            }
        }
        let queued = {
            let mut q = lock(&shared.queue);
            q.extend(ready);
            q.len()
        };
        if queued > 0 {
            shared.queue_ready.notify_all();
        }
        let held = parked.len() + queued;
        if held > config.max_connections {
            let closed = close_oldest(&mut parked, held - config.max_connections);
            if !over_limit {
                eprintln!(
                    "nl6: http: {held} connections held, the limit is {}: closing {closed} (oldest idle first; logged once until back under the limit)",
                    config.max_connections
                );
                over_limit = true;
            }
        } else if over_limit && held < config.max_connections {
            eprintln!("nl6: http: back under the connection limit ({held} held)");
            over_limit = false;
        }
    }
}

/// Closes `n` parked connections: idle keep-alive ones first, oldest first, then those whose request
/// started longest ago. Returns how many were closed (fewer when fewer are parked).
fn close_oldest(parked: &mut Vec<Conn>, n: usize) -> usize {
    let n = n.min(parked.len());
    if n == 0 {
        return 0;
    }
    // Idle (false) sorts before mid-request (true); within each, the oldest first.
    let mut order: Vec<(bool, Instant, usize)> = parked
        .iter()
        .enumerate()
        .map(|(i, c)| match c.request_started {
            None => (false, c.parked_at, i),
            Some(t) => (true, t, i),
        })
        .collect();
    order.select_nth_unstable(n - 1);
    let mut doomed = vec![false; parked.len()];
    for &(_, _, i) in &order[..n] {
        doomed[i] = true;
    }
    let mut i = 0;
    parked.retain(|_| {
        i += 1;
        !doomed[i - 1]
    });
    n
}

fn deadline(c: &Conn, config: &ServerConfig) -> Instant {
    match c.request_started {
        Some(t) => t + config.request_timeout,
        None => c.parked_at + config.idle_timeout,
    }
}

fn worker_loop(shared: &Shared) {
    loop {
        let conn = {
            let mut q = lock(&shared.queue);
            loop {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(c) = q.pop_front() {
                    break c;
                }
                q = shared
                    .queue_ready
                    .wait(q)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        if let Some(c) = serve_ready(shared, conn) {
            lock(&shared.returned).push(park_after_serving(c));
            shared.wake();
        }
    }
}

/// After a refusal: closes our side for writing, then reads and discards what the client is still sending
/// (at most [`LINGER_BYTES`] or [`LINGER_TIME`]), so the close does not reset the connection before the
/// client has read the answer (a socket closed with unread input sends RST, which can discard the reply).
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let end = Instant::now() + LINGER_TIME;
    let mut drained = 0;
    let mut sink = [0u8; 8192];
    while drained < LINGER_BYTES && Instant::now() < end {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
    }
}

/// Readies a served connection for parking: its idle deadline starts now, and an idle one gives back its
/// buffer, so thousands of idle sockets cost no request-sized memory.
fn park_after_serving(mut c: Conn) -> Conn {
    c.parked_at = Instant::now();
    if c.buf.is_empty() {
        c.buf = Vec::new();
    }
    c
}

/// Reads what has arrived on a readable socket and serves every complete request in it. Returns the
/// connection when it should be parked (idle, or waiting for the rest of a request); `None` closes it.
fn serve_ready(shared: &Shared, mut c: Conn) -> Option<Conn> {
    let mut chunk = [0u8; 8192];
    loop {
        match c.stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => {
                c.buf.extend_from_slice(&chunk[..n]);
                break;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Some(c)
            }
            Err(_) => return None,
        }
    }
    loop {
        match frame(&c.buf, shared.config.max_body) {
            Framed::Incomplete => {
                if c.buf.is_empty() {
                    c.request_started = None;
                } else if c.request_started.is_none() {
                    c.request_started = Some(Instant::now());
                }
                return Some(c);
            }
            Framed::Refused(refusal) => {
                let resp = (shared.config.refusal)(&refusal);
                let _ = write_response(
                    &mut c.stream,
                    &resp,
                    false,
                    false,
                    Instant::now() + shared.config.write_timeout,
                );
                linger(&mut c.stream);
                return None;
            }
            Framed::Complete {
                request,
                consumed,
                keep_alive,
            } => {
                c.buf.drain(..consumed);
                c.request_started = if c.buf.is_empty() {
                    None
                } else {
                    Some(Instant::now())
                };
                // The handler may ask whether the client left (a timed profile ends early then).
                let request = Request {
                    peer: super::Peer::watching(c.stream.as_raw_fd()),
                    ..request
                };
                let handler = &shared.handler;
                let handled_at = Instant::now();
                let resp =
                    catch_unwind(AssertUnwindSafe(|| handler(&request))).unwrap_or_else(|_| {
                        Response::new(
                            500,
                            "text/plain; charset=utf-8",
                            "internal error: the handler panicked\n",
                        )
                    });
                let head_only = request.method == "HEAD";
                // Go 1.23+'s rule: the write deadline counts from the request, extended by the handler's
                // own time (a CPU profile's seconds), so a slow reader gets the write timeout, not more.
                let deadline = handled_at + shared.config.write_timeout + resp.extra_write_time;
                if write_response(&mut c.stream, &resp, keep_alive, head_only, deadline).is_err()
                    || !keep_alive
                {
                    return None;
                }
                if c.buf.is_empty() {
                    return Some(c);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
