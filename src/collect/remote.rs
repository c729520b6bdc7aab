//! `nl6 report s3://BUCKET/KEY` (and `gs://`): one object read with the settings every S3 tool takes from
//! the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, and
//! `AWS_ENDPOINT_URL` for a store that is not AWS), handed to `nl6 report` as its opener.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::s3::{Addressing, EndpointError, S3Error, S3};
use super::s3creds::CredsError;
use super::s3url::UrlError;
use crate::report::OpenError;

/// How long one object read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a bucket object could not be read for `nl6 report`.
#[derive(Debug)]
pub enum RemoteError {
    /// The path names a bucket but no object (the path as given).
    NoObject(String),
    Url(UrlError),
    Creds(CredsError),
    Endpoint(EndpointError),
    Get(S3Error),
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::NoObject(path) => {
                write!(f, "{path:?} names no object (want s3://BUCKET/KEY)")
            }
            RemoteError::Url(e) => write!(f, "{e}"),
            RemoteError::Creds(e) => write!(f, "{e}"),
            RemoteError::Endpoint(e) => write!(f, "{e}"),
            RemoteError::Get(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RemoteError {}

/// `report::Opener` for bucket paths: `None` for anything else.
pub fn open(path: &str, limit: u64) -> Option<Result<Vec<u8>, OpenError>> {
    if !super::s3url::is_bucket(path) {
        return None;
    }
    Some(read(path, limit, &|k| std::env::var(k).ok()).map_err(Into::into))
}

fn read(
    path: &str,
    limit: u64,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<u8>, RemoteError> {
    let (scheme_and_bucket, key) = path[5..]
        .split_once('/')
        .map(|(b, k)| (format!("{}{b}", &path[..5]), k))
        .filter(|(_, k)| !k.is_empty() && !k.ends_with('/'))
        .ok_or_else(|| RemoteError::NoObject(path.to_string()))?;
    let location = super::s3url::parse(&scheme_and_bucket).map_err(RemoteError::Url)?;
    let creds = super::s3creds::load(None, env).map_err(RemoteError::Creds)?;
    let endpoint = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL"));
    let region = env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| if location.gcs { "auto" } else { "us-east-1" }.to_string());
    let addressing = if endpoint.is_some() || location.gcs {
        Addressing::Path
    } else {
        Addressing::VirtualHost
    };
    let s3 = S3::new(
        location,
        endpoint.as_deref(),
        &region,
        addressing,
        creds,
        READ_TIMEOUT,
    )
    .map_err(RemoteError::Endpoint)?;
    s3.get(key, limit).map_err(RemoteError::Get)
}
