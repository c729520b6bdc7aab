//! Syslog export: RFC 5424 message formatting, RFC 6587 octet-counting framing, and the exporter whose
//! fire funnel (scoped `syslog`) sends one device's message over UDP or hands it to the TCP sender.
//!
//! Over TCP one long-lived sender thread (labelled `syslog` at birth) owns the connection: it reconnects
//! with exponential backoff, checks that the peer has not closed before each write, writes the queued
//! frames many at a time (one `write` and one liveness check per batch, not per message, so it keeps up
//! with a fleet's traffic on a loaded machine), and removes a message from the bounded queue and counts it
//! sent only once it was written whole, so a receiver restart loses nothing the queue can hold; messages
//! beyond the bound are dropped at the funnel and counted on their device (their `sequenceId` is a gap the
//! receiver sees). A write retries interrupted calls without cutting its timeout short or extending it.
//! Formatting is plain values; only [`SyslogExporter`] and the sender touch sockets.
#![forbid(unsafe_code)]

use super::device::{Device, DeviceCounters};
use super::send::{send_as, Outbox};
use crate::labels::{self, Subsystem};
use crate::timefmt::Timestamp;
use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub use super::target::Transport;

/// One SD-ELEMENT: an SD-ID and its parameters.
#[derive(Debug, Clone, Copy)]
pub struct SdElement<'a> {
    pub id: &'a str,
    pub params: &'a [(&'a str, &'a str)],
}

/// An RFC 5424 message. Empty header fields print as the NILVALUE `-`.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub facility: u8,
    pub severity: u8,
    pub timestamp: Option<Timestamp>,
    pub hostname: &'a str,
    pub app_name: &'a str,
    pub procid: &'a str,
    pub msgid: &'a str,
    pub structured_data: &'a [SdElement<'a>],
    pub msg: &'a str,
    /// Prefix MSG with the UTF-8 BOM, which RFC 5424 6.4 uses to mark MSG as UTF-8.
    pub bom: bool,
}

/// Facility local7, used by network gear.
pub const FACILITY_LOCAL7: u8 = 23;
pub const SEVERITY_WARNING: u8 = 4;
pub const SEVERITY_NOTICE: u8 = 5;
pub const SEVERITY_INFO: u8 = 6;

impl Message<'_> {
    /// Appends the SYSLOG-MSG bytes.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        use std::fmt::Write as _;
        let mut s = String::with_capacity(128 + self.msg.len());
        let pri = self.facility as u32 * 8 + self.severity as u32;
        let _ = write!(s, "<{pri}>1 ");
        match &self.timestamp {
            Some(t) => {
                let _ = t.write_to(&mut s);
            }
            None => s.push('-'),
        }
        for field in [self.hostname, self.app_name, self.procid, self.msgid] {
            s.push(' ');
            s.push_str(if field.is_empty() { "-" } else { field });
        }
        s.push(' ');
        if self.structured_data.is_empty() {
            s.push('-');
        }
        for e in self.structured_data {
            s.push('[');
            s.push_str(e.id);
            for (k, v) in e.params {
                let _ = write!(s, " {k}=\"");
                for c in v.chars() {
                    // RFC 5424 6.3.3: '"', '\' and ']' are escaped inside PARAM-VALUE.
                    if matches!(c, '"' | '\\' | ']') {
                        s.push('\\');
                    }
                    s.push(c);
                }
                s.push('"');
            }
            s.push(']');
        }
        out.extend_from_slice(s.as_bytes());
        if !self.msg.is_empty() || self.bom {
            out.push(b' ');
            if self.bom {
                out.extend_from_slice(b"\xef\xbb\xbf");
            }
            out.extend_from_slice(self.msg.as_bytes());
        }
    }
}

/// Appends one RFC 6587 octet-counted frame: `MSG-LEN SP SYSLOG-MSG`.
pub fn frame_octet_counting(msg: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(msg.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(msg);
}

/// A frame header that is not `digits SP` (the digits as received): a framing error a receiver
/// cannot recover from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FramingError(pub String);

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad octet count {:?}", self.0)
    }
}

impl std::error::Error for FramingError {}

/// Splits octet-counted frames off the front of `buf`: the complete messages and how many bytes they used.
/// `Err` on a frame header that is not `digits SP`.
pub fn parse_octet_counted(buf: &[u8]) -> Result<(Vec<Vec<u8>>, usize), FramingError> {
    let mut at = 0;
    let mut msgs = Vec::new();
    while at < buf.len() {
        let Some(sp) = buf[at..].iter().position(|b| *b == b' ') else {
            break;
        };
        let digits = &buf[at..at + sp];
        if digits.is_empty()
            || digits.len() > 9
            || !digits.iter().all(u8::is_ascii_digit)
            || digits[0] == b'0'
        {
            return Err(FramingError(String::from_utf8_lossy(digits).into_owned()));
        }
        let len: usize = std::str::from_utf8(digits)
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        let start = at + sp + 1;
        if buf.len() < start + len {
            break;
        }
        msgs.push(buf[start..start + len].to_vec());
        at = start + len;
    }
    Ok((msgs, at))
}

/// The TCP send queue shared by the funnel (producer) and the sender thread (consumer).
#[derive(Debug)]
pub struct SendQueue {
    items: Mutex<VecDeque<(usize, Vec<u8>)>>,
    ready: Condvar,
    capacity: usize,
}

impl SendQueue {
    pub fn new(capacity: usize) -> SendQueue {
        SendQueue {
            items: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            ready: Condvar::new(),
            capacity,
        }
    }
    /// Enqueues a frame for device `device`; false when full (the caller counts the drop).
    pub fn push(&self, device: usize, frame: Vec<u8>) -> bool {
        let mut q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= self.capacity {
            return false;
        }
        q.push_back((device, frame));
        self.ready.notify_one();
        true
    }
    pub fn len(&self) -> usize {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Wakes the sender (used at stop).
    pub fn wake(&self) {
        self.ready.notify_all();
    }
    /// Copies frames from the front into `batch` (whole frames, at least one, up to `max_bytes`), waiting
    /// at most `wait` for the first; false when none came. The frames stay queued until [`Self::pop`].
    fn front_batch(&self, wait: Duration, max_bytes: usize, batch: &mut Batch) -> bool {
        batch.clear();
        let q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let (q, _) = self
            .ready
            .wait_timeout_while(q, wait, |q| q.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        for (device, frame) in q.iter() {
            if !batch.frames.is_empty() && batch.bytes.len() + frame.len() > max_bytes {
                break;
            }
            batch.bytes.extend_from_slice(frame);
            batch.frames.push((*device, frame.len()));
        }
        !batch.frames.is_empty()
    }
    /// Removes the `n` front frames (the sender is the only consumer: they are the ones it copied).
    fn pop(&self, n: usize) {
        let mut q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let n = n.min(q.len());
        q.drain(..n);
    }
    /// Sleeps up to `d` unless woken (stop).
    fn nap(&self, d: Duration) {
        let q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.ready.wait_timeout(q, d);
    }
}

/// Frames copied off the queue's front to go out in one write: their bytes, and each one's device and
/// length, so a write that stops part-way tells which frames went out whole.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    frames: Vec<(usize, usize)>,
}

impl Batch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.frames.clear();
    }
    /// How many frames from the front lie wholly within the first `written` bytes.
    fn whole_frames(&self, written: usize) -> usize {
        let mut end = 0;
        self.frames
            .iter()
            .take_while(|(_, len)| {
                end += len;
                end <= written
            })
            .count()
    }
}

/// Where an exporter's messages go.
#[derive(Debug)]
enum Sink {
    Udp {
        socket: UdpSocket,
        target: SocketAddr,
    },
    Tcp {
        queue: Arc<SendQueue>,
    },
}

/// The syslog exporter of a fleet.
#[derive(Debug)]
pub struct SyslogExporter {
    sink: Sink,
    procid: String,
}

impl SyslogExporter {
    /// A UDP exporter sending from `socket`.
    pub fn udp(socket: UdpSocket, target: SocketAddr) -> SyslogExporter {
        SyslogExporter {
            sink: Sink::Udp { socket, target },
            procid: std::process::id().to_string(),
        }
    }
    /// A TCP exporter feeding `queue` (drained by [`run_tcp_sender`]).
    pub fn tcp(queue: Arc<SendQueue>) -> SyslogExporter {
        SyslogExporter {
            sink: Sink::Tcp { queue },
            procid: std::process::id().to_string(),
        }
    }

    /// The fire funnel: one message from `device`, scoped `syslog` for its duration.
    pub fn fire(
        &self,
        device: &Device,
        severity: u8,
        msgid: &str,
        text: &str,
        now: SystemTime,
    ) -> bool {
        labels::with(Subsystem::SYSLOG, || {
            self.fire_unscoped(device, severity, msgid, text, now)
        })
    }

    /// The funnel's work without the label scope (the label-cost benchmark compares the two).
    pub fn fire_unscoped(
        &self,
        device: &Device,
        severity: u8,
        msgid: &str,
        text: &str,
        now: SystemTime,
    ) -> bool {
        self.fire_to(device, severity, msgid, text, now, None)
    }

    /// The funnel's batched form, scoped `syslog`: over UDP the message goes into `out`, sent (and
    /// counted) at [`SyslogExporter::flush`] with the others that fell due together; over TCP it joins
    /// the send queue as [`SyslogExporter::fire`] does. False when the TCP queue was full.
    pub fn fire_into(
        &self,
        device: &Device,
        severity: u8,
        msgid: &str,
        text: &str,
        now: SystemTime,
        out: &mut Outbox,
    ) -> bool {
        labels::with(Subsystem::SYSLOG, || {
            self.fire_to(device, severity, msgid, text, now, Some(out))
        })
    }

    /// One message: over UDP sent now (and counted), or into `out` when batching; over TCP queued.
    fn fire_to(
        &self,
        device: &Device,
        severity: u8,
        msgid: &str,
        text: &str,
        now: SystemTime,
        out: Option<&mut Outbox>,
    ) -> bool {
        crate::lab::probe!("syslog.fire");
        let body = self.body(device, severity, msgid, text, now);
        match (&self.sink, out) {
            (Sink::Udp { target, .. }, Some(out)) => {
                out.push(device, &body, *target);
                true
            }
            (Sink::Udp { socket, target }, None) => {
                Self::count(device, send_as(device, socket, &body, *target))
            }
            (Sink::Tcp { queue }, _) => Self::enqueue(queue, device, &body),
        }
    }

    /// Sends what [`SyslogExporter::fire_into`] gathered (devices by index in `devices`), counting each,
    /// scoped `syslog`. Nothing to do over TCP.
    pub fn flush(&self, out: &mut Outbox, devices: &[Arc<Device>]) {
        if let Sink::Udp { socket, .. } = &self.sink {
            labels::with(Subsystem::SYSLOG, || {
                out.flush(socket, |d, ok| {
                    Self::count(&devices[d], ok);
                })
            })
        }
    }

    /// Counts one UDP message sent, or refused by the OS.
    fn count(device: &Device, ok: bool) -> bool {
        let c = &device.counters;
        DeviceCounters::inc(if ok { &c.syslog_sent } else { &c.send_errors });
        ok
    }

    /// Frames `body` into the TCP queue; a full queue drops it, counted.
    fn enqueue(queue: &SendQueue, device: &Device, body: &[u8]) -> bool {
        let mut frame = Vec::with_capacity(body.len() + 8);
        frame_octet_counting(body, &mut frame);
        if queue.push(device.index(), frame) {
            true
        } else {
            DeviceCounters::inc(&device.counters.syslog_dropped);
            false
        }
    }

    /// One RFC 5424 message from `device`, its `[meta sequenceId]` the device's next.
    fn body(
        &self,
        device: &Device,
        severity: u8,
        msgid: &str,
        text: &str,
        now: SystemTime,
    ) -> Vec<u8> {
        // `[meta sequenceId]` (RFC 5424 7.3.1) lets a receiver see gaps.
        let n = device
            .counters
            .syslog_sequence
            .fetch_add(1, Ordering::Relaxed)
            % 2_147_483_647
            + 1;
        let seq_text = n.to_string();
        let meta = [("sequenceId", seq_text.as_str())];
        let sd = [SdElement {
            id: "meta",
            params: &meta,
        }];
        let m = Message {
            facility: FACILITY_LOCAL7,
            severity,
            timestamp: Some(Timestamp::utc_millis(now)),
            hostname: &device.name(),
            app_name: "nl6",
            procid: &self.procid,
            msgid,
            structured_data: &sd,
            msg: text,
            bom: false,
        };
        let mut body = Vec::with_capacity(160 + text.len());
        m.write_to(&mut body);
        body
    }
}

/// Backoff bounds of the TCP reconnect loop.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The TCP sender: the reconnect loop (run in a thread labelled `syslog` at birth). Drains `queue` to
/// `target` until `stop`; `devices[i]` gets the sent count of its messages.
pub fn run_tcp_sender(
    queue: &SendQueue,
    target: SocketAddr,
    devices: &[Arc<Device>],
    stop: &AtomicBool,
) {
    crate::lab::probe!("syslog.reconnect");
    let mut backoff = BACKOFF_MIN;
    // One line per outage (as the push logs its first failure): set at the first failed connect, cleared
    // once a connection is made.
    let mut outage_logged = false;
    let mut batch = Batch::default();
    while !stop.load(Ordering::Relaxed) {
        let mut conn = match TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
            Ok(c) => c,
            Err(e) => {
                if !std::mem::replace(&mut outage_logged, true) {
                    eprintln!("{}", outage_line(target, &e));
                }
                queue.nap(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        outage_logged = false;
        backoff = BACKOFF_MIN;
        if prepare(&conn).is_ok() {
            drain(queue, &mut conn, devices, stop, &mut batch);
        }
    }
}

/// Sends the queue's frames over `conn`, many per write, until the connection fails or `stop`. A frame
/// leaves the queue and is counted sent on its device only once written whole; one cut by a failed write
/// stays queued and goes out whole on the next connection (the receiver discards the cut tail at EOF).
fn drain(
    queue: &SendQueue,
    conn: &mut TcpStream,
    devices: &[Arc<Device>],
    stop: &AtomicBool,
    batch: &mut Batch,
) {
    while !stop.load(Ordering::Relaxed) {
        if !queue.front_batch(Duration::from_millis(200), BATCH_BYTES, batch) {
            if !peer_alive(conn) {
                return;
            }
            continue;
        }
        if !peer_alive(conn) {
            // The frames stay queued and go out whole on the next connection.
            return;
        }
        let (written, result) = write_until(conn, &batch.bytes, WRITE_TIMEOUT);
        let whole = batch.whole_frames(written);
        queue.pop(whole);
        for (dev, _) in &batch.frames[..whole] {
            if let Some(d) = devices.get(*dev) {
                DeviceCounters::inc(&d.counters.syslog_sent);
            }
        }
        if result.is_err() {
            return;
        }
    }
}

/// A fresh connection's options: no Nagle delay (a batch is one segment train), the write timeout.
fn prepare(conn: &TcpStream) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_write_timeout(Some(WRITE_TIMEOUT))
}

/// The most bytes of frames one write carries.
const BATCH_BYTES: usize = 64 * 1024;
/// How long a write may make no progress before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Writes `bytes`, retrying interrupted calls, and gives up once `timeout` passed without progress
/// (a signal neither ends the wait early nor extends it: the socket's own timeout is set to what remains
/// of it before each retry). How many bytes went out, and why it stopped short.
fn write_until(
    conn: &mut TcpStream,
    bytes: &[u8],
    timeout: Duration,
) -> (usize, std::io::Result<()>) {
    let (mut done, mut deadline) = (0, Instant::now() + timeout);
    // What the socket's timeout holds: the full `timeout` (set at connect), what is left after a signal.
    let (mut set, mut interrupted) = (Some(timeout), false);
    while done < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (done, Err(ErrorKind::TimedOut.into()));
        }
        let want = if interrupted { left } else { timeout };
        if set != Some(want) {
            if let Err(e) = conn.set_write_timeout(Some(want)) {
                return (done, Err(e));
            }
            set = Some(want);
        }
        match conn.write(&bytes[done..]) {
            Ok(0) => return (done, Err(ErrorKind::WriteZero.into())),
            Ok(n) => {
                done += n;
                (deadline, interrupted) = (Instant::now() + timeout, false);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => interrupted = true,
            Err(e) => return (done, Err(e)),
        }
    }
    if set != Some(timeout) {
        // The next batch starts with the full timeout again.
        if let Err(e) = conn.set_write_timeout(Some(timeout)) {
            return (done, Err(e));
        }
    }
    (done, Ok(()))
}

/// The line logged when the TCP target cannot be reached (once per outage).
pub fn outage_line(target: SocketAddr, error: &std::io::Error) -> String {
    format!(
        "nl6: syslog: cannot connect to tcp://{target}: {error}; messages wait in the queue (beyond \
         -syslog-queue they are dropped and counted) and the sender retries every {}s at most",
        BACKOFF_MAX.as_secs()
    )
}

/// Whether the peer has not closed its side: a non-blocking peek sees EOF once the receiver closed, so we
/// never write a message into a connection that is already gone (it would be lost with the RST).
fn peer_alive(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return false;
    }
    let mut b = [0u8; 64];
    let alive = loop {
        match conn.peek(&mut b) {
            Ok(0) => break false,
            Ok(_) => {
                // A receiver has nothing to say on a syslog stream; discard it so peek keeps working.
                let _ = std::io::Read::read(&mut &*conn, &mut b);
                break true;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
            Err(_) => break false,
        }
    };
    conn.set_nonblocking(false).is_ok() && alive
}

#[cfg(test)]
mod tests;
