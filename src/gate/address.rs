//! Push addresses: the rules an address must meet (the same at startup and over REST) and the
//! normalised form credentials are bound to.
//!
//! Plain string functions; never resolves or connects. Error messages never repeat an address that
//! embeds credentials.
#![forbid(unsafe_code)]

/// Checks a push address: an `http://` or `https://` URL with a host, no `user:pass@`, no query or
/// fragment (the push appends `/ingest`). Returns a message naming the rule broken.
pub fn validate(address: &str) -> Result<(), String> {
    let (scheme, rest) = match address.split_once("://") {
        Some(parts) => parts,
        None => {
            return Err(format!(
                "server address {address:?} is not an http:// or https:// URL"
            ))
        }
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "server address {address:?} must use http:// or https://"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err("server address must not embed credentials (user:pass@host): they would be echoed by GET and the \
                    logs; use -profiling-pyroscope-basic-auth-file"
            .to_string());
    }
    if address.contains('?') || address.contains('#') {
        return Err(format!(
            "server address {address:?} must not have a query or a fragment"
        ));
    }
    if address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("server address {address:?} contains whitespace"));
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, port)) if !h.is_empty() => {
                check_port(address, port.strip_prefix(':'), !port.is_empty())?;
                h
            }
            _ => {
                return Err(format!(
                    "server address {address:?} has a malformed IPv6 host"
                ))
            }
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, port)) => {
                check_port(address, Some(port), true)?;
                h
            }
            None => authority,
        }
    };
    if host.is_empty() {
        return Err(format!("server address {address:?} has no host"));
    }
    Ok(())
}

fn check_port(address: &str, port: Option<&str>, present: bool) -> Result<(), String> {
    if !present {
        return Ok(());
    }
    match port {
        Some(p) if !p.is_empty() && p.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("server address {address:?} has an invalid port")),
    }
}

/// The form two addresses are compared in: scheme and host lower-cased, trailing slashes dropped.
/// The path keeps its case (servers may distinguish it).
pub fn normalise(address: &str) -> String {
    let (scheme, rest) = address.split_once("://").unwrap_or(("", address));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    format!(
        "{}://{}{}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase(),
        path.trim_end_matches('/')
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
            let e = validate(a).expect_err(a);
            assert!(e.contains(want), "{a}: {e}");
        }
        assert!(!validate("http://user:secret@host")
            .unwrap_err()
            .contains("secret"));
    }

    #[test]
    fn normalises_scheme_host_and_trailing_slash() {
        assert!(same("HTTP://PyroScope:4040/", "http://pyroscope:4040"));
        assert!(same("http://h/p//", "http://h/p"));
        assert!(!same("http://h/P", "http://h/p"));
        assert!(!same("https://h", "http://h"));
        assert!(!same("http://h:4040", "http://h:4041"));
    }

    /// Addresses the push client cannot use used to be accepted (200, `pushing:true`), then every upload
    /// failed. Each is now refused with the reason.
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
            ("http://h/a\\b", "path"),
        ];
        for (a, want) in cases {
            let e = validate(a).expect_err(a);
            assert!(e.contains(want), "{a}: {e}");
        }
        let long = format!("http://{}.example", "a".repeat(60_000));
        let e = validate(&long).unwrap_err();
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
