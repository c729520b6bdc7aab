//! Where the fleet sends: `host:port` text resolved to one socket address, and a syslog target's
//! `udp://` or `tcp://` form. Shared by [`super::config`] (which parses the flags) and [`super::syslog`]
//! (which sends over the [`Transport`]); it depends on neither.
//!
//! Resolving may ask the system resolver for a host name; nothing here binds or connects.
#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};

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

/// Resolves `host:port` to its first address.
pub fn resolve(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !text.contains(':') {
        return Err(format!("{text:?} is not host:port"));
    }
    text.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {text:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{text:?} resolves to no address"))
}

/// `udp://host:port` or `tcp://host:port`.
pub fn parse_syslog_target(text: &str) -> Result<(Transport, SocketAddr), String> {
    let (transport, rest) = if let Some(r) = text.strip_prefix("udp://") {
        (Transport::Udp, r)
    } else if let Some(r) = text.strip_prefix("tcp://") {
        (Transport::Tcp, r)
    } else {
        return Err(format!(
            "invalid syslog target {text:?}: want udp://host:port or tcp://host:port"
        ));
    };
    let addr = resolve(rest).map_err(|e| format!("invalid syslog target {text:?}: {e}"))?;
    Ok((transport, addr))
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
        assert!(parse_syslog_target("127.0.0.1:514")
            .unwrap_err()
            .contains("udp://host:port"));
        assert!(parse_syslog_target("tcp://nohost").is_err());
    }
}
