//! Where the fleet sends: `host:port` text resolved to one socket address, and a syslog target's
//! `udp://` or `tcp://` form. Shared by [`super::config`] (which parses the flags) and [`super::syslog`]
//! (which sends over the [`Transport`]); it depends on neither.
//!
//! Resolving may ask the system resolver for a host name; nothing here binds or connects.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// Transport of a syslog target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

impl Transport {
    /// The URL scheme that names this transport in `-syslog-target`.
    pub fn scheme(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// Why a target's text names no address. `Display` quotes the text and says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// No `:port`.
    NotHostPort(String),
    /// The resolver failed for the name (its message).
    Unresolvable { text: String, reason: String },
    /// The name resolved to nothing.
    NoAddress(String),
    /// A syslog target without `udp://` or `tcp://`.
    SyslogScheme(String),
    /// A syslog target whose `host:port` part names no address.
    SyslogAddress {
        text: String,
        cause: Box<TargetError>,
    },
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::NotHostPort(t) => write!(f, "{t:?} is not host:port"),
            TargetError::Unresolvable { text, reason } => {
                write!(f, "cannot resolve {text:?}: {reason}")
            }
            TargetError::NoAddress(t) => write!(f, "{t:?} resolves to no address"),
            TargetError::SyslogScheme(t) => write!(
                f,
                "invalid syslog target {t:?}: want udp://host:port or tcp://host:port"
            ),
            TargetError::SyslogAddress { text, cause } => {
                write!(f, "invalid syslog target {text:?}: {cause}")
            }
        }
    }
}

impl std::error::Error for TargetError {}

impl From<TargetError> for String {
    fn from(e: TargetError) -> String {
        e.to_string()
    }
}

/// Resolves `host:port` to its first address.
pub fn resolve(text: &str) -> Result<SocketAddr, TargetError> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !text.contains(':') {
        return Err(TargetError::NotHostPort(text.to_string()));
    }
    text.to_socket_addrs()
        .map_err(|e| TargetError::Unresolvable {
            text: text.to_string(),
            reason: e.to_string(),
        })?
        .next()
        .ok_or_else(|| TargetError::NoAddress(text.to_string()))
}

/// `udp://host:port` or `tcp://host:port`.
pub fn parse_syslog_target(text: &str) -> Result<(Transport, SocketAddr), TargetError> {
    let (transport, rest) = if let Some(r) = text.strip_prefix("udp://") {
        (Transport::Udp, r)
    } else if let Some(r) = text.strip_prefix("tcp://") {
        (Transport::Tcp, r)
    } else {
        return Err(TargetError::SyslogScheme(text.to_string()));
    };
    let addr = resolve(rest).map_err(|cause| TargetError::SyslogAddress {
        text: text.to_string(),
        cause: Box::new(cause),
    })?;
    Ok((transport, addr))
}

/// The address to reach a socket bound to `a` locally (a wildcard bind is reached via loopback).
pub(crate) fn reachable(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(v) if v.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port())
        }
        IpAddr::V6(v) if v.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), a.port())
        }
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_clear_errors() {
        assert_eq!(
            parse_syslog_target("udp://127.0.0.1:514").unwrap(),
            (Transport::Udp, "127.0.0.1:514".parse().unwrap())
        );
        assert_eq!(
            parse_syslog_target("tcp://127.0.0.1:6514").unwrap().0,
            Transport::Tcp
        );
        let e = parse_syslog_target("127.0.0.1:514").unwrap_err();
        assert_eq!(e, TargetError::SyslogScheme("127.0.0.1:514".into()));
        assert!(e.to_string().contains("udp://host:port"), "{e}");
        assert!(parse_syslog_target("tcp://nohost").is_err());
    }
}
