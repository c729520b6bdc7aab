//! One connection of [`super`] and what a worker does with it ([`serve`]): finish what the connection was
//! parked for, then answer every complete request it has sent, without ever waiting on the socket. What
//! cannot be done now (the rest of a request, room for the rest of an answer, a deferred answer, the
//! discard after a refusal) is recorded in the connection's [`Phase`] and left to the poll thread.
#![deny(unsafe_code)]

use super::peers::PeerSlot;
use super::wire::{frame, response_head, Framed};
use super::{ServerConfig, Shared};
use crate::http::sys::PollFd;
use crate::http::{ClientProbe, Deferred, Request, Response, Waker};
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Most read and discarded after a refusal before closing (Go discards up to 256 KiB too).
const LINGER_BYTES: usize = 256 * 1024;
/// Longest the discard after a refusal lasts.
const LINGER_TIME: std::time::Duration = std::time::Duration::from_millis(200);
/// Bytes read per `read` call.
const CHUNK: usize = 8192;
/// Most requests a worker answers on one connection before other connections go first.
const REQUESTS_PER_TURN: usize = 16;

/// A socket, whatever part of its next request has arrived, and what it waits for.
pub(super) struct Conn {
    /// Shared with the [`ClientProbe`] of the request being handled.
    pub(super) stream: Arc<TcpStream>,
    /// Counts this connection against its address's limit while it exists.
    pub(super) peer: PeerSlot,
    pub(super) buf: Vec<u8>,
    /// When the first byte of the pending request arrived (None: idle between requests).
    pub(super) request_started: Option<Instant>,
    /// When it was accepted or last finished an answer: the older, the sooner it is closed over a limit.
    pub(super) since: Instant,
    /// When it was last parked (idle deadline base).
    pub(super) parked_at: Instant,
    pub(super) phase: Phase,
}

/// What a parked connection waits for.
pub(super) enum Phase {
    /// A request, or the rest of one (watched for input).
    Reading,
    /// Room to write the rest of an answer (watched for output); nothing more is read meanwhile.
    Writing(Output),
    /// A deferred answer: not watched; its job wakes the poll thread.
    Waiting(Waiting),
    /// After a refusal: our side is shut, and what the client still sends is discarded, so the close
    /// does not reset the connection before the client has read the answer.
    Lingering { until: Instant, drained: usize },
}

/// An answer being written.
pub(super) struct Output {
    head: Vec<u8>,
    body: Vec<u8>,
    written: usize,
    pub(super) deadline: Instant,
    /// When the client last took some of it.
    pub(super) last_progress: Instant,
    after: After,
}

impl Output {
    /// Bytes still to write.
    pub(super) fn remaining(&self) -> usize {
        self.head.len() + self.body.len() - self.written
    }
}

/// A deferred answer and how to write it once it comes.
pub(super) struct Waiting {
    pub(super) job: Box<dyn Deferred>,
    head_only: bool,
    keep_alive: bool,
}

/// What happens once an answer is written.
#[derive(Debug, Clone, Copy)]
enum After {
    KeepAlive,
    Close,
    Linger,
}

impl After {
    /// After an answer to a request that asked to keep the connection (or not).
    fn of(keep_alive: bool) -> After {
        if keep_alive {
            After::KeepAlive
        } else {
            After::Close
        }
    }
}

/// What the worker does with the connection next.
pub(super) enum Next {
    /// Hand it to the poll thread.
    Park(Conn),
    /// Back of the work queue: it has more to do but has had its turn.
    Again(Conn),
    Close,
}

/// What the poll thread does at a parked connection's deadline.
pub(super) enum Due {
    Close,
    Serve,
}

impl Conn {
    pub(super) fn new(stream: TcpStream, peer: PeerSlot, now: Instant) -> Conn {
        Conn {
            stream: Arc::new(stream),
            peer,
            buf: Vec::new(),
            request_started: None,
            since: now,
            parked_at: now,
            phase: Phase::Reading,
        }
    }

    /// What the poll thread watches the socket for (a negative descriptor: nothing).
    pub(super) fn interest(&self) -> PollFd {
        let fd = self.stream.as_raw_fd();
        match self.phase {
            Phase::Reading | Phase::Lingering { .. } => PollFd::readable(fd),
            Phase::Writing(_) => PollFd::writable(fd),
            Phase::Waiting(_) => PollFd::readable(-1),
        }
    }

    /// When the poll thread acts on the connection without an event, and how.
    pub(super) fn due(&self, config: &ServerConfig) -> (Instant, Due) {
        match &self.phase {
            Phase::Reading => match self.request_started {
                Some(t) => (t + config.request_timeout, Due::Close),
                None => (self.parked_at + config.idle_timeout, Due::Close),
            },
            Phase::Writing(out) => (out.deadline, Due::Close),
            Phase::Waiting(w) => (w.job.deadline(), Due::Serve),
            Phase::Lingering { until, .. } => (*until, Due::Close),
        }
    }

    /// True when a deferred answer can be finished now.
    pub(super) fn answer_ready(&self) -> bool {
        matches!(&self.phase, Phase::Waiting(w) if w.job.ready())
    }

    /// Bytes of answer waiting for this client.
    pub(super) fn pending_output(&self) -> Option<&Output> {
        match &self.phase {
            Phase::Writing(out) => Some(out),
            _ => None,
        }
    }
}

/// Serves a connection that the poll thread found ready (or a deferred answer that is due).
pub(super) fn serve(shared: &Arc<Shared>, mut c: Conn) -> Next {
    match std::mem::replace(&mut c.phase, Phase::Reading) {
        Phase::Reading => {}
        Phase::Writing(out) => c.phase = Phase::Writing(out),
        Phase::Lingering { until, drained } => return linger(c, until, drained),
        Phase::Waiting(w) => {
            let resp =
                catch_unwind(AssertUnwindSafe(|| w.job.finish())).unwrap_or_else(|_| panicked());
            c.phase = Phase::Writing(output(
                &shared.config,
                resp,
                w.head_only,
                After::of(w.keep_alive),
                Instant::now(),
            ));
        }
    }
    let mut served = 0;
    loop {
        if matches!(c.phase, Phase::Writing(_)) {
            match flush(&mut c) {
                Flushed::Pending => return Next::Park(park(c)),
                Flushed::Failed | Flushed::Done(After::Close) => return Next::Close,
                Flushed::Done(After::Linger) => {
                    let _ = c.stream.shutdown(Shutdown::Write);
                    c.buf = Vec::new();
                    return linger(c, Instant::now() + LINGER_TIME, 0);
                }
                Flushed::Done(After::KeepAlive) => c.since = Instant::now(),
            }
            if served >= REQUESTS_PER_TURN {
                return Next::Again(c);
            }
        }
        match frame(&c.buf, shared.config.max_body) {
            Framed::Incomplete => match read_some(&mut c) {
                Received::Bytes => {}
                Received::Nothing => return Next::Park(park(c)),
                Received::End => return Next::Close,
            },
            Framed::Refused(refusal) => {
                let resp = (shared.config.refusal)(&refusal);
                let out = output(&shared.config, resp, false, After::Linger, Instant::now());
                c.phase = Phase::Writing(out);
            }
            Framed::Complete {
                request,
                consumed,
                keep_alive,
            } => {
                served += 1;
                if handle(shared, &mut c, request, consumed, keep_alive) {
                    return Next::Park(park(c));
                }
            }
        }
    }
}

/// Runs the handler on a request framed out of `c`'s first `consumed` bytes: its answer is written next,
/// or, when the answer is deferred, the connection waits for it (returns true: park it).
fn handle(
    shared: &Arc<Shared>,
    c: &mut Conn,
    mut request: Request,
    consumed: usize,
    keep_alive: bool,
) -> bool {
    let handled_at = Instant::now();
    c.buf.drain(..consumed);
    c.request_started = (!c.buf.is_empty()).then_some(handled_at);
    let head_only = request.method == "HEAD";
    request.client = ClientProbe::of(Arc::clone(&c.stream));
    let handler = &shared.handler;
    let resp = catch_unwind(AssertUnwindSafe(|| handler(&request))).unwrap_or_else(|_| panicked());
    drop(request);
    if let Some(mut job) = resp.later.as_ref().and_then(|l| l.take()) {
        job.set_waker(waker(shared));
        c.phase = Phase::Waiting(Waiting {
            job,
            head_only,
            keep_alive,
        });
        return true;
    }
    let after = After::of(keep_alive);
    c.phase = Phase::Writing(output(&shared.config, resp, head_only, after, handled_at));
    false
}

fn panicked() -> Response {
    Response::new(
        500,
        "text/plain; charset=utf-8",
        "internal error: the handler panicked\n",
    )
}

/// Wakes the poll thread, for as long as the server exists.
fn waker(shared: &Arc<Shared>) -> Waker {
    let weak = Arc::downgrade(shared);
    Arc::new(move || {
        if let Some(s) = weak.upgrade() {
            s.wake();
        }
    })
}

/// An answer ready to write. Go 1.23+'s rule for the deadline: it counts from the request, extended by
/// the handler's own time (a CPU profile's seconds), so a slow reader gets the write timeout, not more.
fn output(
    config: &ServerConfig,
    resp: Response,
    head_only: bool,
    after: After,
    from: Instant,
) -> Output {
    let keep_alive = matches!(after, After::KeepAlive);
    Output {
        head: response_head(&resp, keep_alive),
        body: if head_only { Vec::new() } else { resp.body },
        written: 0,
        deadline: from + config.write_timeout + resp.extra_write_time,
        last_progress: from,
        after,
    }
}

enum Flushed {
    Done(After),
    Pending,
    Failed,
}

/// Writes what the socket takes of the answer being written; frees it once all is written.
fn flush(c: &mut Conn) -> Flushed {
    let Phase::Writing(out) = &mut c.phase else {
        return Flushed::Failed;
    };
    loop {
        if out.remaining() == 0 {
            let after = out.after;
            c.phase = Phase::Reading;
            return Flushed::Done(after);
        }
        let now = Instant::now();
        if now >= out.deadline {
            return Flushed::Failed;
        }
        let head = out.head.get(out.written..).unwrap_or_default();
        let body = &out.body[out.written.saturating_sub(out.head.len())..];
        match (&*c.stream).write_vectored(&[IoSlice::new(head), IoSlice::new(body)]) {
            Ok(0) => return Flushed::Failed,
            Ok(n) => {
                out.written += n;
                out.last_progress = now;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Flushed::Pending,
            Err(_) => return Flushed::Failed,
        }
    }
}

enum Received {
    Bytes,
    Nothing,
    End,
}

/// One non-blocking read into the request buffer.
fn read_some(c: &mut Conn) -> Received {
    let mut chunk = [0u8; CHUNK];
    loop {
        match (&*c.stream).read(&mut chunk) {
            Ok(0) => return Received::End,
            Ok(n) => {
                c.buf.extend_from_slice(&chunk[..n]);
                return Received::Bytes;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Received::Nothing,
            Err(_) => return Received::End,
        }
    }
}

/// Discards what the client still sends after a refusal, up to [`LINGER_BYTES`] or `until`.
fn linger(mut c: Conn, until: Instant, mut drained: usize) -> Next {
    let mut sink = [0u8; CHUNK];
    while drained < LINGER_BYTES && Instant::now() < until {
        match (&*c.stream).read(&mut sink) {
            Ok(0) => return Next::Close,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                c.phase = Phase::Lingering { until, drained };
                return Next::Park(c);
            }
            Err(_) => return Next::Close,
        }
    }
    Next::Close
}

/// Readies a connection for parking: its idle deadline starts now, a partial request's clock starts if
/// it has not, and an idle one gives back its buffer, so thousands of idle sockets cost no request-sized
/// memory.
pub(super) fn park(mut c: Conn) -> Conn {
    let now = Instant::now();
    c.parked_at = now;
    if c.buf.is_empty() {
        c.buf = Vec::new();
        c.request_started = None;
    } else if c.request_started.is_none() {
        c.request_started = Some(now);
    }
    c
}
