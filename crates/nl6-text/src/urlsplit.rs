//! The one URL splitter: `scheme://[userinfo@]host[:port][/path][?query][#fragment]` into borrowed parts,
//! for the three places nl6 reads a URL it was given (the gate's push address rules, the push client's
//! server address, `nl6 collect`'s targets file). Each caller keeps its own rules (which schemes, whether
//! a query is allowed) and its own error text; the cutting is done here once, so they cannot disagree
//! on where the authority ends or which `@` starts the host.
//!
//! Plain string slicing: no decoding, resolving or connecting.

/// A URL cut at its delimiters. Every part borrows from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    /// As given (callers compare it case-insensitively).
    pub scheme: &'a str,
    /// Before the last `@` of the authority, when there is one.
    pub userinfo: Option<&'a str>,
    /// `host[:port]` (IPv6 in brackets), without the userinfo.
    pub authority: &'a str,
    /// From the first `/` after the authority up to `?` or `#` (may be empty).
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub fragment: Option<&'a str>,
}

/// Why [`UrlParts::host_port`] could not split the authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPortError {
    /// `[` without its `]`.
    UnclosedBracket,
    /// Something other than `:port` after `]`.
    JunkAfterBracket,
}

impl std::fmt::Display for HostPortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostPortError::UnclosedBracket => "unclosed [ in host",
            HostPortError::JunkAfterBracket => "junk after ]",
        })
    }
}

/// Cuts `url` at its delimiters; `None` when it has no `://`. The authority ends at the first `/`, `?`
/// or `#`; the userinfo is everything before the authority's last `@`.
pub fn split(url: &str) -> Option<UrlParts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (full_authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (userinfo, authority) = match full_authority.rsplit_once('@') {
        Some((u, a)) => (Some(u), a),
        None => (None, full_authority),
    };
    Some(UrlParts {
        scheme,
        userinfo,
        authority,
        path,
        query,
        fragment,
    })
}

/// `host[:port]` (IPv6 in brackets) as host without brackets and port text (`None` when absent; not
/// checked).
pub fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), HostPortError> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(HostPortError::UnclosedBracket)?;
        return match after {
            "" => Ok((host, None)),
            p => Ok((
                host,
                Some(p.strip_prefix(':').ok_or(HostPortError::JunkAfterBracket)?),
            )),
        };
    }
    Ok(match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    })
}

impl<'a> UrlParts<'a> {
    /// The authority as host (without brackets) and port text (`None` when absent; not checked).
    pub fn host_port(&self) -> Result<(&'a str, Option<&'a str>), HostPortError> {
        split_host_port(self.authority)
    }

    /// True when the host was written in brackets (an IPv6 literal).
    pub fn bracketed(&self) -> bool {
        self.authority.starts_with('[')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_every_part_once() {
        let p = split("HTTPS://u:p@w@[::1]:4040/a/b?x=1#frag").unwrap();
        assert_eq!(p.scheme, "HTTPS");
        assert_eq!(p.userinfo, Some("u:p@w"));
        assert_eq!(p.authority, "[::1]:4040");
        assert_eq!(
            (p.path, p.query, p.fragment),
            ("/a/b", Some("x=1"), Some("frag"))
        );
        assert_eq!(p.host_port(), Ok(("::1", Some("4040"))));
        assert!(p.bracketed());
        let p = split("http://h?q/@x").unwrap();
        assert_eq!(
            (p.authority, p.userinfo, p.path, p.query),
            ("h", None, "", Some("q/@x"))
        );
        let p = split("http://h:80").unwrap();
        assert_eq!(p.host_port(), Ok(("h", Some("80"))));
        assert_eq!(
            split("http://[::1").unwrap().host_port(),
            Err(HostPortError::UnclosedBracket)
        );
        assert_eq!(
            split("http://[::1]x").unwrap().host_port(),
            Err(HostPortError::JunkAfterBracket)
        );
        assert_eq!(split("h:80"), None);
    }
}
