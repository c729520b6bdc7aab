//! `nl6 report s3://BUCKET/KEY` (and `gs://`): one object read with the settings every S3 tool takes from
//! the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, and
//! `AWS_ENDPOINT_URL` for a store that is not AWS), handed to `nl6 report` as its opener.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::s3::{Addressing, S3};

/// How long one object read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// `report::cli::Opener` for bucket paths: `None` for anything else.
pub fn open(path: &str, limit: u64) -> Option<Result<Vec<u8>, String>> {
    if !super::s3url::is_bucket(path) {
        return None;
    }
    Some(read(path, limit, &|k| std::env::var(k).ok()))
}

fn read(path: &str, limit: u64, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<u8>, String> {
    let (scheme_and_bucket, key) = path[5..]
        .split_once('/')
        .map(|(b, k)| (format!("{}{b}", &path[..5]), k))
        .filter(|(_, k)| !k.is_empty() && !k.ends_with('/'))
        .ok_or_else(|| format!("{path:?} names no object (want s3://BUCKET/KEY)"))?;
    let location = super::s3url::parse(&scheme_and_bucket)?;
    let creds = super::s3creds::load(None, env)?;
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
    )?;
    s3.get(key, limit).map_err(|e| e.to_string())
}
