//! A Rust gNMI client (nl6's generated tonic client) on a tokio `current_thread` runtime the calling
//! thread drives: for checks at a scale pygnmi's one-process-per-call runs cannot reach, such as a Get at
//! each of 30 000 device addresses' listener.
#![allow(dead_code)]

use nl6::lab::gnmi::proto::gnmi::g_nmi_client::GNmiClient;
use nl6::lab::gnmi::proto::gnmi::*;
use std::net::SocketAddr;

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

/// What one STREAM subscription saw: when its `sync_response` came (from the run's start) and when
/// each later notification arrived.
#[derive(Debug, Default)]
pub struct StreamLog {
    pub synced: Option<std::time::Duration>,
    pub arrivals: Vec<std::time::Instant>,
    /// Each notification's timestamp (ns since the epoch) and its arrival on the same clock.
    pub stamps: Vec<(u64, u64)>,
}

/// A STREAM SAMPLE subscription of one interface's counters at `every`.
pub fn sample_request(every: std::time::Duration) -> SubscribeRequest {
    let mut p = path(&["interfaces", "interface", "state", "counters"]);
    p.elem[1].key.insert("name".into(), "eth0".into());
    let list = SubscriptionList {
        subscription: vec![Subscription {
            path: Some(p),
            mode: SubscriptionMode::Sample as i32,
            sample_interval: every.as_nanos() as u64,
            ..Subscription::default()
        }],
        mode: subscription_list::Mode::Stream as i32,
        encoding: Encoding::Proto as i32,
        ..SubscriptionList::default()
    };
    SubscribeRequest {
        request: Some(subscribe_request::Request::Subscribe(list)),
        extension: Vec::new(),
    }
}

/// `per` STREAM SAMPLE 1 s subscriptions on one connection to each of `addrs`, each read for `hold`
/// after its `sync_response` (which must come within `SYNC_LIMIT` of `start`).
pub async fn hold(
    addrs: Vec<SocketAddr>,
    per: usize,
    hold: std::time::Duration,
    start: std::time::Instant,
) -> Vec<StreamLog> {
    use std::time::{Duration, Instant};
    const SYNC_LIMIT: Duration = Duration::from_secs(30);
    let mut tasks = Vec::new();
    for at in addrs {
        let c = client(at).await;
        for _ in 0..per {
            let mut c = c.clone();
            tasks.push(tokio::spawn(async move {
                let mut log = StreamLog::default();
                let sync_by = start + SYNC_LIMIT;
                let req = sample_request(Duration::from_secs(1));
                let Ok(Ok(r)) =
                    tokio::time::timeout_at(sync_by.into(), c.subscribe(tokio_stream::iter([req])))
                        .await
                else {
                    return log;
                };
                let mut s = r.into_inner();
                let mut end = sync_by;
                loop {
                    let m = tokio::time::timeout_at(end.into(), s.message()).await;
                    let Ok(Ok(Some(m))) = m else { break };
                    match m.response {
                        Some(subscribe_response::Response::SyncResponse(true)) => {
                            log.synced = Some(start.elapsed());
                            end = Instant::now() + hold;
                        }
                        Some(subscribe_response::Response::Update(n)) if log.synced.is_some() => {
                            log.arrivals.push(Instant::now());
                            let wall = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_nanos() as u64);
                            log.stamps.push((n.timestamp as u64, wall));
                        }
                        _ => {}
                    }
                }
                log
            }));
        }
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_default());
    }
    out
}

/// Gets of `/system/state/hostname` round the devices at `addrs`, one connection each, one at a time,
/// until `until`: how many were answered and how many failed.
pub async fn get_loop(addrs: Vec<SocketAddr>, until: std::time::Instant) -> (u64, u64) {
    let mut clients = Vec::with_capacity(addrs.len());
    for at in addrs {
        clients.push(client(at).await);
    }
    let (mut ok, mut failed) = (0, 0);
    'run: loop {
        for c in &mut clients {
            if std::time::Instant::now() >= until {
                break 'run;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            match tokio::time::timeout(left, get_hostname(c)).await {
                Ok(Ok(_)) => ok += 1,
                Ok(Err(_)) => failed += 1,
                Err(_) => break 'run,
            }
        }
    }
    (ok, failed)
}
