//! Push addresses: the rules an address must meet (the same at startup and over REST) and the
//! normalised form credentials are bound to.
//!
//! Plain string functions; never resolves or connects. Error messages never repeat an address that
//! embeds credentials.
#![forbid(unsafe_code)]

/// Longest push address accepted (it is echoed by GET and in log lines).
pub const MAX_ADDRESS_LEN: usize = 2048;

/// The rule a push address broke. `Display` names the address (never one that embeds credentials) and
/// the remedy; the REST API answers it in a 400, the command line refuses to start with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressError {
    /// Longer than [`MAX_ADDRESS_LEN`] bytes (the length).
    TooLong(usize),
    /// No `scheme://`.
    NotAUrl(String),
    /// A scheme other than http or https.
    Scheme(String),
    /// `user:pass@` in the address (which is echoed by GET and the logs).
    Credentials,
    /// A `?query` or `#fragment` (the push appends `/ingest?…`).
    QueryOrFragment(String),
    Whitespace(String),
    /// Non-ASCII: an internationalised host must be given in its `xn--` form.
    NonAscii(String),
    MalformedIpv6(String),
    InvalidPort(String),
    PortZero(String),
    NoHost(String),
    /// A host that is neither an IP literal nor a DNS name.
    Host {
        address: String,
        host: String,
    },
    /// Not a `Uri` the push client (ureq, through the `http` crate) can send to.
    NotSendable {
        address: String,
        reason: String,
    },
}

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddressError::TooLong(len) => write!(
                f,
                "server address is {len} bytes; the limit is {MAX_ADDRESS_LEN}"
            ),
            AddressError::NotAUrl(a) => {
                write!(f, "server address {a:?} is not an http:// or https:// URL")
            }
            AddressError::Scheme(a) => write!(f, "server address {a:?} must use http:// or https://"),
            AddressError::Credentials => f.write_str(
                "server address must not embed credentials (user:pass@host): they would be echoed by \
                 GET and the logs; use -profiling-pyroscope-basic-auth-file",
            ),
            AddressError::QueryOrFragment(a) => {
                write!(f, "server address {a:?} must not have a query or a fragment")
            }
            AddressError::Whitespace(a) => write!(f, "server address {a:?} contains whitespace"),
            AddressError::NonAscii(a) => write!(
                f,
                "server address {a:?} has non-ASCII characters: give an internationalised host in its \
                 xn-- (punycode) form and percent-encode the path"
            ),
            AddressError::MalformedIpv6(a) => {
                write!(f, "server address {a:?} has a malformed IPv6 host")
            }
            AddressError::InvalidPort(a) => write!(f, "server address {a:?} has an invalid port"),
            AddressError::PortZero(a) => {
                write!(f, "server address {a:?}: port 0 cannot be connected to")
            }
            AddressError::NoHost(a) => write!(f, "server address {a:?} has no host"),
            AddressError::Host { address, host } => write!(
                f,
                "server address {address:?}: host {host:?} is neither an IP address nor a DNS name \
                 (letters, digits, '-', '.', '_')"
            ),
            AddressError::NotSendable { address, reason } => write!(
                f,
                "server address {address:?} is not a URL the push client can send to: {reason} (its \
                 path must be percent-encoded)"
            ),
        }
    }
}

impl std::error::Error for AddressError {}

/// Checks a push address: an `http://` or `https://` URL with a host, no `user:pass@`, no query or
/// fragment (the push appends `/ingest`), at most [`MAX_ADDRESS_LEN`] bytes, and nothing the push
/// client could not use: the host is an IP literal or an ASCII name of letters, digits, `-`, `.` and
/// `_` (an internationalised name must be given in its `xn--` form), the port is 1-65535 in digits,
/// and the whole URL parses as the `Uri` the client (ureq, through the `http` crate) sends. The error
/// is the rule broken.
pub fn validate(address: &str) -> Result<(), AddressError> {
    if address.len() > MAX_ADDRESS_LEN {
        return Err(AddressError::TooLong(address.len()));
    }
    let a = || address.to_string();
    let Some(parts) = nl6_text::urlsplit::split(address) else {
        return Err(AddressError::NotAUrl(a()));
    };
    let scheme = parts.scheme;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(AddressError::Scheme(a()));
    }
    if parts.userinfo.is_some() {
        return Err(AddressError::Credentials);
    }
    if parts.query.is_some() || parts.fragment.is_some() {
        return Err(AddressError::QueryOrFragment(a()));
    }
    if address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AddressError::Whitespace(a()));
    }
    if !address.is_ascii() {
        return Err(AddressError::NonAscii(a()));
    }
    let malformed_v6 = || AddressError::MalformedIpv6(a());
    let host = match parts.host_port() {
        Ok((h, _)) if parts.bracketed() && h.parse::<std::net::Ipv6Addr>().is_err() => {
            return Err(malformed_v6())
        }
        Ok((h, port)) => {
            check_port(port).map_err(|rule| rule(a()))?;
            h
        }
        Err(nl6_text::urlsplit::HostPortError::UnclosedBracket) => return Err(malformed_v6()),
        Err(nl6_text::urlsplit::HostPortError::JunkAfterBracket) => {
            return Err(AddressError::InvalidPort(a()))
        }
    };
    if host.is_empty() {
        return Err(AddressError::NoHost(a()));
    }
    if !parts.bracketed()
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(AddressError::Host {
            address: a(),
            host: host.to_string(),
        });
    }
    // The client sends `<address>/ingest?…` through ureq, which parses it as an `http::Uri`.
    let ingest = format!("{}/ingest", address.trim_end_matches('/'));
    if let Err(e) = ingest.parse::<ureq::http::Uri>() {
        return Err(AddressError::NotSendable {
            address: a(),
            reason: e.to_string(),
        });
    }
    Ok(())
}

/// The port text after `:` when there is one: 1-65535 in digits. The error is the rule broken, to be
/// given the address.
fn check_port(port: Option<&str>) -> Result<(), fn(String) -> AddressError> {
    match port {
        None => Ok(()),
        Some("0") => Err(AddressError::PortZero),
        Some(p)
            if !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok() =>
        {
            Ok(())
        }
        _ => Err(AddressError::InvalidPort),
    }
}

/// The form two addresses are compared in: scheme and host lower-cased, trailing slashes dropped.
/// The path keeps its case (servers may distinguish it).
pub fn normalise(address: &str) -> String {
    let Some(p) = nl6_text::urlsplit::split(address) else {
        return address.trim_end_matches('/').to_ascii_lowercase();
    };
    let userinfo = p.userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    let mut tail = p.path.to_string();
    if let Some(q) = p.query {
        tail = format!("{tail}?{q}");
    }
    if let Some(f) = p.fragment {
        tail = format!("{tail}#{f}");
    }
    format!(
        "{}://{}{}",
        p.scheme.to_ascii_lowercase(),
        format!("{userinfo}{}", p.authority).to_ascii_lowercase(),
        tail.trim_end_matches('/')
    )
}

/// True when two addresses name the same push target after [`normalise`].
pub fn same(a: &str, b: &str) -> bool {
    normalise(a) == normalise(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_urls() {
        for a in [
            "http://pyroscope:4040",
            "https://profiles.example.com",
            "http://127.0.0.1:4040/",
            "http://[::1]:4040/prefix",
            "HTTP://Host:1",
        ] {
            assert_eq!(validate(a), Ok(()), "{a}");
        }
    }

    #[test]
    fn refuses_each_rule_with_a_named_reason() {
        let cases = [
            ("pyroscope:4040", "not an http"),
            ("ftp://host", "http:// or https://"),
            ("http://user:pass@host", "credentials"),
            ("http://host?x=1", "query"),
            ("http://host/#frag", "query or a fragment"),
            ("http://", "no host"),
            ("http://:4040", "no host"),
            ("http://host:99999", "invalid port"),
            ("http://host:", "invalid port"),
            ("http://ho st", "whitespace"),
            ("http://[::1", "IPv6"),
        ];
        for (a, want) in cases {
            let e = validate(a).expect_err(a).to_string();
            assert!(e.contains(want), "{a}: {e}");
        }
        assert_eq!(
            validate("http://user:secret@host"),
            Err(AddressError::Credentials),
            "the credentials are never repeated"
        );
    }

    #[test]
    fn normalises_scheme_host_and_trailing_slash() {
        assert!(same("HTTP://PyroScope:4040/", "http://pyroscope:4040"));
        assert!(same("http://h/p//", "http://h/p"));
        assert!(!same("http://h/P", "http://h/p"));
        assert!(!same("https://h", "http://h"));
        assert!(!same("http://h:4040", "http://h:4041"));
    }

    /// Addresses the push client cannot use are refused with the reason, rather than accepted
    /// (`pushing:true`) and then failing every upload.
    #[test]
    fn refuses_what_the_push_client_cannot_use() {
        let cases = [
            ("http://bücher.example", "non-ASCII"),
            ("http://a%40b", "host"),
            ("http://a:1:2", "host"),
            ("http://h:0", "port 0"),
            ("http://h:+80", "invalid port"),
            ("http://;:1", "host"),
            ("http://[fe80::1%25eth0]:1", "IPv6"),
            ("http://[zz]:1", "IPv6"),
            ("http://h/p q", "whitespace"),
        ];
        for (a, want) in cases {
            let e = validate(a).expect_err(a).to_string();
            assert!(e.contains(want), "{a}: {e}");
        }
        let long = format!("http://{}.example", "a".repeat(60_000));
        let e = validate(&long).unwrap_err().to_string();
        assert!(e.contains("2048") && e.len() < 300, "{e}");
        for a in [
            "http://xn--bcher-kva.example:4040",
            "http://my_service:4040/p-1/x.y",
            "https://[2001:db8::1]",
            "http://10.0.0.1",
        ] {
            assert_eq!(validate(a), Ok(()), "{a}");
        }
    }
}
