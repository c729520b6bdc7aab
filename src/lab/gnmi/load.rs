//! `-traffic`'s gNMI manager side: every round, a `Get` of every leaf and a short `ONCE` subscription
//! per device, as a collector polling the fleet would (the target answers under `gnmi`; this side runs
//! in the `lab-traffic` thread under `scenario`). Its own tokio `current_thread` runtime, driven only
//! while a round runs; one cached connection per device, for at most [`MAX_CLIENTS`] devices a round
//! (a larger fleet is covered in turns), so the load never holds more descriptors than that.
#![forbid(unsafe_code)]

use super::proto::gnmi::g_nmi_client::GNmiClient;
use super::proto::gnmi::subscribe_request::Request as Req;
use super::proto::gnmi::subscribe_response::Response as Resp;
use super::proto::gnmi::*;
use crate::lab::device::Device;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Devices driven per round at most.
pub const MAX_CLIENTS: usize = 256;
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GnmiWork {
    pub gets: usize,
    pub subscriptions: usize,
}

/// The load's runtime and connections.
pub struct Load {
    rt: tokio::runtime::Runtime,
    clients: HashMap<SocketAddr, GNmiClient<Channel>>,
    next: usize,
}

impl std::fmt::Debug for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gnmi::Load({} connections)", self.clients.len())
    }
}

impl Load {
    pub fn new() -> std::io::Result<Load> {
        Ok(Load {
            rt: super::server::runtime()?,
            clients: HashMap::new(),
            next: 0,
        })
    }

    /// One Get and one ONCE subscription on each of the next [`MAX_CLIENTS`] devices with gNMI.
    pub fn round(&mut self, devices: &[Arc<Device>]) -> GnmiWork {
        let n = devices.len().min(MAX_CLIENTS);
        let mut work = GnmiWork::default();
        for k in 0..n {
            let d = &devices[(self.next + k) % devices.len()];
            let Some(at) = d.gnmi_addr() else { continue };
            let at = crate::lab::target::reachable(at);
            let client = self.clients.remove(&at);
            let (client, w) = self.rt.block_on(exercise(client, at));
            work.gets += w.gets;
            work.subscriptions += w.subscriptions;
            if let Some(c) = client {
                self.clients.insert(at, c);
            }
        }
        self.next = (self.next + n) % devices.len().max(1);
        work
    }
}

/// Connects when needed, then one Get and one ONCE subscription; the client back when it still works.
async fn exercise(
    client: Option<GNmiClient<Channel>>,
    at: SocketAddr,
) -> (Option<GNmiClient<Channel>>, GnmiWork) {
    let mut work = GnmiWork::default();
    let mut c = match client {
        Some(c) => c,
        None => {
            let Ok(ep) = Endpoint::from_shared(format!("http://{at}")) else {
                return (None, work);
            };
            match ep.connect_timeout(CALL_TIMEOUT).connect().await {
                Ok(ch) => GNmiClient::new(ch),
                Err(_) => return (None, work),
            }
        }
    };
    let get = GetRequest {
        encoding: Encoding::Proto as i32,
        ..GetRequest::default()
    };
    match tokio::time::timeout(CALL_TIMEOUT, c.get(get)).await {
        Ok(Ok(_)) => work.gets += 1,
        _ => return (None, work),
    }
    let list = SubscriptionList {
        subscription: vec![Subscription::default()],
        mode: subscription_list::Mode::Once as i32,
        encoding: Encoding::Proto as i32,
        ..SubscriptionList::default()
    };
    let req = SubscribeRequest {
        request: Some(Req::Subscribe(list)),
        extension: Vec::new(),
    };
    let once = async {
        let mut s = c.subscribe(tokio_stream::iter([req])).await?.into_inner();
        while let Some(r) = s.message().await? {
            if matches!(r.response, Some(Resp::SyncResponse(true))) {
                return Ok::<bool, tonic::Status>(true);
            }
        }
        Ok(false)
    };
    match tokio::time::timeout(CALL_TIMEOUT, once).await {
        Ok(Ok(true)) => work.subscriptions += 1,
        _ => return (None, work),
    }
    (Some(c), work)
}
