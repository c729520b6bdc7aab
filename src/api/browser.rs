//! What a web browser may do to nl6: the checks every request passes before any route sees it
//! ([`BrowserPolicy::refuse`]), against cross-site requests (CSRF), DNS rebinding and the like.
//!
//! The rules, in order (the first that fails answers; see SECURITY.md, "Browsers"):
//! 1. **Host** (421): when the request has a `Host` header, its name must be one nl6 answers as: an IP
//!    literal (the listen address itself when it is a specific one; any, when nl6 listens on every
//!    interface), `localhost` when nl6 listens on loopback or every interface, or a name given with
//!    `-allowed-hosts` (`NAME` for any port, `NAME:PORT` for that port only). The port of a built-in name
//!    is not compared: an `ssh -L` tunnel or a port forward changes it, and DNS rebinding needs a name
//!    the attacker controls, which these are not. A request without `Host` (HTTP/1.0) is no browser's.
//! 2. **Origin** (403): when the request has an `Origin` header, it must be nl6's own — `http://` or
//!    `https://` followed by the request's `Host` — or one given with `-allowed-origins`. `Origin: null`
//!    (a sandboxed frame, a `file:` page) is never nl6's own.
//!    **Sec-Fetch-Site** (403): a request the browser marks `cross-site` or `same-site` (another port
//!    of the same host is the same site) is refused unless its `Origin` was given with
//!    `-allowed-origins`: a no-cors GET (`<img src>`) carries no `Origin` but still advances a delta
//!    profile's baseline, holds the CPU sampler or queues a dump.
//! 3. **Content-Type** (415): a request that can change state (any method but GET, HEAD and OPTIONS)
//!    under `/api/` must say `Content-Type: application/json` (parameters allowed). A cross-site form or
//!    a "simple" fetch cannot send that type without a CORS preflight, which nl6 never grants.
//!
//! Tools (curl, `go tool pprof`, Alloy, `nl6 collect`) send no `Origin` and the address they connected
//! to as `Host`, so rules 1 and 2 never touch them. Values only: never touches a socket.
#![forbid(unsafe_code)]

use crate::http::{Request, Response};
use std::net::{IpAddr, SocketAddr};

/// The flag that lets a host name in.
pub const HOSTS_FLAG: &str = "-allowed-hosts";
/// The flag that lets an origin in.
pub const ORIGINS_FLAG: &str = "-allowed-origins";

/// A host nl6 answers as beyond the built-in ones: a lower-case name and, when given, the one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    name: String,
    port: Option<u16>,
}

/// The checks of the module notes, for one listening address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserPolicy {
    listen: SocketAddr,
    hosts: Vec<AllowedHost>,
    origins: Vec<String>,
}

/// An `-allowed-hosts` entry that is no host name (as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError(pub String);

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a host name such as nl6.lab.example or proxy.example:8443 \
             (no scheme, no path)",
            self.0
        )
    }
}

impl std::error::Error for HostError {}

/// An `-allowed-origins` entry that is no origin (lower-cased, without a trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginError(pub String);

impl std::fmt::Display for OriginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not an origin such as https://nl6.lab.example or http://10.0.0.5:8080 \
             (scheme and host, no path)",
            self.0
        )
    }
}

impl std::error::Error for OriginError {}

/// Parses `-allowed-hosts`: comma-separated `NAME` or `NAME:PORT` (no scheme, no path).
pub fn parse_hosts(list: &str) -> Result<Vec<AllowedHost>, HostError> {
    list.split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            let bad = || HostError(h.to_string());
            if h.contains('/') || h.contains('@') || h.contains(' ') {
                return Err(bad());
            }
            let (name, port) = split_host(h).ok_or_else(bad)?;
            if name.is_empty() {
                return Err(bad());
            }
            Ok(AllowedHost { name, port })
        })
        .collect()
}

/// Parses `-allowed-origins`: comma-separated `http://NAME[:PORT]` or `https://…` (no path).
pub fn parse_origins(list: &str) -> Result<Vec<String>, OriginError> {
    list.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| {
            let o = o.trim_end_matches('/').to_ascii_lowercase();
            let rest = o
                .strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"));
            match rest {
                Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@']) => Ok(o),
                _ => Err(OriginError(o)),
            }
        })
        .collect()
}

/// `name[:port]` or `[v6][:port]` → the lower-case name without a trailing dot (brackets kept off for
/// IPv6) and the port; `None` when the port is not a number.
fn split_host(h: &str) -> Option<(String, Option<u16>)> {
    let (name, port) = if let Some(rest) = h.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        match after {
            "" => (inner, None),
            p => (inner, Some(p.strip_prefix(':')?)),
        }
    } else {
        match h.rsplit_once(':') {
            // Two colons and no brackets: an IPv6 literal without a port.
            Some((n, _)) if n.contains(':') => (h, None),
            Some((n, p)) => (n, Some(p)),
            None => (h, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name.trim_end_matches('.').to_ascii_lowercase(), port))
}

impl BrowserPolicy {
    /// The policy for a server bound to `listen`, with the flags' extra hosts and origins.
    pub fn new(listen: SocketAddr, hosts: Vec<AllowedHost>, origins: Vec<String>) -> BrowserPolicy {
        BrowserPolicy {
            listen,
            hosts,
            origins,
        }
    }

    /// The refusal for `req`, or `None` when it may go on to the routes.
    pub fn refuse(&self, req: &Request) -> Option<Response> {
        let host = req.header("host");
        if let Some(h) = host.filter(|h| !self.host_allowed(h)) {
            return Some(crate::api::error_for(
                &req.path,
                421,
                &format!(
                    "Host {h:?} is not a name nl6 answers as (its address, or localhost for a \
                     loopback or every-interface listen): a browser sent here by another site's DNS \
                     name must not read it. To serve this name (a DNS name, a reverse proxy), start \
                     nl6 with {HOSTS_FLAG} {}",
                    split_host(h).map_or_else(|| h.to_string(), |(n, _)| n)
                ),
            ));
        }
        if let Some(origin) = req.header("origin") {
            if !self.origin_allowed(origin, host) {
                return Some(crate::api::error_for(
                    &req.path,
                    403,
                    &format!(
                        "cross-origin request refused: Origin {origin:?} is not nl6's own ({}): a page on \
                         another site may neither drive nor read nl6. To allow that origin, start nl6 \
                         with {ORIGINS_FLAG} {origin}",
                        host.map_or_else(|| "no Host was sent".to_string(), |h| format!("http://{h}"))
                    ),
                ));
            }
        }
        if let Some(site) = req.header("sec-fetch-site").map(str::trim) {
            let allowed = req.header("origin").is_some_and(|o| {
                self.origins
                    .contains(&o.trim_end_matches('/').to_ascii_lowercase())
            });
            if (site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site"))
                && !allowed
            {
                return Some(crate::api::error_for(
                    &req.path,
                    403,
                    &format!(
                        "cross-site request refused: the browser says it comes from another site \
                         (Sec-Fetch-Site: {site}), even without an Origin (an <img>, a link, a no-cors \
                         fetch): a page on another site may not drive nl6. To allow a page, start nl6 \
                         with {ORIGINS_FLAG} and its origin"
                    ),
                ));
            }
        }
        if changes_state(req) && !is_json(req.header("content-type")) {
            return Some(crate::api::error_for(
                &req.path,
                415,
                &format!(
                    "{} {} needs Content-Type: application/json (got {}); with curl: -H 'Content-Type: \
                     application/json'",
                    req.method,
                    req.path,
                    req.header("content-type")
                        .map_or_else(|| "none".to_string(), |c| format!("{c:?}"))
                ),
            ));
        }
        None
    }

    fn host_allowed(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if let Ok(ip) = name.parse::<IpAddr>() {
            let bound = self.listen.ip();
            if bound.is_unspecified() || ip == bound || (bound.is_loopback() && ip.is_loopback()) {
                return true;
            }
        } else if name == "localhost"
            && (self.listen.ip().is_loopback() || self.listen.ip().is_unspecified())
        {
            return true;
        }
        self.hosts
            .iter()
            .any(|a| a.name == name && a.port.is_none_or(|p| Some(p) == port))
    }

    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let Some(host) = host else { return false };
        let own = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        own.is_some_and(|o| o.eq_ignore_ascii_case(host.trim()))
    }
}

/// A request that can change state under `/api/` (any method but GET, HEAD and OPTIONS).
fn changes_state(req: &Request) -> bool {
    req.path.starts_with("/api/") && !matches!(req.method.as_str(), "GET" | "HEAD" | "OPTIONS")
}

/// `application/json`, with or without parameters, any case.
fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("application/json")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, path: &str, headers: &[(&str, &str)]) -> Request {
        let mut r = Request::new(method, path);
        r.headers = headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
            .collect();
        r
    }

    fn status(p: &BrowserPolicy, r: &Request) -> u16 {
        p.refuse(r).map_or(0, |resp| resp.status)
    }

    #[test]
    fn host_rules_by_listen_address() {
        let lo = BrowserPolicy::new("127.0.0.1:8080".parse().unwrap(), vec![], vec![]);
        let any = BrowserPolicy::new("0.0.0.0:8080".parse().unwrap(), vec![], vec![]);
        let one = BrowserPolicy::new("10.0.0.5:8080".parse().unwrap(), vec![], vec![]);
        let rows: &[(&str, u16, u16, u16)] = &[
            // Host, then the answer on loopback, every interface, one address (0: served).
            ("127.0.0.1:8080", 0, 0, 421),
            ("127.0.0.2", 0, 0, 421),
            ("[::1]:8080", 0, 0, 421),
            ("localhost:9999", 0, 0, 421),
            ("LOCALHOST.", 0, 0, 421),
            ("10.0.0.5:8080", 421, 0, 0),
            ("192.168.1.9:8080", 421, 0, 421),
            ("rebind.evil.example:8080", 421, 421, 421),
            ("localhost.evil.example", 421, 421, 421),
            ("127.0.0.1.nip.io", 421, 421, 421),
            ("localhost:x", 421, 421, 421),
        ];
        for (host, a, b, c) in rows {
            let r = req("GET", "/debug/pprof/heap", &[("Host", host)]);
            assert_eq!(
                (status(&lo, &r), status(&any, &r), status(&one, &r)),
                (*a, *b, *c),
                "{host}"
            );
        }
        assert_eq!(status(&lo, &req("GET", "/", &[])), 0, "no Host: HTTP/1.0");
    }

    #[test]
    fn allowed_hosts_match_by_name_and_port_when_given() {
        let hosts = parse_hosts("nl6.lab.example, proxy.example:8443").unwrap();
        let p = BrowserPolicy::new("127.0.0.1:8080".parse().unwrap(), hosts, vec![]);
        for (host, want) in [
            ("nl6.lab.example", 0),
            ("NL6.Lab.Example.:1", 0),
            ("proxy.example:8443", 0),
            ("proxy.example", 421),
            ("proxy.example:8444", 421),
            ("sub.nl6.lab.example", 421),
            ("127.0.0.1:8080", 0),
            ("10.0.0.5:8080", 421),
        ] {
            assert_eq!(
                status(&p, &req("GET", "/", &[("Host", host)])),
                want,
                "{host}"
            );
        }
        // An address the listen address does not cover (a port forward, NAT) can be let in by name.
        let fwd = parse_hosts("10.0.0.5").unwrap();
        let p = BrowserPolicy::new("127.0.0.1:8080".parse().unwrap(), fwd, vec![]);
        let r = req("GET", "/", &[("Host", "10.0.0.5:8080")]);
        assert_eq!(status(&p, &r), 0, "an -allowed-hosts IP literal");
        for bad in ["http://x", "a/b", "x:port", "u@h"] {
            assert!(parse_hosts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn origins_and_content_types() {
        let origins = parse_origins("https://nl6.lab.example/").unwrap();
        let p = BrowserPolicy::new("127.0.0.1:8080".parse().unwrap(), vec![], origins);
        let h = ("Host", "127.0.0.1:8080");
        let json = ("Content-Type", "application/json");
        for (origin, want) in [
            ("http://127.0.0.1:8080", 0),
            ("https://127.0.0.1:8080", 0),
            ("http://127.0.0.1:8081", 403),
            ("http://evil.example", 403),
            ("null", 403),
            ("https://nl6.lab.example", 0),
            ("HTTPS://NL6.LAB.EXAMPLE", 0),
        ] {
            let r = req("POST", "/api/v1/profiling", &[h, json, ("Origin", origin)]);
            assert_eq!(status(&p, &r), want, "{origin}");
        }
        for (ct, want) in [
            (Some("application/json"), 0),
            (Some("Application/JSON; charset=utf-8"), 0),
            (Some("text/plain"), 415),
            (Some("application/x-www-form-urlencoded"), 415),
            (Some("multipart/form-data; boundary=x"), 415),
            (Some("application/jsonx"), 415),
            (None, 415),
        ] {
            let mut headers = vec![h];
            if let Some(ct) = ct {
                headers.push(("Content-Type", ct));
            }
            for m in ["POST", "PUT", "DELETE", "PATCH"] {
                assert_eq!(
                    status(&p, &req(m, "/api/v1/scenarios/1", &headers)),
                    want,
                    "{m} {ct:?}"
                );
            }
        }
        // What the browser says of a request's site, Origin or not (an <img> GET sends none).
        for (site, origin, want) in [
            ("same-origin", None, 0),
            ("none", None, 0),
            ("cross-site", None, 403),
            ("same-site", None, 403),
            ("Cross-Site", None, 403),
            ("cross-site", Some("https://nl6.lab.example"), 0),
        ] {
            let mut headers = vec![h, ("Sec-Fetch-Site", site)];
            headers.extend(origin.map(|o| ("Origin", o)));
            let r = req("GET", "/debug/pprof/delta_heap", &headers);
            assert_eq!(status(&p, &r), want, "{site} {origin:?}");
        }
        // Reads and the pull surface's symbol POST (go tool pprof sends octet-stream) need no JSON.
        assert_eq!(status(&p, &req("GET", "/api/v1/profiling", &[h])), 0);
        let symbol = req(
            "POST",
            "/debug/pprof/symbol",
            &[h, ("Content-Type", "application/octet-stream")],
        );
        assert_eq!(status(&p, &symbol), 0);
        for bad in ["evil.example", "ftp://x", "http://x/path", "http://"] {
            assert!(parse_origins(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_name_what_was_wrong_and_the_flag() {
        let p = BrowserPolicy::new("127.0.0.1:8080".parse().unwrap(), vec![], vec![]);
        let r = p
            .refuse(&req(
                "GET",
                "/debug/pprof/heap",
                &[("Host", "evil.example:80")],
            ))
            .unwrap();
        assert_eq!(
            r.get_header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert!(r.text().contains("\"evil.example:80\""), "{}", r.text());
        assert!(
            r.text().contains("-allowed-hosts evil.example\n"),
            "{}",
            r.text()
        );
        let r = p
            .refuse(&req(
                "GET",
                "/api/v1/profiling",
                &[
                    ("Host", "127.0.0.1:8080"),
                    ("Origin", "http://evil.example"),
                ],
            ))
            .unwrap();
        assert_eq!(r.get_header("content-type"), Some("application/json"));
        let msg = serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["error"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            msg.ends_with("-allowed-origins http://evil.example"),
            "{msg}"
        );
    }
}
