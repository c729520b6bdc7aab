//! The gNMI service of the target: `Capabilities`, `Get` and `Set` here, `Subscribe` in
//! [`super::subscribe`]. Every refusal is the gRPC status the gNMI specification names, with a message
//! saying what was wrong: `NOT_FOUND` for a path with no data, `UNIMPLEMENTED` for an encoding the target
//! does not serve, `INVALID_ARGUMENT` for a malformed path or value, a wildcard or read-only path in a
//! `Set` or a delete, `UNAUTHENTICATED` for missing or wrong credentials.
#![forbid(unsafe_code)]

use super::encode::{self, SUPPORTED};
use super::path::{self, Elem};
use super::proto::gnmi::g_nmi_server::GNmi;
use super::proto::gnmi::get_request::DataType;
use super::proto::gnmi::update_result::Operation;
use super::proto::gnmi::*;
use super::schema::{self, Leaf};
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

pub(super) fn bad_path(e: path::PathError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// The leaves of `all` that `want` selects; `NOT_FOUND` (naming the path and device) when none.
pub(super) fn select<'a>(
    all: &'a [Leaf],
    want: &[Elem],
    device: &str,
) -> Result<Vec<&'a Leaf>, Status> {
    let hit: Vec<&Leaf> = all
        .iter()
        .filter(|l| path::selects(want, &l.path))
        .collect();
    if hit.is_empty() {
        return Err(Status::not_found(format!(
            "no data at {} on {device}: see the README's gNMI paths table",
            path::text(want)
        )));
    }
    Ok(hit)
}

fn wanted_type(kind: DataType, leaf: &Leaf) -> bool {
    let config = leaf.path.iter().any(|e| e.name == "config");
    match kind {
        DataType::All => true,
        DataType::Config => config,
        DataType::State | DataType::Operational => !config,
    }
}

#[tonic::async_trait]
impl GNmi for Service {
    async fn capabilities(
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

    async fn get(&self, req: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let t = &self.0;
        let (_, d) = t.admit(&req)?;
        let r = req.into_inner();
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
        for p in paths {
            let want = path::join(r.prefix.as_ref(), p).map_err(bad_path)?;
            let hit = select(&all, &want, &d.name())?;
            let kept = hit
                .into_iter()
                .filter(|l| wanted_type(kind, l))
                .map(|l| (&l.path[..], &l.val));
            notification.push(encode::notification(kept, enc, ts, target));
        }
        Ok(Response::new(GetResponse {
            notification,
            ..GetResponse::default()
        }))
    }

    async fn set(&self, req: Request<SetRequest>) -> Result<Response<SetResponse>, Status> {
        let t = &self.0;
        let (index, d) = t.admit(&req)?;
        let r = req.into_inner();
        check_target(d, r.prefix.as_ref().map_or("", |p| p.target.as_str()))?;
        if let Some(p) = r.delete.first() {
            let at = path::join(r.prefix.as_ref(), Some(p)).map_err(bad_path)?;
            return Err(Status::invalid_argument(format!(
                "delete of {} refused: nothing on this target can be deleted; set config/enabled to \
                 true or false instead",
                path::text(&at)
            )));
        }
        // Every operation is checked before any applies: a refused Set changes nothing.
        let ops = [
            (Operation::Replace, &r.replace),
            (Operation::Update, &r.update),
            (Operation::UnionReplace, &r.union_replace),
        ];
        let mut plan = Vec::new();
        for (op, updates) in ops {
            for u in updates {
                let (at, if_index) = writable(t, d, r.prefix.as_ref(), u)?;
                let up = encode::set_bool(u.val.as_ref())
                    .map_err(|e| Status::invalid_argument(format!("{}: {e}", path::text(&at))))?;
                plan.push((op, at, if_index, up));
            }
        }
        let mut response = Vec::with_capacity(plan.len());
        for (op, at, if_index, up) in plan {
            t.shared.set_admin(index, if_index, up);
            response.push(UpdateResult {
                path: Some(path::to_proto(&at)),
                op: op as i32,
                ..UpdateResult::default()
            });
        }
        Ok(Response::new(SetResponse {
            prefix: r.prefix,
            response,
            timestamp: t.clock.nanos(Instant::now()) as i64,
            ..SetResponse::default()
        }))
    }

    type SubscribeStream = subscribe::Responses;

    async fn subscribe(
        &self,
        req: Request<Streaming<SubscribeRequest>>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let (index, _) = self.0.admit(&req)?;
        subscribe::start(self.0.clone(), index, req.into_inner())
            .await
            .map(Response::new)
    }
}

/// The path of a `Set` update and the interface whose `config/enabled` it writes, or the refusal.
fn writable(
    t: &Target,
    d: &crate::lab::device::Device,
    prefix: Option<&Path>,
    u: &Update,
) -> Result<(Vec<Elem>, u32), Status> {
    let mut at = path::join(prefix, u.path.as_ref()).map_err(bad_path)?;
    if path::has_wildcard(&at) {
        return Err(Status::invalid_argument(format!(
            "Set of {} refused: a Set names one leaf, without wildcards",
            path::text(&at)
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
            path::text(&at)
        ))),
    }
}
