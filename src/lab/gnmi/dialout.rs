//! gNMI dial-out (`-gnmi-dialout HOST:PORT`): every device samples its dial-out paths each
//! `-gnmi-dialout-interval` and streams them as `SubscribeResponse`s to the collector through
//! `DialoutTelemetry.Publish` (client streaming; the metadata's `subscription-name` names the
//! subscription, each notification's `prefix.target` the device), the shape gnmic's `listen` mode takes.
//!
//! One `gnmi-dialout` thread runs a tokio `current_thread` runtime with two tasks per device: the
//! sampler puts notifications in the device's bounded queue (`-gnmi-dialout-queue`; when it is full,
//! the new one is dropped and counted, so nothing grows while the collector is away), and the session
//! loop connects (from the device's own address under `-device-net`), streams the queue and, when the
//! collector goes away, connects again after a backoff (100 ms doubling to [`MAX_BACKOFF`], each device
//! at its own jitter). `sent`, `dropped` and `reconnects` per device are in `/api/v1/devices`.
#![forbid(unsafe_code)]

use super::encode;
use super::path::{self, Elem};
use super::proto::gnmi::subscribe_response::Response as Resp;
use super::proto::gnmi::{Encoding, SubscribeResponse};
use super::proto::nokia::sros::dialout_telemetry_client::DialoutTelemetryClient;
use super::schema::{self, Clock, Val};
use super::server::{runtime, stopped};
use super::Host;
use crate::lab::device::{mix, DeviceCounters};
use crate::labels::Subsystem;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::Endpoint;

/// The subscription name every device sends in its `subscription-name` metadata.
pub const SUBSCRIPTION_NAME: &str = "nl6-dialout";
/// The first pause before connecting again.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between two connection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

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
    rt.block_on(async move {
        for index in 0..sh.devices().len() {
            let queue = sh.config().gnmi().dialout_queue();
            let (tx, rx) = mpsc::channel(queue);
            tokio::spawn(sample(sh.clone(), index, paths.clone(), clock, tx));
            tokio::spawn(sessions(sh.clone(), index, to, Arc::new(Mutex::new(rx))));
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

type Queue = Arc<Mutex<mpsc::Receiver<SubscribeResponse>>>;

/// Connects, streams, and connects again with backoff, until the fleet stops.
async fn sessions(sh: Arc<dyn Host>, index: usize, to: SocketAddr, queue: Queue) {
    let d = sh.devices()[index].clone();
    let mut backoff = FIRST_BACKOFF;
    let mut connected_once = false;
    let from = d.own_ip().map(IpAddr::V4);
    while !sh.stopping() {
        let session = async {
            let ch = Endpoint::from_shared(format!("http://{to}"))
                .map_err(|e| e.to_string())?
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .local_address(from)
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            if connected_once {
                DeviceCounters::inc(&d.counters.dialout_reconnects);
            }
            connected_once = true;
            backoff = FIRST_BACKOFF;
            let mut req = tonic::Request::new(Drain {
                queue: queue.clone(),
                counters: d.clone(),
            });
            req.metadata_mut().insert(
                "subscription-name",
                SUBSCRIPTION_NAME.parse().expect("ASCII"),
            );
            let mut replies = DialoutTelemetryClient::new(ch)
                .publish(req)
                .await
                .map_err(|s| s.to_string())?
                .into_inner();
            while replies
                .message()
                .await
                .map_err(|s| s.to_string())?
                .is_some()
            {}
            Ok::<(), String>(())
        };
        tokio::select! {
            _ = session => {}
            _ = stopped(&*sh) => return,
        }
        let jitter = 0.75 + (mix(index as u64) % 500) as f64 / 1000.0;
        tokio::time::sleep(backoff.mul_f64(jitter)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The device's queue as the request stream of one session (what it yields is counted as sent).
struct Drain {
    queue: Queue,
    counters: Arc<crate::lab::device::Device>,
}

impl tokio_stream::Stream for Drain {
    type Item = SubscribeResponse;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let next = q.poll_recv(cx);
        if let Poll::Ready(Some(_)) = &next {
            DeviceCounters::inc(&self.counters.counters.dialout_sent);
        }
        next
    }
}
