//! Building the `/ingest` URL of one upload: the server address joined with `ingest` the way Go's
//! `path.Join` does (a path prefix is kept, a trailing slash never yields `//ingest`, `.`/`..` resolved), the
//! address's own query kept, and the upload's parameters (`name`, `from`, `until`, `spyName`, `sampleRate`,
//! `units`, `aggregationType`; never `format`) set, keys sorted as Go's `url.Values.Encode` does.
//!
//! Also the series `name` (`<application>{hostname=…,version=…}`, parts sanitised). Plain values only: this module
//! never resolves, connects or reads the environment.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// The spy name a push sends unless its embedder names its own ([`crate::PushConfig::with_spy_name`]);
/// the server stores it as `pyroscope_spy`.
pub const DEFAULT_SPY_NAME: &str = "nl6-profile";

/// Why a server address cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressError {
    /// The scheme is missing or is not `http`/`https` (the scheme as given).
    Scheme(String),
    /// No host between `//` and the path.
    NoHost,
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddressError::Scheme(s) => {
                write!(f, "server address: scheme {s:?} is not http or https")
            }
            AddressError::NoHost => f.write_str("server address: no host"),
        }
    }
}

impl std::error::Error for AddressError {}

/// A server address split into the parts the push uses. Userinfo in the address is dropped: credentials
/// travel only in the `Authorization` header, so they never appear in a URL, a log line or an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// `host[:port]` as given (IPv6 in brackets), without userinfo.
    pub authority: String,
    /// The path prefix as given (may be empty).
    pub path: String,
    /// The raw query of the address (without `?`; may be empty).
    pub query: String,
}

impl ServerAddress {
    /// Splits `address` (`scheme://[user@]host[:port][/path][?query][#fragment]`).
    pub fn parse(address: &str) -> Result<ServerAddress, AddressError> {
        let address = address.trim();
        let parts = nl6_text::urlsplit::split(address)
            .ok_or_else(|| AddressError::Scheme(String::new()))?;
        let scheme = parts.scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(AddressError::Scheme(scheme));
        }
        let (authority, path) = (parts.authority, parts.path.to_string());
        let query = parts.query.unwrap_or_default().to_string();
        if authority.is_empty() {
            return Err(AddressError::NoHost);
        }
        Ok(ServerAddress {
            scheme,
            authority: authority.to_string(),
            path,
            query,
        })
    }

    /// The host without port or brackets (for `NO_PROXY` matching).
    pub fn host(&self) -> &str {
        let a = self.authority.as_str();
        match nl6_text::urlsplit::split_host_port(a) {
            Ok((host, _)) => host,
            // A malformed bracket (refused by the gate before any push starts): the text inside it.
            Err(_) => a.trim_start_matches('[').split(']').next().unwrap_or(a),
        }
    }

    /// The address for humans (logs, errors): scheme, authority and path, never userinfo.
    pub fn display(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.path)
    }

    /// The `/ingest` URL for `params`.
    pub fn ingest_url(&self, params: &IngestParams) -> String {
        let path = join_path(&self.path, "ingest");
        format!(
            "{}://{}{}?{}",
            self.scheme,
            self.authority,
            path,
            merge_query(&self.query, &params.pairs())
        )
    }
}

/// The per-upload query parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestParams {
    /// The series name, see [`series_name`].
    pub name: String,
    /// Window start.
    pub from: SystemTime,
    /// Window end.
    pub until: SystemTime,
    /// `sampleRate` (100 for CPU).
    pub sample_rate: u32,
    /// `units` (parsed but unused by the server on the pprof path).
    pub units: &'static str,
    /// `aggregationType` (likewise unused).
    pub aggregation: &'static str,
    /// `spyName`: which profiler made the profile (the server's `pyroscope_spy`).
    pub spy_name: String,
}

impl IngestParams {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aggregationType", self.aggregation.to_string()),
            ("from", unix_nanos(self.from).to_string()),
            ("name", self.name.clone()),
            ("sampleRate", self.sample_rate.to_string()),
            ("spyName", self.spy_name.clone()),
            ("units", self.units.to_string()),
            ("until", unix_nanos(self.until).to_string()),
        ]
    }
}

/// Unix time in nanoseconds (19 digits today, which the server reads as nanoseconds).
pub fn unix_nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// `<application>{hostname=<h>,version=<v>}`: keys sorted, no suffix, each part sanitised (the server's
/// label-set parser has no escaping, so `,` `{` `}` `=` and whitespace become `_`; an empty value becomes
/// `unknown`).
pub fn series_name(application: &str, hostname: &str, version: &str) -> String {
    format!(
        "{}{{hostname={},version={}}}",
        sanitize_label_value(application),
        sanitize_label_value(hostname),
        sanitize_label_value(version)
    )
}

/// See [`series_name`].
pub fn sanitize_label_value(v: &str) -> String {
    let out: String = v
        .trim()
        .chars()
        .map(|c| match c {
            ',' | '{' | '}' | '=' => '_',
            c if c.is_whitespace() || c.is_control() => '_',
            c => c,
        })
        .collect();
    if out.is_empty() {
        "unknown".to_string()
    } else {
        out
    }
}

/// Go's `path.Join(prefix, elem)` for a URL path, always rooted: duplicate slashes collapse, `.` and `..`
/// resolve, no trailing slash.
pub fn join_path(prefix: &str, elem: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in prefix.split('/').chain(elem.split('/')) {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The address's own query pairs (raw, minus any key we set) plus ours, sorted by key like Go's encoder.
fn merge_query(existing: &str, ours: &[(&'static str, String)]) -> String {
    let mut pairs: Vec<(String, String)> = existing
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let key = p.split('=').next().unwrap_or("");
            if ours.iter().any(|(k, _)| *k == key) || key == "format" {
                None
            } else {
                // Already encoded in the address: kept byte for byte.
                Some((key.to_string(), p.to_string()))
            }
        })
        .collect();
    for (k, v) in ours {
        pairs.push((k.to_string(), format!("{k}={}", query_escape(v))));
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs
        .into_iter()
        .map(|(_, p)| p)
        .collect::<Vec<_>>()
        .join("&")
}

/// Go's `url.QueryEscape`: unreserved bytes kept, space as `+`, everything else `%XX`.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn params() -> IngestParams {
        IngestParams {
            name: series_name("nl6", "lab-vm", "0.1.0"),
            from: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            until: UNIX_EPOCH + Duration::from_secs(1_700_000_015),
            sample_rate: 100,
            units: "samples",
            aggregation: "sum",
            spy_name: "nl6".to_string(),
        }
    }

    fn path_of(address: &str) -> String {
        let url = ServerAddress::parse(address).unwrap().ingest_url(&params());
        let after_scheme = url.split_once("://").unwrap().1;
        let path = &after_scheme[after_scheme.find('/').unwrap()..];
        path.split('?').next().unwrap().to_string()
    }

    #[test]
    fn join_keeps_prefix_and_never_doubles_slashes() {
        for (address, want) in [
            ("http://h:4040", "/ingest"),
            ("http://h:4040/", "/ingest"),
            ("http://h:4040/pyroscope", "/pyroscope/ingest"),
            ("http://h:4040/pyroscope/", "/pyroscope/ingest"),
            ("http://h:4040//a//b//", "/a/b/ingest"),
            ("http://h:4040/a/./b/../c", "/a/c/ingest"),
            ("https://h/p?x=1", "/p/ingest"),
        ] {
            assert_eq!(path_of(address), want, "{address}");
        }
    }

    #[test]
    fn query_has_every_parameter_in_nanoseconds_and_no_format() {
        let url = ServerAddress::parse("http://127.0.0.1:4040/x?format=folded&tenant=a%20b")
            .unwrap()
            .ingest_url(&params());
        let query = url.split_once('?').unwrap().1;
        assert_eq!(
            query,
            "aggregationType=sum&from=1700000000000000000&name=nl6%7Bhostname%3Dlab-vm%2Cversion%3D0.1.0%7D\
             &sampleRate=100&spyName=nl6&tenant=a%20b&units=samples&until=1700000015000000000"
        );
        assert!(!query.contains("format"));
    }

    #[test]
    fn userinfo_is_dropped_and_display_has_no_credentials() {
        let a = ServerAddress::parse("https://alice:s3cret@example.test:8443/base").unwrap();
        assert_eq!(a.authority, "example.test:8443");
        assert_eq!(a.host(), "example.test");
        assert_eq!(a.display(), "https://example.test:8443/base");
        assert!(!a.ingest_url(&params()).contains("s3cret"));
        assert_eq!(
            ServerAddress::parse("http://[::1]:4040").unwrap().host(),
            "::1"
        );
    }

    #[test]
    fn bad_addresses_are_named() {
        assert_eq!(
            ServerAddress::parse("ftp://h").unwrap_err(),
            AddressError::Scheme("ftp".into())
        );
        assert_eq!(
            ServerAddress::parse("h:4040").unwrap_err(),
            AddressError::Scheme(String::new())
        );
        assert_eq!(
            ServerAddress::parse("http:///x").unwrap_err(),
            AddressError::NoHost
        );
    }

    #[test]
    fn name_sorts_keys_and_sanitises_values() {
        assert_eq!(
            series_name("nl6", "vm1", "0.1.0"),
            "nl6{hostname=vm1,version=0.1.0}"
        );
        assert_eq!(
            series_name("nl6", "a,b{c}=d e", "1.0=x"),
            "nl6{hostname=a_b_c__d_e,version=1.0_x}"
        );
        assert_eq!(
            series_name("nl6", "  ", ""),
            "nl6{hostname=unknown,version=unknown}"
        );
        assert_eq!(
            series_name("my svc{x}", "h", "1"),
            "my_svc_x_{hostname=h,version=1}"
        );
    }

    #[test]
    fn query_escape_matches_go() {
        assert_eq!(query_escape("a b/c~d_e.f-g"), "a+b%2Fc~d_e.f-g");
        assert_eq!(query_escape("é"), "%C3%A9");
    }
}
