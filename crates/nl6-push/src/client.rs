//! The only outbound HTTP in nl6: one `POST <address>/ingest` per upload, through a ureq agent built for
//! one push.
//!
//! Decisions, all explicit in [`Client::new`]:
//! - **Success is exactly 200.** `http_status_as_error` is off so the status is read here; redirects are
//!   never followed (`max_redirects(0)`), a 3xx is a failure.
//! - **Every phase is bounded**: `timeout_global` (resolve, connect, TLS, send, receive) is the upload
//!   timeout, or less when a flush has less time left.
//! - **Credentials**: `Authorization: Basic` is set here from [`PushTarget::basic_auth`], never from URL
//!   userinfo (which [`ServerAddress`] drops); `X-Scope-OrgID` from the tenant. Every error string passes
//!   [`Scrubber`] before it leaves this module.
//! - **TLS roots**: rustls with roots loaded through rustls-native-certs: `SSL_CERT_FILE` and/or
//!   `SSL_CERT_DIR` when set (then only those), else the usual system bundle paths
//!   (`/etc/ssl/certs/ca-certificates.crt`, …). Plain file reads, so the static musl binary finds them on
//!   any distribution. webpki verifies, and a server certificate that is itself a configured root is
//!   accepted even with `CA:TRUE`, as curl and Go accept it (the lab's self-signed certificate; see
//!   [`super::tls`]).
//! - **Proxies**: Go's `net/http` rules, decided once per push by [`proxy_for`]: `HTTPS_PROXY` /
//!   `https_proxy` for https addresses, `HTTP_PROXY` / `http_proxy` for http, `NO_PROXY` / `no_proxy`
//!   excludes hosts, and loopback/`localhost` is never proxied. `ALL_PROXY` is ignored (ureq's own env
//!   reading would honour it; we pass the decision explicitly instead).
//! - **Threads**: an address given as an IP literal (the usual lab case) is used as is, so an upload runs
//!   entirely on the push's own thread. A host name is looked up on a short-lived thread named
//!   `nl6-push-dns` (the libc resolver cannot be cancelled), waited for at most the upload's remaining
//!   time, and at most one lookup per push is in flight: while a timed-out lookup still hangs, later
//!   uploads fail at once naming the host, and its late answer is reused ([`dns`]). ureq's default
//!   resolver would spawn an unnamed helper for every upload, even for literals, which inherits the name
//!   `nl6-push`.
#![forbid(unsafe_code)]

use crate::config::Target as PushTarget;
use crate::ingest_url::{AddressError, IngestParams, ServerAddress};
use crate::multipart;
use crate::source::EncodedProfile;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;
use ureq::unversioned::transport::{ConnectProxyConnector, Connector, TcpConnector};

#[path = "client_dns.rs"]
mod dns;
#[cfg(test)]
#[path = "client_hostile_tests.rs"]
mod hostile_tests;
use dns::PushResolver;
pub use dns::DNS_THREAD_NAME;

/// An HTTP client bound to one push target.
pub struct Client {
    agent: ureq::Agent,
    address: ServerAddress,
    name: String,
    spy_name: String,
    authorization: Option<String>,
    tenant: Option<String>,
    scrubber: Scrubber,
    proxy: Option<String>,
}

impl Client {
    /// Builds the agent; touches neither the network nor the certificate files (roots load on the first
    /// https connection). `Err` names what is wrong with the address or proxy.
    pub fn new(
        target: &PushTarget,
        name: String,
        spy_name: &str,
        user_agent: &str,
        upload_timeout: Duration,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Client, PushError> {
        let address = ServerAddress::parse(&target.address).map_err(PushError::Address)?;
        let mut secrets = Vec::new();
        let authorization = target.basic_auth.as_ref().map(|(user, password)| {
            let token = STANDARD.encode(format!("{user}:{password}"));
            secrets.push(password.clone());
            secrets.push(user.clone());
            secrets.push(token.clone());
            format!("Basic {token}")
        });
        // Userinfo in the address is never used, but must not leak through an error either.
        if let Some(info) = nl6_text::urlsplit::split(&target.address).and_then(|p| p.userinfo) {
            secrets.extend(info.split(':').map(str::to_string));
        }
        let proxy_url = proxy_for(&address, env);
        let proxy = match &proxy_url {
            Some(url) => {
                let p = ureq::Proxy::new(url).map_err(|e| PushError::Proxy {
                    proxy: strip_userinfo(url),
                    reason: e.to_string(),
                })?;
                if let Some(pw) = p.password() {
                    secrets.push(pw.to_string());
                }
                Some(p)
            }
            None => None,
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(upload_timeout))
            .user_agent(user_agent)
            .proxy(proxy)
            // Uploads come in bursts of three per interval; an idle connection older than this is not
            // reused, so a server that closed it in the meantime cannot fail the next upload.
            .max_idle_age(Duration::from_secs(5))
            .build();
        // ureq's default chain with TLS by super::tls (ureq's rustls connector takes no custom verifier).
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(TcpConnector::default())
                .chain(crate::tls::LabTlsConnector::default());
        let agent = ureq::Agent::with_parts(config, connector, PushResolver::default());
        Ok(Client {
            agent,
            address,
            name,
            spy_name: spy_name.to_string(),
            authorization,
            tenant: target.tenant.clone(),
            scrubber: Scrubber::new(secrets),
            proxy: proxy_url.map(|u| strip_userinfo(&u)),
        })
    }

    /// The address for log lines (no userinfo).
    pub fn display_address(&self) -> String {
        self.address.display()
    }

    /// The proxy in use, without credentials, if any.
    pub fn proxy(&self) -> Option<&str> {
        self.proxy.as_deref()
    }

    /// Scrubs credentials from any message about this push.
    pub fn scrub(&self, message: &str) -> String {
        self.scrubber.scrub(message)
    }

    /// Uploads one profile within `timeout`. `Ok` only for a 200; the `Err` is credential-free.
    pub fn upload(&self, profile: &EncodedProfile, timeout: Duration) -> Result<(), PushError> {
        let (units, aggregation, sample_rate) = profile.kind.query_meta();
        let url = self.address.ingest_url(&IngestParams {
            name: self.name.clone(),
            spy_name: self.spy_name.clone(),
            from: profile.from,
            until: profile.until,
            sample_rate,
            units,
            aggregation,
        });
        let body = multipart::ingest_body(&profile.pprof_gz, profile.kind.sample_type_config());
        let mut request = self
            .agent
            .post(&url)
            .header("Content-Type", &body.content_type);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        if let Some(tenant) = &self.tenant {
            request = request.header("X-Scope-OrgID", tenant);
        }
        let kind = profile.kind.name();
        let result = request
            .config()
            .timeout_global(Some(timeout))
            .build()
            .send(&body.bytes[..]);
        let mut response = match result {
            Ok(r) => r,
            // ureq's message can quote what the server sent (a malformed status line or header); its
            // time-out says only "timeout: global", so say how long the upload waited.
            Err(e) => {
                let text = nl6_text::logtext::remote(&self.scrub(&e.to_string()));
                return Err(PushError::Transport {
                    kind,
                    message: match e {
                        ureq::Error::Timeout(_) => format!("timed out after {timeout:?} ({text})"),
                        _ => text,
                    },
                });
            }
        };
        let status = response.status().as_u16();
        // Read (a bounded part of) the body: it names the server's reason, and a drained body lets the
        // connection be reused.
        let text = response
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        if status == 200 {
            return Ok(());
        }
        Err(match status {
            300..=399 => PushError::Redirect { kind, status },
            // A collector may echo the credentials transformed (upper-cased, percent- or JSON-escaped),
            // which the exact-copy scrubber cannot recognise: a refusal's body is never shown.
            401 | 403 => PushError::Refused { kind, status },
            _ => PushError::Status {
                kind,
                status,
                // Scrubbed before escaping: an escaped secret would no longer match its exact copy.
                reason: nl6_text::logtext::remote(&self.scrub(&server_message(&text))),
            },
        })
    }
}

/// Why the push could not be set up, or one upload failed. `Display` is credential-free (text from the
/// server or ureq is scrubbed of every configured secret, then escaped for a log line) and names the
/// remedy where nl6 knows one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushError {
    /// The server address cannot be used (scheme, host).
    Address(AddressError),
    /// The proxy named by the environment (`HTTPS_PROXY`, …) cannot be used.
    Proxy { proxy: String, reason: String },
    /// No answer: connect, TLS, time-out or a malformed answer, in ureq's words.
    Transport { kind: &'static str, message: String },
    /// A 3xx: redirects are not followed.
    Redirect { kind: &'static str, status: u16 },
    /// 401 or 403: the credentials or the tenant are wrong (the body is never shown).
    Refused { kind: &'static str, status: u16 },
    /// Any other answer but 200, with the server's reason when it gave one.
    Status {
        kind: &'static str,
        status: u16,
        reason: String,
    },
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Address(e) => write!(f, "{e}"),
            PushError::Proxy { proxy, reason } => write!(f, "proxy {proxy}: {reason}"),
            PushError::Transport { kind, message } => write!(f, "{kind} upload: {message}"),
            PushError::Redirect { kind, status } => write!(
                f,
                "{kind} upload: server answered {status} (redirects are not followed)"
            ),
            PushError::Refused { kind, status } => {
                write!(
                f,
                "{kind} upload: server answered {status} {}: check the push credentials and tenant",
                if *status == 401 { "Unauthorized" } else { "Forbidden" }
            )
            }
            PushError::Status {
                kind,
                status,
                reason,
            } if reason.is_empty() => {
                write!(f, "{kind} upload: server answered {status}")
            }
            PushError::Status {
                kind,
                status,
                reason,
            } => {
                write!(f, "{kind} upload: server answered {status}: {reason}")
            }
        }
    }
}

impl std::error::Error for PushError {}

/// The `message` of Pyroscope's JSON error body, else the body's first line (raw: the caller scrubs
/// and escapes it with [`nl6_text::logtext::remote`]).
fn server_message(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        });
    let text = from_json.unwrap_or_else(|| body.lines().next().unwrap_or("").to_string());
    text.trim().to_string()
}

/// Replaces every configured secret in a message with `<redacted>`.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    secrets: Vec<String>,
}

impl Scrubber {
    /// Longest secrets are replaced first (a token may contain a shorter secret). User names shorter than
    /// three characters are still replaced: a mangled message beats a leaked credential.
    pub fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Scrubber { secrets }
    }

    pub fn scrub(&self, message: &str) -> String {
        let mut out = message.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        out
    }
}

/// The proxy URL to use for `address`, following Go's `httpproxy.FromEnvironment` (see the module doc).
/// `env` reads a variable (`std::env::var` in production).
pub fn proxy_for(address: &ServerAddress, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |upper: &str, lower: &str| {
        env(upper)
            .filter(|v| !v.is_empty())
            .or_else(|| env(lower).filter(|v| !v.is_empty()))
    };
    let proxy = if address.scheme == "https" {
        get("HTTPS_PROXY", "https_proxy")
    } else {
        get("HTTP_PROXY", "http_proxy")
    }?;
    let host = address.host().to_ascii_lowercase();
    if host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        return None;
    }
    let port = address
        .authority
        .rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| {
            if address.scheme == "https" {
                "443"
            } else {
                "80"
            }
            .to_string()
        });
    let no_proxy = get("NO_PROXY", "no_proxy").unwrap_or_default();
    if no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|e| no_proxy_matches(e, &host, &port))
    {
        return None;
    }
    Some(if proxy.contains("://") {
        proxy
    } else {
        format!("http://{proxy}")
    })
}

fn no_proxy_matches(entry: &str, host: &str, port: &str) -> bool {
    if entry == "*" {
        return true;
    }
    let entry = entry.to_ascii_lowercase();
    if let Some((net, bits)) = entry.split_once('/') {
        return match (
            net.parse::<IpAddr>(),
            bits.parse::<u32>(),
            host.parse::<IpAddr>(),
        ) {
            (Ok(net), Ok(bits), Ok(ip)) => in_cidr(ip, net, bits),
            _ => false,
        };
    }
    if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
        return host.parse::<IpAddr>() == Ok(ip);
    }
    // `name[:port]`; a leading dot matches subdomains only, otherwise the name and its subdomains.
    let (name, entry_port) = match entry.rsplit_once(':') {
        Some((n, p)) if p.chars().all(|c| c.is_ascii_digit()) => (n, Some(p)),
        _ => (entry.as_str(), None),
    };
    if entry_port.is_some_and(|p| p != port) {
        return false;
    }
    match name.strip_prefix('.') {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => host == name || host.ends_with(&format!(".{name}")),
    }
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// `scheme://user:pass@host` → `scheme://host` (for log lines about a proxy).
pub fn strip_userinfo(url: &str) -> String {
    match nl6_text::urlsplit::split(url) {
        Some(p) => match p.userinfo {
            // Everything after `scheme://userinfo@`: the host onwards.
            Some(info) => format!(
                "{}://{}",
                p.scheme,
                &url[p.scheme.len() + 3 + info.len() + 1..]
            ),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn proxy(address: &str, vars: &[(&str, &str)]) -> Option<String> {
        proxy_for(&ServerAddress::parse(address).unwrap(), &env_of(vars))
    }

    #[test]
    fn scrubber_removes_password_user_and_token() {
        let s = Scrubber::new(vec![
            "s3cret".into(),
            "alice".into(),
            "YWxpY2U6czNjcmV0".into(),
            String::new(),
        ]);
        let out = s.scrub("401 for alice (Basic YWxpY2U6czNjcmV0, pass s3cret)");
        assert_eq!(
            out,
            "401 for <redacted> (Basic <redacted>, pass <redacted>)"
        );
        assert_eq!(s.scrub("connection refused"), "connection refused");
    }

    #[test]
    fn client_scrubs_its_own_credentials_and_address_userinfo() {
        let target = PushTarget {
            address: "http://bob:urlpass@127.0.0.1:9/".into(),
            basic_auth: Some(("alice".into(), "s3cret".into())),
            tenant: Some("t1".into()),
            interval: Duration::from_secs(15),
            wall: false,
        };
        let c = Client::new(
            &target,
            "nl6{}".into(),
            "nl6",
            "0.1.0",
            Duration::from_secs(1),
            &env_of(&[]),
        )
        .unwrap();
        assert_eq!(c.display_address(), "http://127.0.0.1:9/");
        let out = c.scrub("alice s3cret YWxpY2U6czNjcmV0 urlpass");
        assert!(
            !out.contains("s3cret") && !out.contains("alice") && !out.contains("urlpass"),
            "{out}"
        );
        assert!(!out.contains("YWxpY2U6czNjcmV0"), "{out}");
    }

    #[test]
    fn proxy_follows_scheme_and_skips_loopback() {
        let vars = [
            ("HTTP_PROXY", "http://p:3128"),
            ("https_proxy", "proxy.lab:3129"),
        ];
        assert_eq!(
            proxy("http://pyro.lab:4040", &vars).as_deref(),
            Some("http://p:3128")
        );
        assert_eq!(
            proxy("https://pyro.lab", &vars).as_deref(),
            Some("http://proxy.lab:3129")
        );
        assert_eq!(proxy("http://127.0.0.1:4040", &vars), None);
        assert_eq!(proxy("http://localhost:4040", &vars), None);
        assert_eq!(proxy("http://[::1]:4040", &vars), None);
        assert_eq!(
            proxy("http://pyro.lab", &[("ALL_PROXY", "http://p:1")]),
            None
        );
        assert_eq!(
            proxy("http://pyro.lab", &[("HTTPS_PROXY", "http://p:1")]),
            None
        );
    }

    #[test]
    fn no_proxy_rules_match_go() {
        let with =
            |no: &str, addr: &str| proxy(addr, &[("HTTP_PROXY", "http://p:1"), ("NO_PROXY", no)]);
        assert_eq!(with("*", "http://a.lab"), None);
        assert_eq!(with("lab", "http://a.lab"), None);
        assert_eq!(with("a.lab", "http://a.lab"), None);
        assert_eq!(with(".lab", "http://lab"), Some("http://p:1".into()));
        assert_eq!(with(".lab", "http://x.lab"), None);
        assert_eq!(
            with("other.lab, b.lab", "http://a.lab"),
            Some("http://p:1".into())
        );
        assert_eq!(with("10.0.0.0/8", "http://10.1.2.3:4040"), None);
        assert_eq!(
            with("10.0.0.0/8", "http://11.1.2.3:4040"),
            Some("http://p:1".into())
        );
        assert_eq!(with("10.1.2.3", "http://10.1.2.3:4040"), None);
        assert_eq!(with("a.lab:4040", "http://a.lab:4040"), None);
        assert_eq!(
            with("a.lab:80", "http://a.lab:4040"),
            Some("http://p:1".into())
        );
    }

    #[test]
    fn proxy_credentials_never_reach_the_display_form() {
        assert_eq!(strip_userinfo("http://u:pw@p:3128"), "http://p:3128");
        assert_eq!(strip_userinfo("http://p:3128/x@y"), "http://p:3128/x@y");
    }

    #[test]
    fn server_message_prefers_json_message() {
        assert_eq!(
            server_message(r#"{"code":401,"message":"authentication required"}"#),
            "authentication required"
        );
        assert_eq!(server_message("plain\nsecond"), "plain");
        assert_eq!(server_message(""), "");
    }
}
