//! gNMI dial-out (`-gnmi-dialout HOST:PORT`): every device samples its dial-out paths each
//! `-gnmi-dialout-interval` and streams them as `SubscribeResponse`s to the collector through
//! `DialoutTelemetry.Publish` (client streaming; the metadata's `subscription-name` names the
//! subscription, each notification's `prefix.target` the device), the shape gnmic's `listen` mode takes.
//!
//! One `gnmi-dialout` thread runs a tokio `current_thread` runtime with two tasks per device: the
//! sampler puts notifications in the device's bounded queue (`-gnmi-dialout-queue`; when it is full,
//! the new one is dropped and counted, so nothing grows while the collector is away), and the session
//! loop connects (from the device's own address under `-device-net`) and sends what the queue holds.
//!
//! What counts as sent is what the collector accepted: each Publish stream carries what the queue held
//! when it opened and ends there, and only the collector's OK closing it counts its notifications in
//! `dialout_sent` (a stream that fails counts them in `dialout_dropped`). A collector that stalls
//! (no HTTP/2 answer, no reads, no stream allowed, no ping answered) costs a stream [`SEND_DEADLINE`]
//! at most, the keepalive [`KEEPALIVE`] + [`KEEPALIVE_TIMEOUT`]; one that fails in any way is dialled
//! again after a [`Backoff`] that only a delivered stream starts over, said once an outage on stderr.
#![forbid(unsafe_code)]

use super::encode;
use super::path::{self, Elem};
use super::proto::gnmi::subscribe_response::Response as Resp;
use super::proto::gnmi::{Encoding, SubscribeResponse};
use super::proto::nokia::sros::dialout_telemetry_client::DialoutTelemetryClient;
use super::schema::{self, Clock, Val};
use super::server::{runtime, stopped};
use super::Host;
use crate::lab::device::{mix, mix_fraction, Device, DeviceCounters};
use crate::labels::Subsystem;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

/// The subscription name every device sends in its `subscription-name` metadata.
pub const SUBSCRIPTION_NAME: &str = "nl6-dialout";
/// The first pause before connecting again (the cap is `-gnmi-dialout-backoff-max`).
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest one Publish stream may take, from opening to the collector's OK.
pub const SEND_DEADLINE: Duration = Duration::from_secs(5);
/// HTTP/2 ping after this long without a frame from the collector while a stream is open (never on
/// an idle connection: collectors built on grpc-go close connections that ping while idle).
pub const KEEPALIVE: Duration = Duration::from_secs(1);
/// How long the collector has to answer that ping before the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);
/// Encoded bytes of one notification sent (a device's few dozen leaves are a few KiB).
pub const MAX_SEND_BYTES: usize = 4 << 20;
/// Bytes of one `PublishResponse` taken from the collector (the message is empty): a bigger one
/// ends the stream before it is buffered.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;
/// Bytes of the collector's response headers, and what its answers may hold unread.
const MAX_HEADER_BYTES: u32 = 16 << 10;
const WINDOW: u32 = 64 << 10;

/// Why a device's session with the collector ended.
#[derive(Debug)]
pub enum DialoutError {
    /// The TCP connection was refused, unreachable or slower than [`CONNECT_TIMEOUT`].
    Connect(tonic::transport::Error),
    /// Connecting (TCP and the HTTP/2 preface) did not finish within [`SEND_DEADLINE`].
    ConnectStalled,
    /// The stream failed: the collector closed or reset it, spoke something else than HTTP/2 gRPC,
    /// answered with a status other than OK, or an answer over [`MAX_ANSWER_BYTES`].
    Refused(tonic::Status),
    /// The collector did not close the stream with OK within [`SEND_DEADLINE`].
    Stalled,
}

impl fmt::Display for DialoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DialoutError::Connect(e) => {
                // tonic's own text is only "transport error"; what failed is its innermost source.
                let mut why: &dyn std::error::Error = e;
                while let Some(s) = why.source() {
                    why = s;
                }
                write!(f, "cannot connect ({why}): is a collector listening there?")
            }
            DialoutError::ConnectStalled => write!(
                f,
                "connecting took over {SEND_DEADLINE:?}: is the address a collector's?"
            ),
            DialoutError::Refused(s) => {
                let m: String = s.message().chars().take(200).collect();
                write!(
                    f,
                    "the collector ended a stream with {:?} ({m}): is it a DialoutTelemetry collector?",
                    s.code()
                )
            }
            DialoutError::Stalled => write!(
                f,
                "the collector accepted no stream within {SEND_DEADLINE:?}: it is stalled or overloaded"
            ),
        }
    }
}

impl std::error::Error for DialoutError {}

/// The pause before each connection attempt: [`FIRST_BACKOFF`] doubling to the cap, each pause drawn
/// in [half, all] of it per device and attempt, so devices that failed together spread out.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
    seed: u64,
    drawn: u64,
}

impl Backoff {
    pub fn new(seed: u64, cap: Duration) -> Backoff {
        Backoff {
            next: FIRST_BACKOFF.min(cap),
            cap,
            seed: mix(seed ^ 0xd1a1_0b0f),
            drawn: 0,
        }
    }
    /// The next pause; the one after it is twice as long, up to the cap.
    pub fn pause(&mut self) -> Duration {
        self.drawn += 1;
        let f = 0.5 + 0.5 * mix_fraction(self.seed ^ self.drawn);
        let p = self.next.mul_f64(f);
        self.next = (self.next * 2).min(self.cap);
        p
    }
    /// Starts over from [`FIRST_BACKOFF`]: a stream was delivered.
    pub fn reset(&mut self) {
        self.next = FIRST_BACKOFF.min(self.cap);
    }
}

/// How many devices cannot deliver: the first to fail says so on stderr, the last to deliver again
/// says that, so an outage is two lines whatever the fleet's size.
#[derive(Debug)]
struct Outage {
    to: SocketAddr,
    cap: Duration,
    down: AtomicUsize,
}

impl Outage {
    fn failed(&self, up: &mut bool, why: &DialoutError) {
        if std::mem::replace(up, false) && self.down.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "nl6: gNMI dial-out: collector {}: {why} (every device dials again, pausing up to {})",
                self.to,
                crate::timefmt::format_go_duration(self.cap)
            );
        }
    }
    fn delivered(&self, up: &mut bool) {
        if !std::mem::replace(up, true) && self.down.fetch_sub(1, Ordering::Relaxed) == 1 {
            eprintln!(
                "nl6: gNMI dial-out: collector {} accepts every device's streams again",
                self.to
            );
        }
    }
}

/// Starts the `gnmi-dialout` thread (its runtime is built here, so a failure is a startup error).
pub fn spawn(sh: Arc<dyn Host>) -> std::io::Result<()> {
    let rt = runtime()?;
    let s = sh.clone();
    sh.spawn(
        Subsystem::GNMI_DIALOUT,
        "gnmi-dialout",
        Box::new(move || run(rt, s)),
    )
}

fn run(rt: tokio::runtime::Runtime, sh: Arc<dyn Host>) {
    let Some(to) = sh.config().gnmi().dialout() else {
        return;
    };
    // The flag's parser checked every path; one that still fails here is left out, said once.
    let paths: Vec<Vec<Elem>> = sh
        .config()
        .gnmi()
        .dialout_paths()
        .iter()
        .filter_map(|p| match path::parse(p) {
            Ok(e) => Some(e),
            Err(e) => {
                eprintln!("nl6: gNMI dial-out: path {p:?} left out: {e}");
                None
            }
        })
        .collect();
    let paths = Arc::new(paths);
    let clock = Clock::now();
    let outage = Arc::new(Outage {
        to,
        cap: sh.config().gnmi().dialout_backoff_max(),
        down: AtomicUsize::new(0),
    });
    rt.block_on(async move {
        for index in 0..sh.devices().len() {
            let queue = sh.config().gnmi().dialout_queue();
            let (tx, rx) = mpsc::channel(queue);
            tokio::spawn(sample(sh.clone(), index, paths.clone(), clock, tx));
            tokio::spawn(sessions(sh.clone(), index, outage.clone(), rx));
        }
        stopped(&*sh).await;
    });
}

/// Samples device `index` every interval (at its own phase) into its queue.
async fn sample(
    sh: Arc<dyn Host>,
    index: usize,
    paths: Arc<Vec<Vec<Elem>>>,
    clock: Clock,
    tx: mpsc::Sender<SubscribeResponse>,
) {
    let every = sh.config().gnmi().dialout_interval();
    let d = sh.devices()[index].clone();
    let phase = every.mul_f64((mix(index as u64 ^ 0xd1a1) % 1000) as f64 / 1000.0);
    let mut due = Instant::now() + phase;
    loop {
        tokio::time::sleep_until(due.into()).await;
        if sh.stopping() {
            return;
        }
        let now = Instant::now();
        let all = schema::leaves(&d, &clock, now);
        let picked: Vec<(&[Elem], &Val)> = all
            .iter()
            .filter(|l| paths.iter().any(|p| path::selects(p, &l.path)))
            .map(|l| (&l.path[..], &l.val))
            .collect();
        let n = encode::notification(picked, Encoding::Proto, clock.nanos(now), &d.name());
        let msg = SubscribeResponse {
            response: Some(Resp::Update(n)),
            extension: Vec::new(),
        };
        match tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                DeviceCounters::inc(&d.counters.dialout_dropped)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
        due += every;
        if due < Instant::now() {
            due = Instant::now() + every; // a stall skips periods, never replays them
        }
    }
}

type Queue = mpsc::Receiver<SubscribeResponse>;

/// Connects, sends, and after a failure connects again past a backoff, until the fleet stops.
async fn sessions(sh: Arc<dyn Host>, index: usize, outage: Arc<Outage>, mut queue: Queue) {
    let d = sh.devices()[index].clone();
    let mut backoff = Backoff::new(index as u64, outage.cap);
    let mut up = true;
    let mut first = true;
    while !sh.stopping() {
        if !std::mem::take(&mut first) {
            DeviceCounters::inc(&d.counters.dialout_reconnects);
        }
        let why = tokio::select! {
            e = session(&d, outage.to, &mut queue, &mut backoff, &outage, &mut up) => e,
            _ = stopped(&*sh) => return,
        };
        outage.failed(&mut up, &why);
        tokio::select! {
            _ = tokio::time::sleep(backoff.pause()) => {}
            _ = stopped(&*sh) => return,
        }
    }
}

/// One connection: streams what the queue holds for as long as the collector accepts it.
async fn session(
    d: &Device,
    to: SocketAddr,
    queue: &mut Queue,
    backoff: &mut Backoff,
    outage: &Outage,
    up: &mut bool,
) -> DialoutError {
    let ch =
        match tokio::time::timeout(SEND_DEADLINE, connect(to, d.own_ip().map(IpAddr::V4))).await {
            Ok(Ok(ch)) => ch,
            Ok(Err(e)) => return DialoutError::Connect(e),
            Err(_) => return DialoutError::ConnectStalled,
        };
    let mut client = DialoutTelemetryClient::new(ch)
        .max_encoding_message_size(MAX_SEND_BYTES)
        .max_decoding_message_size(MAX_ANSWER_BYTES);
    loop {
        let Some(head) = queue.recv().await else {
            // The sampler is gone: the fleet is stopping, which ends this task.
            return std::future::pending().await;
        };
        let mut batch = vec![head];
        while let Ok(m) = queue.try_recv() {
            batch.push(m);
        }
        let n = batch.len() as u64;
        let done = tokio::time::timeout(SEND_DEADLINE, publish(&mut client, batch)).await;
        let counters = &d.counters;
        match done {
            Ok(Ok(())) => {
                counters.dialout_sent.fetch_add(n, Ordering::Relaxed);
                backoff.reset();
                outage.delivered(up);
            }
            Ok(Err(s)) => {
                counters.dialout_dropped.fetch_add(n, Ordering::Relaxed);
                return DialoutError::Refused(s);
            }
            Err(_) => {
                counters.dialout_dropped.fetch_add(n, Ordering::Relaxed);
                return DialoutError::Stalled;
            }
        }
    }
}

async fn connect(to: SocketAddr, from: Option<IpAddr>) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(format!("http://{to}"))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .local_address(from)
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(false)
        .http2_max_header_list_size(MAX_HEADER_BYTES)
        .initial_stream_window_size(WINDOW)
        .initial_connection_window_size(WINDOW)
        .connect()
        .await
}

/// One Publish stream carrying `batch`: Ok once the collector closed it with OK.
async fn publish(
    client: &mut DialoutTelemetryClient<Channel>,
    batch: Vec<SubscribeResponse>,
) -> Result<(), tonic::Status> {
    let mut req = tonic::Request::new(tokio_stream::iter(batch));
    req.metadata_mut().insert(
        "subscription-name",
        SUBSCRIPTION_NAME.parse().expect("ASCII"),
    );
    let mut answers = client.publish(req).await?.into_inner();
    while answers.message().await?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_the_cap_within_half_and_all_and_start_over_on_reset() {
        let cap = Duration::from_secs(5);
        let mut b = Backoff::new(3, cap);
        let mut whole = FIRST_BACKOFF;
        for _ in 0..12 {
            let p = b.pause();
            assert!(p >= whole / 2 && p <= whole, "{p:?} of {whole:?}");
            whole = (whole * 2).min(cap);
        }
        assert_eq!(whole, cap);
        b.reset();
        assert!(b.pause() <= FIRST_BACKOFF);
    }

    #[test]
    fn devices_that_failed_together_draw_different_pauses() {
        let cap = Duration::from_secs(5);
        let pauses: Vec<Duration> = (0..8).map(|i| Backoff::new(i, cap).pause()).collect();
        let mut distinct = pauses.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() >= 6, "{pauses:?}");
    }
}
