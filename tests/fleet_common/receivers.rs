//! Counting peers for the lab's three record streams, each on a free loopback port and run by one thread
//! of the test until dropped: [`InformAcker`] answers every INFORM with a Response (as a manager does) and
//! remembers which request ids it saw; [`SyslogSink`] accepts RFC 6587 octet-counted syslog over TCP and
//! keeps each host's `sequenceId`s; [`FlowSink`] reads NetFlow v9 packets and remembers each source's
//! sequence numbers. Each answers "what is missing, what came twice" in O(1) memory per record, so a
//! ten-minute soak at `-traffic 10ms` fits. They never judge: the test compares them with the device
//! counters.
#![allow(dead_code)]

use nl6::lab::snmp::{pdu, Message};
use nl6::lab::syslog::parse_octet_counted;
use std::collections::HashMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a receiver thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// A set of small non-negative numbers (sequence numbers, request ids) as a growable bitmap: which were
/// seen, how many came more than once.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    bits: Vec<u64>,
    pub distinct: u64,
    pub repeats: u64,
}

impl Seen {
    pub fn insert(&mut self, n: u64) {
        let (word, bit) = ((n / 64) as usize, n % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1 + word / 2, 0);
        }
        if self.bits[word] & (1 << bit) != 0 {
            self.repeats += 1;
        } else {
            self.bits[word] |= 1 << bit;
            self.distinct += 1;
        }
    }
    pub fn contains(&self, n: u64) -> bool {
        self.bits
            .get((n / 64) as usize)
            .is_some_and(|w| w & (1 << (n % 64)) != 0)
    }
    /// How many of `range` were never seen.
    pub fn missing(&self, range: std::ops::Range<u64>) -> u64 {
        range.filter(|n| !self.contains(*n)).count() as u64
    }
}

/// A stop flag and the thread that watches it; dropping stops and joins.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn(name: &str, body: impl FnOnce(Arc<AtomicBool>) + Send + 'static) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(s))
            .unwrap();
        Worker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `setsockopt(SOL_SOCKET, opt, value)`; true when the kernel took it.
fn set_int_option(s: &impl AsRawFd, opt: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: `value` is a valid c_int for the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// A UDP socket on 127.0.0.1:0 with a receive buffer big enough that a loaded machine's scheduling
/// delays do not overflow it (as root the bound `rmem_max` is lifted with `SO_RCVBUFFORCE`), a read
/// timeout of [`POLL`].
fn roomy_udp_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let size: libc::c_int = 16 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if set_int_option(&s, opt, size) {
            break;
        }
    }
    s.set_read_timeout(Some(POLL)).unwrap();
    s
}

/// Datagrams the kernel dropped at the local UDP `port` because its buffer was full (the `drops` column
/// of /proc/net/udp): a gap the receiver, not the sender, caused.
pub fn udp_drops(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&local))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// Answers every INFORM it receives with a Response carrying the same request id and varbinds.
pub struct InformAcker {
    pub addr: SocketAddr,
    ids: Arc<Mutex<Seen>>,
    _worker: Worker,
}

impl InformAcker {
    pub fn start() -> InformAcker {
        let sock = roomy_udp_socket();
        let addr = sock.local_addr().unwrap();
        let ids = Arc::new(Mutex::new(Seen::default()));
        let seen = ids.clone();
        let worker = Worker::spawn("inform-acker", move |stop| {
            let mut buf = vec![0u8; 65_535];
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(mut m) = Message::decode(&buf[..n]) else {
                    continue;
                };
                if m.pdu_type != pdu::INFORM {
                    continue;
                }
                seen.lock().unwrap().insert(m.request_id as u64);
                m.pdu_type = pdu::RESPONSE;
                let _ = sock.send_to(&m.encode(), from);
            }
        });
        InformAcker {
            addr,
            ids,
            _worker: worker,
        }
    }
    /// The request ids seen so far.
    pub fn seen(&self) -> Seen {
        self.ids.lock().unwrap().clone()
    }
    pub fn kernel_drops(&self) -> u64 {
        udp_drops(self.addr.port())
    }
}

/// One host's syslog stream as the sink saw it.
#[derive(Debug, Default, Clone)]
pub struct Stream {
    /// The sequenceIds received (and how many came twice).
    pub ids: Seen,
    /// Messages whose sequenceId was below the highest before it (two senders' messages swapped on the
    /// way into the queue: reordered, not lost).
    pub out_of_order: u64,
    pub highest: u64,
}

/// A receiver that stops reading for a while: `after` the first connection is accepted it reads nothing
/// for `pause`, with a receive buffer of about `rcvbuf` bytes, so the sender's socket fills up, its
/// writes block and time out part-way through a frame and its queue overflows (a slow reader).
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    pub after: Duration,
    pub pause: Duration,
    pub rcvbuf: usize,
}

/// A TCP syslog receiver: accepts connections one after another (a sender that reconnects is
/// counted) and keeps the `[meta sequenceId]`s per HOSTNAME.
pub struct SyslogSink {
    pub addr: SocketAddr,
    streams: Arc<Mutex<HashMap<String, Stream>>>,
    pub connections: Arc<std::sync::atomic::AtomicU64>,
    _worker: Worker,
}

impl SyslogSink {
    pub fn start() -> SyslogSink {
        SyslogSink::start_with(None)
    }
    /// A sink that stalls once as `stall` says (none: reads as fast as it can).
    pub fn start_with(stall: Option<Stall>) -> SyslogSink {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        if let Some(s) = stall {
            // Accepted sockets inherit the listener's buffer size.
            set_int_option(&listener, libc::SO_RCVBUF, s.rcvbuf as libc::c_int);
        }
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let streams = Arc::new(Mutex::new(HashMap::new()));
        let connections = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (st, conns) = (streams.clone(), connections.clone());
        let worker = Worker::spawn("syslog-sink", move |stop| {
            let mut stall = stall.map(|s| (s, None));
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        conns.fetch_add(1, Ordering::Relaxed);
                        read_stream(conn, &st, &stop, &mut stall);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        SyslogSink {
            addr,
            streams,
            connections,
            _worker: worker,
        }
    }
    /// Each host's stream so far.
    pub fn streams(&self) -> HashMap<String, Stream> {
        self.streams.lock().unwrap().clone()
    }
}

/// A stall still to come and, once the first connection came, when it starts.
type StallState = Option<(Stall, Option<std::time::Instant>)>;

fn read_stream(
    mut conn: TcpStream,
    streams: &Mutex<HashMap<String, Stream>>,
    stop: &AtomicBool,
    stall: &mut StallState,
) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(POLL)).unwrap();
    let (mut acc, mut buf) = (Vec::new(), vec![0u8; 64 * 1024]);
    while !stop.load(Ordering::Relaxed) {
        if let Some((s, at)) = stall {
            let at = *at.get_or_insert_with(|| std::time::Instant::now() + s.after);
            if std::time::Instant::now() >= at {
                let until = at + s.pause;
                while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                *stall = None;
            }
        }
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => acc.extend_from_slice(&buf[..n]),
            Err(_) => continue,
        }
        let (msgs, used) = parse_octet_counted(&acc).expect("octet-counted framing");
        acc.drain(..used);
        let mut g = streams.lock().unwrap();
        for m in msgs {
            let (host, seq) = host_and_sequence(&m);
            let s = g.entry(host).or_default();
            s.ids.insert(seq);
            s.out_of_order += u64::from(seq < s.highest);
            s.highest = s.highest.max(seq);
        }
    }
}

/// HOSTNAME (the fourth token of an RFC 5424 header) and `sequenceId` of one message.
fn host_and_sequence(msg: &[u8]) -> (String, u64) {
    let s = String::from_utf8_lossy(msg);
    let host = s.split(' ').nth(2).unwrap_or("").to_string();
    let at = s.find("sequenceId=\"").expect("a sequenceId") + 12;
    let seq = s[at..].split('"').next().unwrap().parse().unwrap();
    (host, seq)
}

/// A NetFlow v9 collector that keeps, per source id, the set of packet sequence numbers received.
pub struct FlowSink {
    pub addr: SocketAddr,
    sources: Arc<Mutex<HashMap<u32, Seen>>>,
    _worker: Worker,
}

impl FlowSink {
    pub fn start() -> FlowSink {
        let sock = roomy_udp_socket();
        let addr = sock.local_addr().unwrap();
        let sources: Arc<Mutex<HashMap<u32, Seen>>> = Arc::new(Mutex::new(HashMap::new()));
        let src = sources.clone();
        let worker = Worker::spawn("flow-sink", move |stop| {
            let mut buf = vec![0u8; 65_535];
            while !stop.load(Ordering::Relaxed) {
                let Ok(n) = sock.recv(&mut buf) else {
                    continue;
                };
                // Header: version(2) count(2) uptime(4) secs(4) sequence(4) source id(4).
                if n < 20 || buf[..2] != 9u16.to_be_bytes() {
                    continue;
                }
                let word = |at: usize| u32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
                let (sequence, source) = (word(12), word(16));
                src.lock()
                    .unwrap()
                    .entry(source)
                    .or_default()
                    .insert(u64::from(sequence));
            }
        });
        FlowSink {
            addr,
            sources,
            _worker: worker,
        }
    }
    pub fn sources(&self) -> HashMap<u32, Seen> {
        self.sources.lock().unwrap().clone()
    }
    pub fn kernel_drops(&self) -> u64 {
        udp_drops(self.addr.port())
    }
}
