//! The bucket client of `nl6 collect`: PUT (optionally `If-None-Match: *`, so an existing key is refused,
//! never overwritten), GET, LIST (ListObjectsV2, paginated), DELETE and the bucket's lifecycle rules,
//! against any S3-compatible store (AWS S3, GCS's XML API with HMAC keys, SeaweedFS, MinIO, Ceph).
//! Requests are SigV4-presigned by `rusty-s3` (no I/O of its own) and sent by ureq, blocking, each
//! bounded by `-timeout`.
//!
//! Never prints, returns or logs a signed URL (it carries the access key id): errors name the bucket,
//! the key, the store's error code and a remedy ([`S3Error`]); what the store says back is redacted
//! ([`super::s3redact`]), escaped and bounded. Every object URL is built from a key [`super::s3key`]
//! accepts, percent-encoded so the store receives exactly that key, and checked after signing. Every
//! PUT carries a signed Content-MD5 and its answer's ETag must be that MD5. Listings
//! ([`super::s3list`]) are bounded in keys, pages, bytes a page and time.
//!
//! After a transport failure (unreachable, timed out) the store is taken as down until
//! [`S3::new_cycle`]: later calls fail at once, so one cycle waits on a dead store for one timeout,
//! not one per object.
#![forbid(unsafe_code)]

use std::sync::Mutex;
use std::time::Duration;

use rusty_s3::actions::{DeleteObject, GetObject, ListObjectsV2, PutObject};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

use super::s3key::{self, KeyError};
use super::s3url::Location;

/// How long a presigned request stays valid (it is sent at once; this only bounds clock skew).
pub(super) const SIGNED_FOR: Duration = Duration::from_secs(900);

/// Most bytes of an error answer read.
const ERROR_BODY: u64 = 64 << 10;

/// A failed bucket request: what, where, the store's code, and the remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Error {
    pub op: &'static str,
    pub bucket: String,
    pub key: String,
    /// The HTTP status when the store answered.
    pub http: Option<u16>,
    /// The store's `<Code>` (`AccessDenied`, `NoSuchBucket`…), or `Unreachable` / `Timeout`.
    pub code: String,
    /// The store's `<Message>` (escaped, bounded) or the transport's words.
    pub detail: String,
}

impl S3Error {
    /// True when the store answered (a refusal), false when it could not be reached.
    pub fn answered(&self) -> bool {
        self.http.is_some()
    }

    /// True for the conditional PUT's refusal: the key exists already.
    pub fn exists(&self) -> bool {
        self.http == Some(412) || self.code == "PreconditionFailed"
    }

    fn remedy(&self) -> &'static str {
        match self.code.as_str() {
            "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "InvalidToken"
            | "ExpiredToken" => {
                "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (or -s3-credentials) and that this key may read and write the bucket"
            }
            "NoSuchBucket" => "create the bucket, or fix the bucket name in -out",
            "PreconditionFailed" => {
                "the key exists already (another collector wrote it): give each collector its own targets"
            }
            "AuthorizationHeaderMalformed" | "PermanentRedirect" | "IllegalLocationConstraintException" => {
                "set -s3-region (or AWS_REGION) to the bucket's region"
            }
            "RequestTimeTooSkewed" => "fix this machine's clock (NTP)",
            "ETagMismatch" | "BadDigest" | "InvalidDigest" => {
                "the store did not keep the bytes sent (or changes them): the snapshot waits in the spool; check the store"
            }
            "InvalidKey" => "rename the program or host in the targets file",
            "ListingLoops" | "MalformedListing" | "ListingTooLarge" => {
                "the store's listing is not S3's: retention waits; check the store (or delete expired snapshots by hand)"
            }
            "Unreachable" | "Timeout" => {
                "check -s3-endpoint and that the store is up; snapshots wait in the spool and go up next cycle"
            }
            _ if self.http.is_some_and(|h| h >= 500) => {
                "the store failed; snapshots wait in the spool and go up next cycle"
            }
            _ => "see the store's documentation for this code",
        }
    }
}

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} s3://{}/{}: {}",
            self.op,
            self.bucket,
            nl6_text::logtext::remote_within(&self.key, 200),
            self.code
        )?;
        if let Some(h) = self.http {
            write!(f, " (HTTP {h})")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        write!(f, "; {}", self.remedy())
    }
}

/// Why no client could be made for the bucket: the endpoint as given, and the URL parser's or the
/// signer's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointError {
    Url(String, String),
    Bucket {
        endpoint: String,
        bucket: String,
        detail: String,
    },
}

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointError::Url(endpoint, e) => write!(f, "-s3-endpoint {endpoint:?}: {e}"),
            EndpointError::Bucket {
                endpoint,
                bucket,
                detail,
            } => write!(
                f,
                "-s3-endpoint {endpoint:?} with bucket {bucket:?}: {detail}"
            ),
        }
    }
}

impl std::error::Error for EndpointError {}

impl std::error::Error for S3Error {}

/// How requests address the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `https://endpoint/bucket/key`.
    Path,
    /// `https://bucket.endpoint/key`.
    VirtualHost,
}

/// A bucket and the means to talk to it.
pub struct S3 {
    pub location: Location,
    pub(super) bucket: Bucket,
    pub(super) creds: Credentials,
    agent: ureq::Agent,
    timeout: Duration,
    down: Mutex<Option<S3Error>>,
}

impl std::fmt::Debug for S3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl S3 {
    /// The client for `location` at `endpoint` (`https://s3.<region>.amazonaws.com` when `None`; GCS's for
    /// `gs://`).
    pub fn new(
        location: Location,
        endpoint: Option<&str>,
        region: &str,
        addressing: Addressing,
        creds: Credentials,
        timeout: Duration,
    ) -> Result<S3, EndpointError> {
        let default = if location.gcs {
            super::s3url::GCS_ENDPOINT.to_string()
        } else {
            format!("https://s3.{region}.amazonaws.com")
        };
        let endpoint = endpoint.map(str::to_string).unwrap_or(default);
        let url = endpoint
            .parse()
            .map_err(|e| EndpointError::Url(endpoint.clone(), format!("{e}")))?;
        let style = match addressing {
            Addressing::Path => UrlStyle::Path,
            Addressing::VirtualHost => UrlStyle::VirtualHost,
        };
        let bucket =
            Bucket::new(url, style, location.bucket.clone(), region.to_string()).map_err(|e| {
                EndpointError::Bucket {
                    endpoint: endpoint.clone(),
                    bucket: location.bucket.clone(),
                    detail: format!("{e:?}"),
                }
            })?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(super::fetch::CONNECT_TIMEOUT.min(timeout)))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("nl6-collect/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(S3 {
            location,
            bucket,
            creds,
            agent,
            timeout,
            down: Mutex::new(None),
        })
    }

    /// The bucket's base URL (no signature): for tests of the addressing.
    pub fn base_url(&self) -> String {
        self.bucket.base_url().to_string()
    }

    /// Forgets an earlier cycle's transport failure: the next call tries the store again.
    pub fn new_cycle(&self) {
        *self.down.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    pub(super) fn error(&self, op: &'static str, key: &str, code: &str, detail: String) -> S3Error {
        S3Error {
            op,
            bucket: self.location.bucket.clone(),
            key: key.to_string(),
            http: None,
            code: code.to_string(),
            detail,
        }
    }

    /// Sends a request `go` made from the signed URL; a transport failure marks the store down.
    pub(super) fn send(
        &self,
        op: &'static str,
        key: &str,
        go: impl FnOnce(&ureq::Agent) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, S3Error> {
        if let Some(e) = self.down.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(S3Error {
                op,
                key: key.to_string(),
                detail: format!("{} (not tried again this cycle)", e.detail),
                ..e
            });
        }
        match go(&self.agent) {
            Ok(resp) if resp.status().is_success() => Ok(resp),
            Ok(mut resp) => Err(self.refusal(op, key, &mut resp)),
            Err(e) => {
                let err = match e {
                    ureq::Error::Timeout(_) => self.error(
                        op,
                        key,
                        "Timeout",
                        format!("no answer within {:?}", self.timeout),
                    ),
                    other => self.error(op, key, "Unreachable", self.scrub(&other.to_string())),
                };
                *self.down.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.clone());
                Err(err)
            }
        }
    }

    /// A store's or transport's words without a secret: signed-URL parameters and `Authorization`
    /// values redacted, the key id, secret and session token removed wherever they appear (before
    /// the text is cut, so no part of one survives), then escaped and bounded.
    pub(super) fn scrub(&self, text: &str) -> String {
        let head: String = text.chars().take(4096).collect();
        let text = super::s3redact::redact(&head);
        let secrets = [
            self.creds.key(),
            self.creds.secret(),
            self.creds.token().unwrap_or(""),
        ];
        let text = super::s3redact::scrub_secrets(&text, &secrets);
        nl6_text::logtext::remote_within(&text, 300)
    }

    /// Refuses a key no URL can carry exactly ([`s3key::check`]).
    fn checked(&self, op: &'static str, key: &str) -> Result<(), S3Error> {
        s3key::check(key).map_err(|e| self.key_error(op, key, e))
    }

    /// Passes when a signed URL's `path` names exactly `key` under the bucket: `url` normalises dot
    /// segments, so a path it rewrote is refused rather than sent.
    fn exact(&self, op: &'static str, key: &str, path: &str) -> Result<(), S3Error> {
        let want = format!(
            "{}{}",
            self.bucket.base_url().path(),
            s3key::encode_path(key)
        );
        if path == want {
            Ok(())
        } else {
            Err(self.key_error(op, key, KeyError::Rewritten))
        }
    }

    fn key_error(&self, op: &'static str, key: &str, e: KeyError) -> S3Error {
        self.error(op, key, "InvalidKey", e.to_string())
    }

    fn refusal(
        &self,
        op: &'static str,
        key: &str,
        resp: &mut ureq::http::Response<ureq::Body>,
    ) -> S3Error {
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(ERROR_BODY)
            .read_to_vec()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let code = xml_field(&body, "Code").unwrap_or_else(|| match status {
            403 => "AccessDenied".into(),
            404 => "NotFound".into(),
            412 => "PreconditionFailed".into(),
            _ => format!("HTTP{status}"),
        });
        let detail = xml_field(&body, "Message").unwrap_or_default();
        S3Error {
            http: Some(status),
            code: self.scrub(&code),
            detail: self.scrub(&detail),
            ..self.error(op, key, "", String::new())
        }
    }

    /// PUTs `body` at `key`; with `if_absent`, the store refuses (412, [`S3Error::exists`]) when the key
    /// exists already. The body's MD5 is sent (signed) as Content-MD5, so the store refuses bytes
    /// changed on the way; an answer whose ETag is not that MD5 is an error (`ETagMismatch`): the store
    /// did not keep what was sent.
    pub fn put(
        &self,
        key: &str,
        body: &[u8],
        if_absent: bool,
        content_type: &str,
    ) -> Result<(), S3Error> {
        use base64::Engine as _;
        use md5::Digest as _;
        let digest = md5::Md5::digest(body);
        let md5 = base64::engine::general_purpose::STANDARD.encode(digest);
        self.checked("PUT", key)?;
        let mut action = PutObject::new(&self.bucket, Some(&self.creds), key);
        action.headers_mut().insert("content-md5", md5.clone());
        if if_absent {
            action.headers_mut().insert("if-none-match", "*");
        }
        let url = action.sign(SIGNED_FOR);
        self.exact("PUT", key, url.path())?;
        let resp = self.send("PUT", key, |agent| {
            let mut req = agent
                .put(url.as_str())
                .header("content-type", content_type)
                .header("content-md5", md5.as_str());
            if if_absent {
                req = req.header("if-none-match", "*");
            }
            req.send(body)
        })?;
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let etag = resp
            .headers()
            .get("etag")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        match etag {
            Some(e) if e.trim().eq_ignore_ascii_case(&format!("\"{hex}\"")) => Ok(()),
            other => Err(self.error(
                "PUT",
                key,
                "ETagMismatch",
                format!(
                    "the store answered 200 with ETag {} for a body whose MD5 is \"{hex}\"",
                    other.map_or("(none)".to_string(), |e| format!("\"{}\"", self.scrub(&e)))
                ),
            )),
        }
    }

    /// GETs `key`, at most `limit` bytes.
    pub fn get(&self, key: &str, limit: u64) -> Result<Vec<u8>, S3Error> {
        self.checked("GET", key)?;
        let url = GetObject::new(&self.bucket, Some(&self.creds), key).sign(SIGNED_FOR);
        self.exact("GET", key, url.path())?;
        let mut resp = self.send("GET", key, |agent| agent.get(url.as_str()).call())?;
        // At most `limit` bytes, without an error past it: the caller's size check names its own limit.
        use std::io::Read as _;
        let mut out = Vec::new();
        resp.body_mut()
            .with_config()
            .limit(limit.saturating_add(1))
            .reader()
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| self.error("GET", key, "Unreachable", self.scrub(&e.to_string())))?;
        Ok(out)
    }

    /// DELETEs exactly `key` (never a key a URL parser made of it).
    pub fn delete(&self, key: &str) -> Result<(), S3Error> {
        self.checked("DELETE", key)?;
        let url = DeleteObject::new(&self.bucket, Some(&self.creds), key).sign(SIGNED_FOR);
        self.exact("DELETE", key, url.path())?;
        self.send("DELETE", key, |agent| agent.delete(url.as_str()).call())
            .map(|_| ())
    }

    /// One listing of at most one key under the prefix: do the keys work and does the bucket exist?
    pub fn probe(&self) -> Result<(), S3Error> {
        let prefix = self.location.prefix.clone();
        let mut action = ListObjectsV2::new(&self.bucket, Some(&self.creds));
        action.with_prefix(prefix.as_str());
        action.with_max_keys(1);
        let url = action.sign(SIGNED_FOR);
        self.send("LIST", &prefix, |agent| agent.get(url.as_str()).call())
            .map(|_| ())
    }

    /// The bucket's lifecycle configuration XML, `None` when it has none.
    pub fn get_lifecycle(&self) -> Result<Option<String>, S3Error> {
        let mut action = GetObject::new(&self.bucket, Some(&self.creds), "");
        action.query_mut().insert("lifecycle", "");
        let url = action.sign(SIGNED_FOR);
        match self.send("GET", "?lifecycle", |agent| agent.get(url.as_str()).call()) {
            Ok(mut resp) => resp
                .body_mut()
                .with_config()
                .limit(1 << 20)
                .read_to_string()
                .map(Some)
                .map_err(|e| {
                    self.error(
                        "GET",
                        "?lifecycle",
                        "Unreachable",
                        self.scrub(&e.to_string()),
                    )
                }),
            Err(e) if e.code == "NoSuchLifecycleConfiguration" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces the bucket's lifecycle configuration with `xml`.
    pub fn put_lifecycle(&self, xml: &str) -> Result<(), S3Error> {
        use base64::Engine as _;
        use md5::Digest as _;
        let md5 =
            base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(xml.as_bytes()));
        let mut action = PutObject::new(&self.bucket, Some(&self.creds), "");
        action.query_mut().insert("lifecycle", "");
        action.headers_mut().insert("content-md5", md5.clone());
        let url = action.sign(SIGNED_FOR);
        self.send("PUT", "?lifecycle", |agent| {
            agent
                .put(url.as_str())
                .header("content-md5", md5.as_str())
                .header("content-type", "application/xml")
                .send(xml.as_bytes())
        })
        .map(|_| ())
    }
}

/// The text of the first `<name>…</name>` in an S3 error or lifecycle document (entities as sent).
pub fn xml_field(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_bucket_key_code_and_remedy() {
        let e = S3Error {
            op: "PUT",
            bucket: "fleet".into(),
            key: "p/svc/meta.json".into(),
            http: Some(403),
            code: "AccessDenied".into(),
            detail: "Access Denied".into(),
        };
        let s = e.to_string();
        assert!(s.starts_with("PUT s3://fleet/p/svc/meta.json: AccessDenied (HTTP 403): Access Denied; check AWS_ACCESS_KEY_ID"), "{s}");
        assert!(e.answered() && !e.exists());
        let x = "<Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>";
        assert_eq!(xml_field(x, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(xml_field(x, "Key"), None);
    }

    #[test]
    fn keys_no_url_carries_exactly_are_refused_before_any_request() {
        // A closed loopback port: a request sent would fail as Unreachable, not as InvalidKey.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let s3 = S3::new(
            super::super::s3url::parse("s3://fleet/p").unwrap(),
            Some(&format!("http://127.0.0.1:{port}")),
            "us-east-1",
            Addressing::Path,
            Credentials::new("K", "S"),
            Duration::from_secs(1),
        )
        .unwrap();
        for key in ["p/a/../../victim/x", "p/%2e%2e/x", "p/a\rb", "p//x"] {
            for e in [
                s3.delete(key).unwrap_err(),
                s3.get(key, 10).unwrap_err(),
                s3.put(key, b"x", true, "text/plain").unwrap_err(),
            ] {
                assert_eq!(e.code, "InvalidKey", "{key:?}: {e}");
                assert!(!e.to_string().contains('\r'), "{e}");
            }
        }
        assert_eq!(s3.delete("p/ok").unwrap_err().code, "Unreachable");
    }

    #[test]
    fn gcs_shorthand_addresses_storage_googleapis_com() {
        let loc = super::super::s3url::parse("gs://fleet-profiles/prod").unwrap();
        let s3 = S3::new(
            loc,
            None,
            "auto",
            Addressing::Path,
            Credentials::new("K", "S"),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            s3.base_url(),
            "https://storage.googleapis.com/fleet-profiles/"
        );
        let loc = super::super::s3url::parse("s3://fleet-profiles").unwrap();
        let s3 = S3::new(
            loc,
            None,
            "eu-west-1",
            Addressing::VirtualHost,
            Credentials::new("K", "S"),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            s3.base_url(),
            "https://fleet-profiles.s3.eu-west-1.amazonaws.com/"
        );
    }
}
