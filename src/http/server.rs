//! The bounded HTTP/1.1 server: one poll thread that accepts and parks sockets, and a fixed pool of
//! workers that read, call the handler and write. It owns every socket of the serving side; handlers only
//! see [`Request`] values and return [`Response`] values.
//!
//! Shape (why: tiny_http stops accepting for good on one accept error, grows a thread per busy connection
//! and sets no timeouts; see ARCHITECTURE.md):
//! - Every socket is non-blocking. **A worker never waits on a client**: it reads what is there, answers
//!   every complete request (`httparse` frames heads; bodies are `Content-Length` only), writes what the
//!   socket takes, and hands the connection back to the poll thread for whatever is left: the rest of a
//!   request, room to write the rest of an answer, or a [`super::Deferred`] answer that is not ready yet.
//!   While an answer waits to be written (or to be ready), nothing more is read from that connection, so
//!   a client that pipelines requests and never reads holds one answer in memory, not a worker.
//! - The **poll thread** ([`poll`]) watches the listener, a wake-up socket and every parked connection,
//!   queues the ready ones for the workers, closes those past their deadline (idle 10 s, a request that
//!   takes over 10 s to arrive, an answer not taken within the write deadline), and keeps the limits
//!   below. Accept errors (EMFILE, ENFILE, ENOBUFS, …) are logged once per burst and the listener is left
//!   out of the poll set for a short pause; they are never fatal.
//! - Thread count is `1 + workers`, whatever the number of connections.
//! - **Limits** (each over-limit event is one log line per burst): at most `max_connections` held (default
//!   4096) and `max_per_peer` per client address (default 1024; an IPv6 /64 counts as one address); over
//!   either, the connections longest without progress (accepted or last answered longest ago) are closed
//!   first, so a new client always gets its turn whatever state the old sockets are in. At most
//!   `max_pending_output` bytes of answers (default 64 MiB) wait for slow readers; over it, the readers
//!   that took nothing for longest are closed. A connection buffers at most one request head
//!   ([`MAX_HEAD`]) plus `max_body`, and an idle one keeps no buffer.
//!
//! Never parses HTTP itself beyond framing (httparse reads heads), never spawns per connection, never
//! blocks a worker on a socket.
#![deny(unsafe_code)]

use super::{sys, Request, Response};
use conn::{Conn, Next};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
pub use wire::{plain_refusal, reason, Refusal, MAX_HEAD};

#[path = "server_conn.rs"]
mod conn;
#[path = "server_peers.rs"]
mod peers;
#[path = "server_poll.rs"]
mod poll;
#[path = "server_wire.rs"]
mod wire;

/// What a handler is: a request value in, a response value out. Shared by every worker.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// Server limits. Defaults: 16 workers, 10 s idle, 10 s to receive a request, 30 s write, 1 MiB body,
/// 4096 connections, 1024 per client address, 64 MiB of answers waiting for slow readers.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    workers: usize,
    idle_timeout: Duration,
    request_timeout: Duration,
    write_timeout: Duration,
    max_body: usize,
    max_connections: usize,
    max_per_peer: usize,
    max_pending_output: usize,
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
            max_per_peer: 1024,
            max_pending_output: 64 * 1024 * 1024,
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
    /// Most connections held (parked, or queued for a worker); beyond it the ones longest without
    /// progress are closed (see the module notes). Defaults to 4096.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }
    /// Most connections open from one client address (an IPv6 /64 counts as one); beyond it that
    /// address's connection longest without progress is closed. Defaults to 1024: a quarter of the
    /// connection limit, far above what a browser (6) or a reverse proxy in front needs.
    pub fn max_per_peer(mut self, n: usize) -> Self {
        self.max_per_peer = n.max(1);
        self
    }
    /// Most bytes of answers held for clients that do not read them; beyond it the connections that took
    /// nothing for longest are closed. Defaults to 64 MiB.
    pub fn max_pending_output(mut self, n: usize) -> Self {
        self.max_pending_output = n;
        self
    }
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
    peers: Arc<peers::PeerTable>,
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
        // As long as the connection limit, so a burst waits for the poll thread instead of being dropped.
        sys::set_listen_backlog(
            listener.as_raw_fd(),
            config.max_connections.min(65535) as i32,
        )?;
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
            peers: Arc::default(),
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
                .spawn(move || poll::poll_loop(&s, listener, wake_rx))?,
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
        {
            // Under the queue's lock: a worker between its `stop` check and its wait cannot miss the
            // notify below.
            let _queue = lock(&self.shared.queue);
            self.shared.stop.store(true, Ordering::SeqCst);
        }
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

fn worker_loop(shared: &Arc<Shared>) {
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
        match conn::serve(shared, conn) {
            Next::Park(c) => {
                lock(&shared.returned).push(c);
                shared.wake();
            }
            Next::Again(c) => {
                lock(&shared.queue).push_back(c);
                shared.queue_ready.notify_one();
            }
            Next::Close => {}
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
#[cfg(test)]
use tests as tests_support;
#[cfg(test)]
#[path = "server_tests_more.rs"]
mod tests_more;
