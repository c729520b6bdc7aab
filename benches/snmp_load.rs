//! An SNMP load generator: GET sysName.0 (SNMPv2c) against any agent — nl6's devices, net-snmp's
//! `snmpd` — and its GET/s with the latency percentiles of the answers.
//!
//! Each client thread owns one UDP socket and keeps `-inflight` requests outstanding; every answer is
//! matched to its request by request id (the id names the in-flight slot, so a late answer to a request
//! given up on is counted, never mistaken for a newer one) and at once replaced by the next request. The
//! requests go round robin over the targets: consecutive addresses from the first (`-addrs N`, one
//! `-device-net` fleet) or consecutive ports (`-ports N`, a per-port fleet). A request unanswered after
//! [`GIVE_UP`] is counted lost and its slot sends again. Prints one line, `key=value` pairs, for
//! scripts/bench-snmp.sh to read. Not a test: it measures.
//!
//! Run: `cargo bench --bench snmp_load -- 127.0.0.1:PORT [-addrs N | -ports N] [-threads T]
//! [-inflight K] [-secs S] [-community C] [-ready-since UNIX_NS]`; with `-ready-since` (when the agent
//! was started, `date +%s%N`) it first sends one GET a millisecond to the first target until one is
//! answered (30 s at most) and reports that time as the agent's boot.
use nl6::lab::snmp::ber::{tag, Oid, Reader, Value};
use nl6::lab::snmp::{pdu, Message, VERSION_2C};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

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
    /// Wall-clock time (ns since the epoch) the agent was started at: wait for its first answer and
    /// report the boot time.
    ready_since: Option<u128>,
}

fn usage(why: &str) -> ! {
    eprintln!(
        "snmp_load: {why}\nusage: snmp_load HOST:PORT [-addrs N | -ports N] [-threads T] \
         [-inflight K] [-secs S] [-community C] [-ready-since UNIX_NS]"
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
        ready_since: None,
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
            "-community" => o.community = value(),
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
    o
}

/// Every address the load goes to, in round-robin order.
fn targets(o: &Options) -> Vec<SocketAddr> {
    let (ip, port) = (u32::from(*o.target.ip()), o.target.port() as u32);
    let n = o.addrs.max(o.ports);
    (0..n)
        .map(|i| {
            let (ip, port) = if o.addrs > 1 {
                (ip + i, port)
            } else {
                (ip, port + i)
            };
            let port = u16::try_from(port).unwrap_or_else(|_| usage("-ports runs past port 65535"));
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
        })
        .collect()
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

/// What one client thread counted in the measured window.
#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u32>,
    lost: u64,
    late: u64,
    errors: u64,
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
fn client(
    o: &Options,
    targets: &[SocketAddr],
    first: usize,
    measure: Instant,
    end: Instant,
) -> Tally {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind the client socket");
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("read timeout");
    let (mut req, at) = template(&o.community);
    let k = o.inflight as i32;
    let base = 0x0100_0000; // keeps every id four bytes long
    let mut next = first;
    let mut send = |id: i32, req: &mut Vec<u8>| {
        req[at..at + 4].copy_from_slice(&id.to_be_bytes());
        let _ = sock.send_to(req, targets[next % targets.len()]);
        next += 1;
        Instant::now()
    };
    let mut slots: Vec<Slot> = (0..k)
        .map(|s| Slot {
            id: base + s,
            sent: send(base + s, &mut req),
        })
        .collect();
    let mut t = Tally::default();
    let mut buf = [0u8; 2048];
    loop {
        let now = Instant::now();
        if now >= end {
            return t;
        }
        if let Ok(n) = sock.recv(&mut buf) {
            let received = Instant::now();
            match answer_id(&buf[..n]) {
                Some((id, status)) if id >= base && slots[((id - base) % k) as usize].id == id => {
                    let slot = &mut slots[((id - base) % k) as usize];
                    if received >= measure {
                        t.latencies_ns
                            .push((received - slot.sent).as_nanos() as u32);
                        t.errors += (status != 0) as u64;
                    }
                    slot.id = next_id(id, base, k);
                    slot.sent = send(slot.id, &mut req);
                }
                _ => t.late += 1,
            }
        }
        for slot in slots.iter_mut().filter(|s| now - s.sent > GIVE_UP) {
            t.lost += (now >= measure) as u64;
            slot.id = next_id(slot.id, base, k);
            slot.sent = send(slot.id, &mut req);
        }
    }
}

/// Seconds from `since` (ns since the epoch) to the first answer from `to`; exits when none comes.
fn wait_ready(o: &Options, to: SocketAddr, since: u128) -> f64 {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind the probe socket");
    sock.set_read_timeout(Some(Duration::from_millis(1)))
        .expect("read timeout");
    let (req, _) = template(&o.community);
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_secs(30) {
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
        "snmp_load: {to} did not answer a GET within 30 s (is the agent up, the community right?)"
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
    let targets = targets(&o);
    let ready = o.ready_since.map(|since| wait_ready(&o, targets[0], since));
    let measure = Instant::now() + WARM_UP;
    let end = measure + Duration::from_secs_f64(o.secs);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.threads)
            .map(|i| {
                let (o, targets) = (&o, &targets);
                let first = i * targets.len() / o.threads;
                s.spawn(move || client(o, targets, first, measure, end))
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
    let sum = |f: fn(&Tally) -> u64| tallies.iter().map(f).sum::<u64>();
    println!(
        "gets_per_s={:.0} answered={} p50_us={:.1} p99_us={:.1} p999_us={:.1} lost={} late={} errors={} \
         targets={} threads={} inflight={} ready_s={}",
        all.len() as f64 / o.secs,
        all.len(),
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        percentile(&all, 0.999),
        sum(|t| t.lost),
        sum(|t| t.late),
        sum(|t| t.errors),
        targets.len(),
        o.threads,
        o.inflight,
        ready.map_or("-".to_string(), |r| format!("{r:.3}")),
    );
}
