//! The targets file: one target a line, `program_name http://host:port`, `#` starts a comment, blank
//! lines are skipped. Each target yields the pieces the archive path needs (program, fqdn, port) and
//! the base URL the profiles are fetched from.
//!
//! Parses text into values; never reads files or resolves names (the host is kept as written).
#![forbid(unsafe_code)]

use std::fmt;

/// One service to profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The first archive path component (`<program_name>`).
    pub program: String,
    /// The URL as written in the targets file.
    pub url: String,
    /// `http` or `https`.
    pub scheme: String,
    /// The host as written (no brackets for IPv6): the `<fqdn>` path component.
    pub fqdn: String,
    /// The port from the URL, or 80/443 by scheme: the `<port>` path component.
    pub port: u16,
    /// Path prefix before `/debug/pprof/…` (empty, or starting with `/` without a trailing one).
    pub prefix: String,
    /// 1-based line in the targets file.
    pub line: usize,
}

impl Target {
    /// The URL of pprof endpoint `name` (`profile`, `heap`) on this target, plus `query`.
    pub fn endpoint(&self, name: &str, query: &str) -> String {
        let host = if self.fqdn.contains(':') {
            format!("[{}]", self.fqdn)
        } else {
            self.fqdn.clone()
        };
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        format!(
            "{}://{}:{}{}/debug/pprof/{}{}",
            self.scheme, host, self.port, self.prefix, name, q
        )
    }
}

/// A targets-file error, naming the line (0: the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetsError {
    pub line: usize,
    pub fault: TargetFault,
}

/// What was wrong with a targets line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetFault {
    /// Not two fields: how many there were and the line.
    Fields(usize, String),
    /// The program name cannot be an archive path component.
    Program(String, ComponentFault),
    /// The URL has no `http://` or `https://`.
    NoScheme(String),
    /// The URL's scheme is another.
    Scheme(String),
    QueryOrFragment(String),
    Credentials(String),
    /// The URL's `host:port` part.
    HostPort(String, HostPortFault),
    /// The host cannot be an archive path component.
    Host(String, ComponentFault),
    /// The same program, host and port as an earlier line (given).
    Duplicate {
        program: String,
        fqdn: String,
        port: u16,
        first: usize,
    },
    /// The file names no target.
    Empty,
}

/// Why a name cannot be one archive path component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentFault {
    /// Empty, `.`, `..` or hidden.
    Dot,
    /// A separator or a control character.
    Character,
}

/// What was wrong with a URL's `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPortFault {
    Split(nl6_text::urlsplit::HostPortError),
    MissingHost,
    /// The port as written.
    Port(String),
}

impl fmt::Display for ComponentFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ComponentFault::Dot => "must not be empty or start with '.'",
            ComponentFault::Character => "must not contain '/', '\\' or control characters",
        })
    }
}

impl fmt::Display for HostPortFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPortFault::Split(e) => write!(f, "{e}"),
            HostPortFault::MissingHost => f.write_str("missing host"),
            HostPortFault::Port(p) => write!(f, "bad port {p:?} (1-65535)"),
        }
    }
}

impl fmt::Display for TargetsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match &self.fault {
            TargetFault::Fields(n, content) => write!(
                f,
                "expected `program_name http://host:port`, got {n} field(s): {content:?}"
            ),
            TargetFault::Program(p, why) => write!(f, "program name {p:?}: {why}"),
            TargetFault::NoScheme(url) => write!(f, "URL {url:?}: missing http:// or https://"),
            TargetFault::Scheme(url) => write!(f, "URL {url:?}: scheme must be http or https"),
            TargetFault::QueryOrFragment(url) => {
                write!(f, "URL {url:?}: no query or fragment allowed")
            }
            TargetFault::Credentials(url) => {
                write!(f, "URL {url:?}: credentials in the URL are not supported")
            }
            TargetFault::HostPort(url, why) => write!(f, "URL {url:?}: {why}"),
            TargetFault::Host(url, why) => write!(f, "URL {url:?}: host {why}"),
            TargetFault::Duplicate {
                program,
                fqdn,
                port,
                first,
            } => write!(
                f,
                "duplicate target {program} {fqdn}:{port} (already on line {first}): both would write the same archive directory"
            ),
            TargetFault::Empty => {
                f.write_str("no targets (expected lines like `myservice http://host:6060`)")
            }
        }
    }
}

impl std::error::Error for TargetsError {}

/// Parses a whole targets file. Fails on the first bad line; an empty list is an error too (a
/// collector with nothing to collect is a configuration mistake).
pub fn parse_targets(text: &str) -> Result<Vec<Target>, TargetsError> {
    let mut out: Vec<Target> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let t = parse_line(content).map_err(|fault| TargetsError { line, fault })?;
        if let Some(prev) = out
            .iter()
            .find(|p| p.program == t.program && p.fqdn == t.fqdn && p.port == t.port)
        {
            let fault = TargetFault::Duplicate {
                program: t.program,
                fqdn: t.fqdn,
                port: t.port,
                first: prev.line,
            };
            return Err(TargetsError { line, fault });
        }
        out.push(Target { line, ..t });
    }
    if out.is_empty() {
        return Err(TargetsError {
            line: 0,
            fault: TargetFault::Empty,
        });
    }
    Ok(out)
}

fn parse_line(content: &str) -> Result<Target, TargetFault> {
    let fields: Vec<&str> = content.split_whitespace().collect();
    let [program, url] = fields[..] else {
        return Err(TargetFault::Fields(fields.len(), content.to_string()));
    };
    let url_ = || url.to_string();
    check_component(program).map_err(|m| TargetFault::Program(program.to_string(), m))?;
    let parts = nl6_text::urlsplit::split(url).ok_or_else(|| TargetFault::NoScheme(url_()))?;
    let scheme = parts.scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(TargetFault::Scheme(url_())),
    };
    if parts.query.is_some() || parts.fragment.is_some() {
        return Err(TargetFault::QueryOrFragment(url_()));
    }
    if parts.userinfo.is_some() {
        return Err(TargetFault::Credentials(url_()));
    }
    let path = parts.path;
    let (host, port) = split_host_port(&parts).map_err(|m| TargetFault::HostPort(url_(), m))?;
    let port = port.unwrap_or(default_port);
    check_component(&host).map_err(|m| TargetFault::Host(url_(), m))?;
    let prefix = path.trim_end_matches('/').to_string();
    Ok(Target {
        program: program.to_string(),
        url: url.to_string(),
        scheme,
        fqdn: host.to_ascii_lowercase(),
        port,
        prefix,
        line: 0,
    })
}

/// Splits `host[:port]` or `[v6][:port]`.
fn split_host_port(
    parts: &nl6_text::urlsplit::UrlParts<'_>,
) -> Result<(String, Option<u16>), HostPortFault> {
    let (host, port) = parts.host_port().map_err(HostPortFault::Split)?;
    if host.is_empty() {
        return Err(HostPortFault::MissingHost);
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(HostPortFault::Port(p.to_string())),
        },
    };
    Ok((host.to_string(), port))
}

/// A name used as one archive path component must not escape or hide in it.
fn check_component(s: &str) -> Result<(), ComponentFault> {
    if s.is_empty() || s == "." || s == ".." || s.starts_with('.') {
        return Err(ComponentFault::Dot);
    }
    if s.contains(['/', '\\', '\0']) || s.chars().any(char::is_control) {
        return Err(ComponentFault::Character);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets_with_comments_and_defaults() {
        let text = "# fleet\n\ngitaly http://gitaly-01.example.com:9236  # main\npages https://pages.example.com\n\
                    nl6 http://[::1]:6060/\nwh http://127.0.0.1:8080/prefix/\n";
        let t = parse_targets(text).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            (
                t[0].program.as_str(),
                t[0].fqdn.as_str(),
                t[0].port,
                t[0].line
            ),
            ("gitaly", "gitaly-01.example.com", 9236, 3)
        );
        assert_eq!(
            (t[1].fqdn.as_str(), t[1].port, t[1].scheme.as_str()),
            ("pages.example.com", 443, "https")
        );
        assert_eq!((t[2].fqdn.as_str(), t[2].port), ("::1", 6060));
        assert_eq!(
            t[2].endpoint("heap", ""),
            "http://[::1]:6060/debug/pprof/heap"
        );
        assert_eq!(
            t[3].endpoint("profile", "seconds=2"),
            "http://127.0.0.1:8080/prefix/debug/pprof/profile?seconds=2"
        );
        assert_eq!(
            t[0].endpoint("heap", ""),
            "http://gitaly-01.example.com:9236/debug/pprof/heap"
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (
                "a http://h:1\nb\n",
                2,
                "expected `program_name http://host:port`",
            ),
            ("a ftp://h:1\n", 1, "scheme must be http or https"),
            ("# c\na h:1\n", 2, "missing http://"),
            ("a http://h:99999\n", 1, "bad port"),
            ("a http://h:0\n", 1, "bad port"),
            ("../x http://h:1\n", 1, "program name"),
            ("a/b http://h:1\n", 1, "program name"),
            ("a http://u:p@h:1\n", 1, "credentials"),
            ("a http://h:1?x=1\n", 1, "no query"),
            ("a http://:1\n", 1, "missing host"),
            ("a http://h:1\n\na http://h:1/\n", 3, "duplicate target"),
            ("a http://h:1 extra\n", 1, "3 field(s)"),
            ("# nothing\n", 0, "no targets"),
        ];
        for (text, line, msg) in cases {
            let e = parse_targets(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(msg), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
    }
}
