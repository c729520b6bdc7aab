//! An SNMP load generator: GET sysName.0 (SNMPv2c) against any agent — nl6's devices, net-snmp's
//! `snmpd` — and its GET/s with the latency percentiles of the answers.
//!
//! Each client thread owns one UDP socket and keeps `-inflight` requests outstanding; every answer is
//! matched to its request by request id (the id names the in-flight slot, so a late answer to a request
//! given up on is counted, never mistaken for a newer one) and at once replaced by the next request.
//! The answers waiting are taken in one `recvmmsg` and their replacements leave in one `sendmmsg`
//! (`-single`: one datagram a call), so the generator, which shares the machine, spends as little of
//! it as it can. The requests go round robin over the targets: consecutive addresses from the first
//! (`-addrs N`, one `-device-net` fleet) or consecutive ports (`-ports N`, a per-port fleet): each
//! thread starts at its share's first and goes on over all of them, as one poller of a whole fleet does,
//! or with `-shard` keeps to its share (thread *i* of T to the *i*-th T-th), as pollers that split a
//! fleet between them do. A request
//! unanswered after [`GIVE_UP`] (or one the kernel refused to send) is counted lost and its slot sends
//! again; answers the kernel dropped at the generator's own socket are counted apart
//! (`client_drops`, from the start of the run). Prints one line, `key=value` pairs, for
//! scripts/bench-snmp.sh to read. Not a test: it measures.
//!
//! With `-rate R` the load is open-loop instead: R GETs a second in all, whatever the agent answers,
//! paced in ticks of [`TICK`] (what is due leaves at each tick, spread over the threads), so the latency
//! percentiles are those at that offered rate, not at the agent's maximum. Between ticks a thread sleeps
//! rather than waiting on its socket, so on a machine it shares with the agent it takes a core only for
//! what it sends and reads; each answer's latency runs from just before its request's send call to the
//! time the kernel stamped its arrival at the generator's socket (`SO_TIMESTAMPNS`), so the sleep does
//! not add to it. The time a request waited to leave after it fell due (the generator's own lag, when
//! it is short of CPU) is not in it either: it is reported apart, `send_lag_p99_us`. A request
//! unanswered 100 ms after the window closes is counted lost.
//!
//! Run: `cargo bench --bench snmp_load -- 127.0.0.1:PORT [-addrs N | -ports N] [-threads T]
//! [-inflight K | -rate R] [-single] [-shard] [-secs S] [-community C] [-ready-since UNIX_NS [-ready-within S]]`; with
//! `-ready-since` (when the agent was started, `date +%s%N`) it first sends one GET a millisecond to
//! the first target until one is answered (`-ready-within S`, 30 s unless told) and reports that time
//! as the agent's boot.
use nl6::lab::snmp::ber::{tag, Oid, Reader, Value};
use nl6::lab::snmp::{pdu, Message, VERSION_2C};
use nl6::netsys::{send_batch, Outgoing, RecvBatch, BATCH_MAX};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long an unanswered request is waited for before its slot sends a fresh one.
const GIVE_UP: Duration = Duration::from_secs(1);
/// Load before the measured window, so every socket and cache is warm.
const WARM_UP: Duration = Duration::from_millis(500);

struct Options {
    target: SocketAddrV4,
    addrs: u32,
    ports: u32,
    threads: usize,
    inflight: usize,
    secs: f64,
    community: String,
    /// GETs a second in all, open-loop (`-rate`); None: `inflight` outstanding per thread.
    rate: Option<f64>,
    /// One datagram a system call (`-single`), as a simple poller sends, instead of batches.
    single: bool,
    /// Each thread polls only its share of the targets (`-shard`), instead of all from its share on.
    shard: bool,
    /// Wall-clock time (ns since the epoch) the agent was started at: wait for its first answer and
    /// report the boot time.
    ready_since: Option<u128>,
    /// How long to wait for that first answer.
    ready_within: f64,
}

fn usage(why: &str) -> ! {
    eprintln!(
        "snmp_load: {why}\nusage: snmp_load HOST:PORT [-addrs N | -ports N] [-threads T] \
         [-inflight K | -rate R] [-single] [-shard] [-secs S] [-community C] [-ready-since UNIX_NS [-ready-within S]]"
    );
    std::process::exit(2)
}

fn options() -> Options {
    let mut o = Options {
        target: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 161),
        addrs: 1,
        ports: 1,
        threads: 2,
        inflight: 8,
        secs: 10.0,
        community: "public".into(),
        rate: None,
        single: false,
        shard: false,
        ready_since: None,
        ready_within: 30.0,
    };
    let mut target = None;
    // `cargo bench` adds `--bench`; nothing else starts with two dashes here.
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        let number = |v: String| -> f64 {
            v.parse()
                .ok()
                .filter(|n: &f64| *n > 0.0)
                .unwrap_or_else(|| usage(&format!("{a} {v}: not a positive number")))
        };
        match a.as_str() {
            "-addrs" => o.addrs = number(value()) as u32,
            "-ports" => o.ports = number(value()) as u32,
            "-threads" => o.threads = number(value()) as usize,
            "-inflight" => o.inflight = number(value()) as usize,
            "-secs" => o.secs = number(value()),
            "-rate" => o.rate = Some(number(value())),
            "-ready-within" => o.ready_within = number(value()),
            "-community" => o.community = value(),
            "-single" => o.single = true,
            "-shard" => o.shard = true,
            "-ready-since" => {
                let v = value();
                let ns = v
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("{a} {v}: not ns since the epoch")));
                o.ready_since = Some(ns);
            }
            _ if target.is_none() => {
                target = Some(a.parse().unwrap_or_else(|_| {
                    usage(&format!("{a}: not an IPv4 HOST:PORT (e.g. 127.0.0.1:1161)"))
                }))
            }
            _ => usage(&format!("{a}: unknown argument")),
        }
    }
    o.target = target.unwrap_or_else(|| usage("the agent's HOST:PORT is missing"));
    if o.addrs > 1 && o.ports > 1 {
        usage("-addrs and -ports exclude each other");
    }
    if o.shard && (o.addrs.max(o.ports) as usize) < o.threads {
        usage("-shard needs at least one target a thread (-addrs or -ports ≥ -threads)");
    }
    o
}

/// Every address the load goes to, in round-robin order: the `i`-th is computed, not stored (ten
/// million addresses would take 300 MB).
#[derive(Clone)]
struct Targets {
    ip: u32,
    port: u32,
    n: usize,
    by_addr: bool,
}

impl Targets {
    fn new(o: &Options) -> Targets {
        let n = o.addrs.max(o.ports);
        let (ip, port) = (u32::from(*o.target.ip()), o.target.port() as u32);
        if o.addrs > 1 && ip.checked_add(n - 1).is_none() {
            usage("-addrs runs past 255.255.255.255");
        }
        if o.ports > 1 && port + (n - 1) > u16::MAX as u32 {
            usage("-ports runs past port 65535");
        }
        Targets {
            ip,
            port,
            n: n as usize,
            by_addr: o.addrs > 1,
        }
    }

    fn len(&self) -> usize {
        self.n
    }

    /// The `i`-th of `t` consecutive shares (sizes differing by at most one).
    fn share(&self, i: usize, t: usize) -> Targets {
        let (from, to) = (i * self.n / t, (i + 1) * self.n / t);
        let (ip, port) = if self.by_addr {
            (self.ip + from as u32, self.port)
        } else {
            (self.ip, self.port + from as u32)
        };
        Targets {
            ip,
            port,
            n: to - from,
            by_addr: self.by_addr,
        }
    }

    /// The `i`-th target, round robin.
    fn get(&self, i: usize) -> SocketAddr {
        let i = (i % self.n) as u32;
        let (ip, port) = if self.by_addr {
            (self.ip + i, self.port)
        } else {
            (self.ip, self.port + i)
        };
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port as u16))
    }
}

/// A GET sysName.0 with a four-byte request id, and where that id sits, so each request patches it.
fn template(community: &str) -> (Vec<u8>, usize) {
    const MARK: i32 = 0x7a5a_5a5a;
    let bytes = Message {
        version: VERSION_2C,
        community: community.as_bytes().to_vec(),
        pdu_type: pdu::GET,
        request_id: MARK,
        error_status: 0,
        error_index: 0,
        varbinds: vec![(Oid(vec![1, 3, 6, 1, 2, 1, 1, 5, 0]), Value::Null)],
    }
    .encode();
    let at = bytes
        .windows(4)
        .position(|w| w == MARK.to_be_bytes())
        .expect("the request id in the encoded GET");
    (bytes, at)
}

/// The request id and error status of a Response, without allocating; None for anything else.
fn answer_id(bytes: &[u8]) -> Option<(i32, i64)> {
    let mut msg = Reader::new(bytes).read_constructed(tag::SEQUENCE).ok()?;
    msg.read_integer().ok()?;
    msg.read_octets().ok()?;
    let (t, body) = msg.read_tlv().ok()?;
    if t != pdu::RESPONSE {
        return None;
    }
    let mut p = Reader::new(body);
    let id = i32::try_from(p.read_integer().ok()?).ok()?;
    Some((id, p.read_integer().ok()?))
}

/// A client thread's socket: a receive buffer as large as the host allows (a generator late by a tick
/// must not lose answers the agent sent), and its drops counted (`SO_RXQ_OVFL`).
fn client_socket() -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind the client socket");
    nl6::netsys::deepen_receive_buffer(&sock, 16 << 20)
        .expect("the client socket's receive buffer");
    nl6::netsys::count_drops(&sock).expect("SO_RXQ_OVFL on the client socket");
    sock
}

/// What one client thread counted in the measured window.
#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u32>,
    /// Answers the kernel dropped at this client's own full receive buffer (its `SO_RXQ_OVFL` count):
    /// lost to the generator, not the agent.
    client_drops: u64,
    lost: u64,
    late: u64,
    errors: u64,
    /// Open-loop: how late each request left after it fell due (the generator's own lag, not in
    /// `latencies_ns`).
    send_lags_ns: Vec<u32>,
    /// Open-loop: answers that came without an arrival stamp (timed at the read instead).
    unstamped: u64,
}

/// An outstanding request: its id (slot + round × inflight, kept in the template's four bytes) and
/// when it left.
struct Slot {
    id: i32,
    sent: Instant,
}

/// The slot's next request id: one round of `k` on, back to the first round before i32 overflows.
fn next_id(id: i32, base: i32, k: i32) -> i32 {
    if id > i32::MAX - k {
        base + (id - base) % k
    } else {
        id + k
    }
}

/// One client thread: `inflight` requests outstanding on one socket until `end`; counts from `measure`.
/// Batched: one `recvmmsg` takes every answer waiting (waiting for the first), and one `sendmmsg` sends
/// their replacements, so the generator spends two system calls a batch, not two a request, and leaves
/// the machine's CPU to the agent it measures. `-single` sends and receives one datagram a call instead.
fn client(o: &Options, targets: &Targets, first: usize, measure: Instant, end: Instant) -> Tally {
    let sock = client_socket();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("read timeout");
    let (template, at) = template(&o.community);
    let k = o.inflight as i32;
    let base = 0x0100_0000; // keeps every id four bytes long
                            // Each slot's request: the template with the slot's current id in its four bytes.
    let mut reqs: Vec<Vec<u8>> = vec![template; o.inflight];
    let mut slots: Vec<Slot> = (0..k)
        .map(|s| Slot {
            id: base + s,
            sent: Instant::now(),
        })
        .collect();
    let mut next = first;
    let mut due: Vec<usize> = (0..o.inflight).collect();
    let mut t = Tally::default();
    let mut batch = RecvBatch::new(if o.single { 1 } else { BATCH_MAX }, 2048);
    loop {
        send_due(
            &sock, o.single, targets, &mut next, &mut due, &mut slots, &mut reqs, at,
        );
        let now = Instant::now();
        if now >= end {
            return t;
        }
        if batch.recv(&sock).is_ok() {
            let received = Instant::now();
            for r in batch.iter() {
                t.client_drops = t.client_drops.max(r.dropped.map_or(0, u64::from));
                match answer_id(r.bytes) {
                    Some((id, status))
                        if id >= base && slots[((id - base) % k) as usize].id == id =>
                    {
                        let s = ((id - base) % k) as usize;
                        if received >= measure {
                            t.latencies_ns
                                .push((received - slots[s].sent).as_nanos() as u32);
                            t.errors += (status != 0) as u64;
                        }
                        slots[s].id = next_id(id, base, k);
                        slots[s].sent = received; // not given up on before it is sent again
                        due.push(s);
                    }
                    _ => t.late += 1,
                }
            }
        }
        for (s, slot) in slots.iter_mut().enumerate() {
            if now.saturating_duration_since(slot.sent) > GIVE_UP {
                t.lost += (now >= measure) as u64;
                slot.id = next_id(slot.id, base, k);
                due.push(s);
            }
        }
    }
}

/// Sends the request of every slot in `due` (each with its slot's id, to the next target round robin)
/// in as few `sendmmsg` calls as the batch size allows (one `send_to` each with `single`); empties
/// `due`.
#[allow(clippy::too_many_arguments)]
fn send_due(
    sock: &UdpSocket,
    single: bool,
    targets: &Targets,
    next: &mut usize,
    due: &mut Vec<usize>,
    slots: &mut [Slot],
    reqs: &mut [Vec<u8>],
    at: usize,
) {
    if due.is_empty() {
        return;
    }
    let now = Instant::now();
    let mut to = Vec::with_capacity(due.len());
    for &s in due.iter() {
        reqs[s][at..at + 4].copy_from_slice(&slots[s].id.to_be_bytes());
        slots[s].sent = now;
        to.push(targets.get(*next));
        *next += 1;
    }
    if single {
        for (&s, to) in due.iter().zip(&to) {
            let _ = sock.send_to(&reqs[s], *to);
        }
    } else {
        let out: Vec<Outgoing<'_>> = due
            .iter()
            .zip(&to)
            .map(|(&s, &to)| Outgoing {
                bytes: &reqs[s],
                to,
                from: None,
            })
            .collect();
        // sendmmsg stops at a message the kernel refuses: the rest still go, one try each (a refused
        // one is never sent, so its slot gives up after GIVE_UP and counts as lost).
        let mut at = 0;
        while at < out.len() {
            at += send_batch(sock, &out[at..]).unwrap_or(0) + 1;
        }
    }
    due.clear();
}

/// How many requests an open-loop thread remembers: answers to older ones count as late.
const RATE_SLOTS: usize = 1 << 18;
/// The open-loop pacing tick (a sleep overshoots it by the timer slack, about 50 µs).
const TICK: Duration = Duration::from_micros(100);

/// One open-loop client thread: `rate` GETs a second on one socket from `start` to `end`, however
/// many are answered; counts the requests sent in `[measure, end)` and their answers.
fn rate_client(
    o: &Options,
    targets: &Targets,
    first: usize,
    rate: f64,
    (start, measure, end): (Instant, Instant, Instant),
) -> Tally {
    let sock = client_socket();
    sock.set_nonblocking(true).expect("non-blocking");
    nl6::netsys::stamp_arrivals(&sock).expect("SO_TIMESTAMPNS on the client socket");
    let (template, at) = template(&o.community);
    let mut reqs: Vec<Vec<u8>> = vec![template; if o.single { 1 } else { BATCH_MAX }];
    let base = 0x0100_0000i32;
    // Per slot: the id it holds, when it left (the wall clock, as the kernel stamps arrivals), and
    // whether it counts (sent in the window, unanswered).
    let mut sent_at: Vec<(i32, SystemTime, bool)> = vec![(0, UNIX_EPOCH, false); RATE_SLOTS];
    let (mut t, mut sent, mut counted) = (Tally::default(), 0u64, 0u64);
    let mut batch = RecvBatch::new(if o.single { 1 } else { BATCH_MAX }, 2048);
    let drain_until = end + Duration::from_millis(100);
    let mut tick = start;
    loop {
        let now = Instant::now();
        if now >= drain_until {
            break;
        }
        let due = if now < end {
            ((now - start).as_secs_f64() * rate) as u64
        } else {
            sent
        };
        while sent < due {
            // Up to one batch of requests, each with its own id, sent in one sendmmsg.
            let n = ((due - sent) as usize).min(reqs.len());
            let ids: Vec<i32> = (0..n as u64)
                .map(|j| base + ((sent + j) % (i32::MAX as u64 - base as u64)) as i32)
                .collect();
            for (req, id) in reqs.iter_mut().zip(&ids) {
                req[at..at + 4].copy_from_slice(&id.to_be_bytes());
            }
            let out: Vec<Outgoing<'_>> = (0..n)
                .map(|j| Outgoing {
                    bytes: &reqs[j],
                    to: targets.get(first + sent as usize + j),
                    from: None,
                })
                .collect();
            let leaving = SystemTime::now();
            let ok = send_batch(&sock, &out).unwrap_or(0);
            for (j, &id) in ids.iter().enumerate() {
                let in_window = now >= measure && j < ok;
                if in_window {
                    let fell_due = start + Duration::from_secs_f64((sent + j as u64) as f64 / rate);
                    let lag = now.saturating_duration_since(fell_due).as_nanos();
                    t.send_lags_ns.push(lag.min(u32::MAX as u128) as u32);
                }
                counted += in_window as u64;
                t.errors += (j >= ok && now >= measure) as u64;
                sent_at[(id - base) as usize % RATE_SLOTS] = (id, leaving, in_window);
            }
            sent += n as u64;
        }
        while batch.recv(&sock).is_ok() {
            for r in batch.iter() {
                t.client_drops = t.client_drops.max(r.dropped.map_or(0, u64::from));
                t.unstamped += r.arrived.is_none() as u64;
                let arrived = r.arrived.unwrap_or_else(SystemTime::now);
                match answer_id(r.bytes) {
                    Some((id, status)) if id >= base => {
                        let slot = &mut sent_at[(id - base) as usize % RATE_SLOTS];
                        if slot.0 == id && slot.2 {
                            let took = arrived.duration_since(slot.1).unwrap_or_default();
                            t.latencies_ns
                                .push(took.as_nanos().min(u32::MAX as u128) as u32);
                            t.errors += (status != 0) as u64;
                            slot.2 = false;
                        } else if slot.0 != id {
                            t.late += 1;
                        }
                    }
                    _ => t.late += 1,
                }
            }
        }
        // Sleeps to the next tick (none when behind: the next turn sends what fell due meanwhile).
        tick += TICK;
        let now = Instant::now();
        if tick > now {
            std::thread::sleep(tick - now);
        } else {
            tick = now;
        }
    }
    t.lost = counted.saturating_sub(t.latencies_ns.len() as u64);
    t
}

/// Seconds from `since` (ns since the epoch) to the first answer from `to`; exits when none comes.
fn wait_ready(o: &Options, to: SocketAddr, since: u128) -> f64 {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind the probe socket");
    sock.set_read_timeout(Some(Duration::from_millis(1)))
        .expect("read timeout");
    let (req, _) = template(&o.community);
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_secs_f64(o.ready_within) {
        let _ = sock.send_to(&req, to);
        if sock
            .recv(&mut buf)
            .is_ok_and(|n| answer_id(&buf[..n]).is_some())
        {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            return now.map_or(0, |d| d.as_nanos()).saturating_sub(since) as f64 / 1e9;
        }
    }
    eprintln!(
        "snmp_load: {to} did not answer a GET within {} s (is the agent up, the community right? \
         a big fleet may need a longer -ready-within)",
        o.ready_within
    );
    std::process::exit(1)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

fn main() {
    let o = options();
    let targets = Targets::new(&o);
    let ready = o
        .ready_since
        .map(|since| wait_ready(&o, targets.get(0), since));
    let start = Instant::now();
    let measure = start + WARM_UP;
    let end = measure + Duration::from_secs_f64(o.secs);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.threads)
            .map(|i| {
                let o = &o;
                // Sharded, a thread's targets are its share alone, from its first; else all of them,
                // from its share's first.
                let (targets, first) = if o.shard {
                    (targets.share(i, o.threads), 0)
                } else {
                    (targets.clone(), i * targets.len() / o.threads)
                };
                s.spawn(move || match o.rate {
                    Some(r) => rate_client(
                        o,
                        &targets,
                        first,
                        r / o.threads as f64,
                        (start, measure, end),
                    ),
                    None => client(o, &targets, first, measure, end),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let mut all: Vec<u32> = tallies
        .iter()
        .flat_map(|t| t.latencies_ns.iter().copied())
        .collect();
    all.sort_unstable();
    let mut lags: Vec<u32> = tallies
        .iter()
        .flat_map(|t| t.send_lags_ns.iter().copied())
        .collect();
    lags.sort_unstable();
    let sum = |f: fn(&Tally) -> u64| tallies.iter().map(f).sum::<u64>();
    println!(
        "gets_per_s={:.0} answered={} p50_us={:.1} p99_us={:.1} p999_us={:.1} lost={} client_drops={} late={} errors={} \
         targets={} threads={} inflight={} rate={} ready_s={} send_lag_p99_us={} unstamped={}",
        all.len() as f64 / o.secs,
        all.len(),
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        percentile(&all, 0.999),
        sum(|t| t.lost),
        sum(|t| t.client_drops),
        sum(|t| t.late),
        sum(|t| t.errors),
        targets.len(),
        o.threads,
        o.inflight,
        o.rate.map_or("-".to_string(), |r| format!("{r:.0}")),
        ready.map_or("-".to_string(), |r| format!("{r:.3}")),
        o.rate
            .map_or("-".to_string(), |_| format!("{:.1}", percentile(&lags, 0.99))),
        sum(|t| t.unstamped),
    );
}
