//! A request's paths: prefix and path joined and held to [`super::limits`], shown in refusals cut and
//! escaped, and matched against a device's leaves. Get, Set and Subscribe all go through here.
#![forbid(unsafe_code)]

use super::limits;
use super::path::{self, Elem};
use super::proto::gnmi::Path;
use super::schema::Leaf;
use tonic::Status;

pub fn bad_path(e: path::PathError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// A request path: prefix and path joined, then checked against the path limits.
pub fn request_path(prefix: Option<&Path>, p: Option<&Path>) -> Result<Vec<Elem>, Status> {
    let elems = path::join(prefix, p).map_err(bad_path)?;
    limits::path(&elems)?;
    Ok(elems)
}

/// A request path for a message: control characters escaped, cut to [`limits::MAX_QUOTE_BYTES`].
pub fn shown(elems: &[Elem]) -> String {
    limits::quote(&path::text(elems), limits::MAX_QUOTE_BYTES)
}

/// The leaves of `all` that `want` selects; `NOT_FOUND` (naming the path and device) when none.
pub fn select<'a>(all: &'a [Leaf], want: &[Elem], device: &str) -> Result<Vec<&'a Leaf>, Status> {
    let hit: Vec<&Leaf> = all
        .iter()
        .filter(|l| path::selects(want, &l.path))
        .collect();
    if hit.is_empty() {
        return Err(Status::not_found(format!(
            "no data at {} on {device}: see the gNMI paths table in docs/gnmi.md",
            shown(want)
        )));
    }
    Ok(hit)
}
