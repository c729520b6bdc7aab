//! `-out s3://BUCKET/PREFIX` and `gs://BUCKET/PREFIX` as a value: the bucket, the key prefix (no leading
//! `/`, a trailing `/` when not empty), and whether it is the GCS shorthand (its XML API at
//! `https://storage.googleapis.com`, region `auto`). No I/O.
#![forbid(unsafe_code)]

/// The endpoint `gs://` stands for: GCS's S3-compatible XML API (HMAC keys sign SigV4 requests).
pub const GCS_ENDPOINT: &str = "https://storage.googleapis.com";

/// An archive in a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub bucket: String,
    /// `""` or `fleet/` (always ending in `/`).
    pub prefix: String,
    pub gcs: bool,
}

impl Location {
    /// `s3://bucket/prefix` for logs and meta.json.
    pub fn display(&self) -> String {
        let scheme = if self.gcs { "gs" } else { "s3" };
        format!("{scheme}://{}/{}", self.bucket, self.prefix)
    }

    /// The object key of `relative` (a `/`-separated path inside the archive).
    pub fn key(&self, relative: &str) -> String {
        format!("{}{relative}", self.prefix)
    }
}

/// True when `out` names a bucket rather than a directory.
pub fn is_bucket(out: &str) -> bool {
    out.starts_with("s3://") || out.starts_with("gs://")
}

/// Why a bucket URL was refused (the URL as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    Scheme(String),
    /// The URL and its bucket name.
    Bucket(String, String),
    Prefix(String),
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlError::Scheme(out) => write!(
                f,
                "{out:?} is not s3://BUCKET/PREFIX or gs://BUCKET/PREFIX"
            ),
            UrlError::Bucket(out, bucket) => write!(
                f,
                "{out:?}: bucket name {bucket:?} is not 3-63 lower-case letters, digits, '-', '.' or '_'"
            ),
            UrlError::Prefix(out) => write!(
                f,
                "{out:?}: the prefix has an empty, '.' or '..' component"
            ),
        }
    }
}

impl std::error::Error for UrlError {}

/// Parses `s3://BUCKET[/PREFIX]` or `gs://BUCKET[/PREFIX]`; errors say what was wrong.
pub fn parse(out: &str) -> Result<Location, UrlError> {
    let (gcs, rest) = match (out.strip_prefix("s3://"), out.strip_prefix("gs://")) {
        (Some(r), _) => (false, r),
        (_, Some(r)) => (true, r),
        _ => return Err(UrlError::Scheme(out.to_string())),
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c);
    if bucket.len() < 3 || bucket.len() > 63 || !bucket.chars().all(ok) {
        return Err(UrlError::Bucket(out.to_string(), bucket.to_string()));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|c| c == "." || c == "..") || prefix.contains("//") {
        return Err(UrlError::Prefix(out.to_string()));
    }
    Ok(Location {
        bucket: bucket.to_string(),
        prefix: if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        },
        gcs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_prefixes() {
        let l = parse("s3://fleet-profiles/prod/eu").unwrap();
        assert_eq!(
            (l.bucket.as_str(), l.prefix.as_str(), l.gcs),
            ("fleet-profiles", "prod/eu/", false)
        );
        assert_eq!(l.key("svc/2026/a"), "prod/eu/svc/2026/a");
        assert_eq!(l.display(), "s3://fleet-profiles/prod/eu/");
        let g = parse("gs://fleet").unwrap();
        assert_eq!((g.prefix.as_str(), g.gcs), ("", true));
        assert_eq!(parse("s3://fleet/p/").unwrap().prefix, "p/");
        for bad in [
            "s3://",
            "s3://AB",
            "s3://x",
            "s3://fleet/a/../b",
            "s3://fleet/a//b",
            "/dir",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(is_bucket("gs://x") && !is_bucket("/var/lib/nl6"));
    }
}
