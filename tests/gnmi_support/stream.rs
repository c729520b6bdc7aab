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
