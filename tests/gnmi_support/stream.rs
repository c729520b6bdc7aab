//! A Rust gNMI client for what pygnmi cannot do at scale: Gets and STREAM SAMPLE subscriptions by the
//! thousand on one tokio `current_thread` runtime (nl6's own tonic client code). Shared by the cadence
//! and load tests and by `benches/gnmi_serve.rs` (`#[path]`), so the bench and the tests measure the same
//! client. Each subscription records when its sample notifications arrived, for cadence figures.
#![allow(dead_code)]

use nl6::lab::gnmi::proto::gnmi::g_nmi_client::GNmiClient;
use nl6::lab::gnmi::proto::gnmi::subscribe_request::Request as Req;
use nl6::lab::gnmi::proto::gnmi::subscribe_response::Response as Resp;
use nl6::lab::gnmi::proto::gnmi::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The runtime the client runs on (the caller's thread drives it with `block_on`).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the gNMI client")
}

/// A gNMI path of plain elements (no keys).
pub fn path(elems: &[&str]) -> Path {
    Path {
        elem: elems
            .iter()
            .map(|n| PathElem {
                name: n.to_string(),
                key: Default::default(),
            })
            .collect(),
        ..Path::default()
    }
}

pub async fn client(at: SocketAddr) -> GNmiClient<tonic::transport::Channel> {
    GNmiClient::connect(format!("http://{at}"))
        .await
        .unwrap_or_else(|e| panic!("connect to gNMI at {at}: {e}"))
}

/// One Get of `/system/state/hostname` in PROTO encoding: the name the target answered.
pub async fn get_hostname(
    c: &mut GNmiClient<tonic::transport::Channel>,
) -> Result<String, tonic::Status> {
    let req = GetRequest {
        path: vec![path(&["system", "state", "hostname"])],
        encoding: Encoding::Proto as i32,
        ..GetRequest::default()
    };
    let answer = c.get(req).await?.into_inner();
    let value = answer
        .notification
        .iter()
        .flat_map(|n| &n.update)
        .find_map(|u| u.val.as_ref()?.value.clone());
    match value {
        Some(typed_value::Value::StringVal(s)) => Ok(s),
        other => Err(tonic::Status::internal(format!(
            "no hostname string in the Get answer: {other:?}"
        ))),
    }
}

/// A STREAM subscription of `at` (every leaf when empty) sampled every `interval`, PROTO encoded.
pub fn stream_request(at: &[&str], interval: Duration) -> SubscribeRequest {
    let list = SubscriptionList {
        subscription: vec![Subscription {
            path: Some(path(at)),
            mode: SubscriptionMode::Sample as i32,
            sample_interval: interval.as_nanos() as u64,
            ..Subscription::default()
        }],
        encoding: Encoding::Proto as i32,
        ..SubscriptionList::default()
    };
    SubscribeRequest {
        request: Some(Req::Subscribe(list)),
        extension: Vec::new(),
    }
}

/// What one subscription received while it was held.
#[derive(Debug, Default, Clone)]
pub struct Held {
    /// Leaves received, in every notification.
    pub leaves: u64,
    /// When each sample notification after the `sync_response` arrived.
    pub samples: Vec<Instant>,
    /// Whether the initial snapshot ended in `sync_response`.
    pub synced: bool,
    /// Why the stream ended before `run` was over, if it did.
    pub error: Option<String>,
}

impl Held {
    /// Gaps between consecutive sample notifications.
    pub fn intervals(&self) -> Vec<Duration> {
        self.samples.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// Subscribes to the leaves under `path` every `interval` on `c`'s connection (clones share it, one
/// HTTP/2 stream each) and holds the stream for `run`.
pub async fn hold_stream(
    mut c: GNmiClient<tonic::transport::Channel>,
    path: &[&str],
    interval: Duration,
    run: Duration,
) -> Held {
    let mut held = Held::default();
    let end = Instant::now() + run;
    let mut s = match c
        .subscribe(tokio_stream::iter([stream_request(path, interval)]))
        .await
    {
        Ok(s) => s.into_inner(),
        Err(e) => {
            held.error = Some(format!("Subscribe refused: {e}"));
            return held;
        }
    };
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return held;
        }
        let r = match tokio::time::timeout(left, s.message()).await {
            Err(_) => return held,
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => {
                held.error = Some("the target ended the stream".into());
                return held;
            }
            Ok(Err(e)) => {
                held.error = Some(format!("stream failed: {e}"));
                return held;
            }
        };
        match r.response {
            Some(Resp::SyncResponse(true)) => held.synced = true,
            Some(Resp::Update(n)) => {
                held.leaves += n.update.len() as u64;
                if held.synced {
                    held.samples.push(Instant::now());
                }
            }
            _ => {}
        }
    }
}

/// The `p`-th percentile (0–100) of `v`, sorted in place; zero when empty.
pub fn percentile(v: &mut [Duration], p: usize) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() - 1) * p / 100).min(v.len() - 1)]
}
