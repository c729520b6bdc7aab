//! The gNMI service of the target: `Capabilities`, `Get` and `Set` here, `Subscribe` in
//! [`super::subscribe`]. Every refusal is the gRPC status the gNMI specification names, with a message
//! saying what was wrong: `NOT_FOUND` for a path with no data, `UNIMPLEMENTED` for an encoding the target
//! does not serve, `INVALID_ARGUMENT` for a malformed path or value, a wildcard or read-only path in a
//! `Set` or a delete, `UNAUTHENTICATED` for missing or wrong credentials, `INVALID_ARGUMENT` or
//! `RESOURCE_EXHAUSTED` for a request over one of [`super::limits`].
#![forbid(unsafe_code)]

use super::encode::{self, SUPPORTED};
use super::limits::{self, Over};
use super::path::{self, Elem};
use super::proto::gnmi::g_nmi_server::GNmi;
use super::proto::gnmi::get_request::DataType;
use super::proto::gnmi::update_result::Operation;
use super::proto::gnmi::*;
use super::schema::{self, Leaf};
use super::select::{request_path, select, shown};
use super::subscribe;
use super::target::{check_target, Target};
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status, Streaming};

/// The gNMI version this target speaks.
pub const GNMI_VERSION: &str = "0.10.0";

/// The tonic service over the fleet's one [`Target`].
#[derive(Debug, Clone)]
pub struct Service(pub Arc<Target>);

fn wanted_type(kind: DataType, leaf: &Leaf) -> bool {
    let config = leaf.path.iter().any(|e| e.name == "config");
    match kind {
        DataType::All => true,
        DataType::Config => config,
        DataType::State | DataType::Operational => !config,
    }
}

/// Every RPC's refusal goes through [`Target::refused`]: counted, its message cut.
#[tonic::async_trait]
impl GNmi for Service {
    async fn capabilities(
        &self,
        req: Request<CapabilityRequest>,
    ) -> Result<Response<CapabilityResponse>, Status> {
        let at = self.0.device_of(&req);
        self.capabilities_of(req).map_err(|s| self.0.refused(at, s))
    }

    async fn get(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let at = self.0.device_of(&req);
        self.get_of(req).await.map_err(|s| self.0.refused(at, s))
    }

    async fn set(&self, req: Request<SetRequest>) -> Result<Response<SetResponse>, Status> {
        let at = self.0.device_of(&req);
        self.set_of(req).map_err(|s| self.0.refused(at, s))
    }

    type SubscribeStream = subscribe::Responses;

    async fn subscribe(
        &self,
        req: Request<Streaming<SubscribeRequest>>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let at = self.0.device_of(&req);
        let started = match self.0.admit(&req) {
            Ok((index, _)) => subscribe::start(self.0.clone(), index, req.into_inner()).await,
            Err(e) => Err(e),
        };
        started
            .map(Response::new)
            .map_err(|s| self.0.refused(at, s))
    }
}

impl Service {
    fn capabilities_of(
        &self,
        req: Request<CapabilityRequest>,
    ) -> Result<Response<CapabilityResponse>, Status> {
        self.0.admit(&req)?;
        let model = |name: &str| ModelData {
            name: name.into(),
            organization: "OpenConfig working group".into(),
            version: String::new(),
        };
        Ok(Response::new(CapabilityResponse {
            supported_models: vec![model("openconfig-interfaces"), model("openconfig-system")],
            supported_encodings: SUPPORTED.iter().map(|e| *e as i32).collect(),
            g_nmi_version: GNMI_VERSION.into(),
            extension: Vec::new(),
        }))
    }

    /// A Get: each path in its own turn of the runtime (other devices' RPCs run between them, and a
    /// cancelled RPC stops at the next), the answer's size checked as it grows.
    async fn get_of(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let t = &self.0;
        let (_, d) = t.admit(&req)?;
        let r = req.into_inner();
        limits::count(r.path.len(), limits::MAX_PATHS, Over::Paths)?;
        let enc = encode::requested(r.encoding)?;
        let kind = DataType::try_from(r.r#type)
            .map_err(|_| Status::invalid_argument(format!("unknown Get data type {}", r.r#type)))?;
        let target = r.prefix.as_ref().map_or("", |p| p.target.as_str());
        check_target(d, target)?;
        let now = Instant::now();
        let all = schema::leaves(d, &t.clock, now);
        let ts = t.clock.nanos(now);
        let paths: Vec<Option<&Path>> = match r.path.is_empty() {
            true => vec![None],
            false => r.path.iter().map(Some).collect(),
        };
        let mut notification = Vec::with_capacity(paths.len());
        let mut bytes = 0;
        for p in paths {
            tokio::task::yield_now().await;
            let want = request_path(r.prefix.as_ref(), p)?;
            let hit = select(&all, &want, &d.name())?;
            let kept = hit
                .into_iter()
                .filter(|l| wanted_type(kind, l))
                .map(|l| (&l.path[..], &l.val));
            let n = encode::notification(kept, enc, ts, target);
            bytes += prost::Message::encoded_len(&n);
            if bytes > limits::MAX_RESPONSE_BYTES {
                return Err(Over::Response.into());
            }
            notification.push(n);
        }
        Ok(Response::new(GetResponse {
            notification,
            ..GetResponse::default()
        }))
    }

    /// A Set: every update checked before any applies (a refused Set changes nothing), then each leaf
    /// set once, to the value of its last update.
    fn set_of(&self, req: Request<SetRequest>) -> Result<Response<SetResponse>, Status> {
        let t = &self.0;
        let (index, d) = t.admit(&req)?;
        let r = req.into_inner();
        check_target(d, r.prefix.as_ref().map_or("", |p| p.target.as_str()))?;
        if let Some(p) = r.delete.first() {
            let at = request_path(r.prefix.as_ref(), Some(p))?;
            return Err(Status::invalid_argument(format!(
                "delete of {} refused: nothing on this target can be deleted; set config/enabled to \
                 true or false instead",
                shown(&at)
            )));
        }
        let ops = [
            (Operation::Replace, &r.replace),
            (Operation::Update, &r.update),
            (Operation::UnionReplace, &r.union_replace),
        ];
        let n = ops.iter().map(|(_, u)| u.len()).sum();
        limits::count(n, limits::MAX_SET_UPDATES, Over::SetUpdates)?;
        let mut response = Vec::with_capacity(n);
        let mut last = std::collections::BTreeMap::new();
        for (op, updates) in ops {
            for u in updates {
                let (at, if_index) = writable(t, d, r.prefix.as_ref(), u)?;
                let up = encode::set_bool(u.val.as_ref())
                    .map_err(|e| Status::invalid_argument(format!("{}: {e}", shown(&at))))?;
                last.insert(if_index, up);
                response.push(UpdateResult {
                    path: Some(path::to_proto(&at)),
                    op: op as i32,
                    ..UpdateResult::default()
                });
            }
        }
        for (if_index, up) in last {
            t.shared.set_admin(index, if_index, up);
        }
        Ok(Response::new(SetResponse {
            prefix: r.prefix,
            response,
            timestamp: t.clock.nanos(Instant::now()) as i64,
            ..SetResponse::default()
        }))
    }
}

/// The path of a `Set` update and the interface whose `config/enabled` it writes, or the refusal.
fn writable(
    t: &Target,
    d: &crate::lab::device::Device,
    prefix: Option<&Path>,
    u: &Update,
) -> Result<(Vec<Elem>, u32), Status> {
    let mut at = request_path(prefix, u.path.as_ref())?;
    if path::has_wildcard(&at) {
        return Err(Status::invalid_argument(format!(
            "Set of {} refused: a Set names one leaf, without wildcards",
            shown(&at)
        )));
    }
    if at.last().is_some_and(|e| e.name == "config") {
        at.push(Elem {
            name: "enabled".into(),
            keys: Default::default(),
        });
    }
    if let Some(if_index) = schema::enabled_leaf(d, &at) {
        return Ok((at, if_index));
    }
    let all = schema::leaves(d, &t.clock, Instant::now());
    match select(&all, &at, &d.name()) {
        Err(not_found) => Err(not_found),
        Ok(_) => Err(Status::invalid_argument(format!(
            "Set of {} refused: it is read-only; the writable leaf is \
             /interfaces/interface[name=…]/config/enabled",
            shown(&at)
        ))),
    }
}
