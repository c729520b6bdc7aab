//! gNMI's settings: [`GnmiConfig`] (the target's port, TLS files and credentials; the dial-out
//! collector, its paths, interval, queue bound and backoff cap) and the parsers the `-gnmi-*` rows of
//! the fleet's flag table call. The fleet's configuration holds one; `-gnmi-dialout-paths` is checked
//! with the parser the target serves with ([`super::path`]), so a bad path is a flag error, not a silent
//! empty stream.
//!
//! Plain values: parsing resolves host names but never binds, connects or reads a file.
#![forbid(unsafe_code)]

use super::path::PathError;
use crate::lab::target::{resolve, TargetError};
use crate::timefmt::{format_go_duration as format_duration, DurationError};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The paths every device streams to a dial-out collector unless `-gnmi-dialout-paths` says otherwise.
pub const DEFAULT_DIALOUT_PATHS: &str =
    "/interfaces/interface/state/counters,/interfaces/interface/state/oper-status";

/// gNMI settings; off (no listener, no dial-out) by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GnmiConfig {
    port: Option<u16>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    username: Option<String>,
    password: Option<String>,
    dialout: Option<SocketAddr>,
    dialout_interval: Duration,
    dialout_paths: String,
    dialout_queue: usize,
    dialout_backoff_max: Duration,
}

impl Default for GnmiConfig {
    fn default() -> GnmiConfig {
        GnmiConfig {
            port: None,
            tls_cert: None,
            tls_key: None,
            username: None,
            password: None,
            dialout: None,
            dialout_interval: Duration::from_secs(10),
            dialout_paths: DEFAULT_DIALOUT_PATHS.into(),
            dialout_queue: 64,
            dialout_backoff_max: Duration::from_secs(5),
        }
    }
}

fn optional(v: &str) -> Option<String> {
    (!v.is_empty()).then(|| v.to_string())
}

/// Why one `-gnmi-*` flag's value was refused (the flag parser names the flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GnmiValueError {
    /// `-gnmi-port`: not a port number (the text).
    Port(String),
    /// `-gnmi-dialout`: not a reachable `host:port`.
    Dialout(TargetError),
    /// `-gnmi-dialout-interval`: not a duration.
    Interval(DurationError),
    /// `-gnmi-dialout-interval`: below 10ms (the text).
    IntervalTooShort(String),
    /// `-gnmi-dialout-paths`: one path does not parse.
    Path { path: String, error: PathError },
    /// `-gnmi-dialout-queue`: not a bound of at least 1 (the text).
    Queue(String),
    /// `-gnmi-dialout-backoff-max`: not a duration.
    BackoffMax(DurationError),
    /// `-gnmi-dialout-backoff-max`: below the first pause, 100ms (the text).
    BackoffMaxTooShort(String),
}

impl fmt::Display for GnmiValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GnmiValueError::Port(v) => write!(f, "invalid port {v:?} (0 to 65535)"),
            GnmiValueError::Dialout(e) => e.fmt(f),
            GnmiValueError::Interval(e) => e.fmt(f),
            GnmiValueError::IntervalTooShort(v) => write!(f, "interval {v:?} is below 10ms"),
            GnmiValueError::Path { path, error } => write!(f, "path {path:?}: {error}"),
            GnmiValueError::Queue(v) => {
                write!(f, "want a queue bound of at least 1, not {v:?}")
            }
            GnmiValueError::BackoffMax(e) => e.fmt(f),
            GnmiValueError::BackoffMaxTooShort(v) => {
                write!(f, "backoff cap {v:?} is below 100ms, the first pause")
            }
        }
    }
}

impl std::error::Error for GnmiValueError {}

/// `-gnmi-*` flags that only work together, given alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GnmiConfigError {
    CertWithoutKey,
    KeyWithoutCert,
    /// One of `-gnmi-username` and `-gnmi-password` without the other.
    HalfCredentials,
}

impl fmt::Display for GnmiConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GnmiConfigError::CertWithoutKey => {
                "-gnmi-tls-cert needs -gnmi-tls-key (the certificate's private key)"
            }
            GnmiConfigError::KeyWithoutCert => {
                "-gnmi-tls-key needs -gnmi-tls-cert (the certificate it signs for)"
            }
            GnmiConfigError::HalfCredentials => {
                "-gnmi-username and -gnmi-password go together: give both or neither"
            }
        })
    }
}

impl std::error::Error for GnmiConfigError {}

impl GnmiConfig {
    pub fn set_port(&mut self, v: &str) -> Result<(), GnmiValueError> {
        self.port = match v {
            "" => None,
            v => Some(
                v.parse::<u16>()
                    .map_err(|_| GnmiValueError::Port(v.into()))?,
            ),
        };
        Ok(())
    }
    pub fn set_tls_cert(&mut self, v: &str) {
        self.tls_cert = optional(v).map(PathBuf::from);
    }
    pub fn set_tls_key(&mut self, v: &str) {
        self.tls_key = optional(v).map(PathBuf::from);
    }
    pub fn set_username(&mut self, v: &str) {
        self.username = optional(v);
    }
    pub fn set_password(&mut self, v: &str) {
        self.password = optional(v);
    }
    pub fn set_dialout(&mut self, v: &str) -> Result<(), GnmiValueError> {
        self.dialout = match v {
            "" => None,
            v => Some(resolve(v).map_err(GnmiValueError::Dialout)?),
        };
        Ok(())
    }
    pub fn set_dialout_interval(&mut self, v: &str) -> Result<(), GnmiValueError> {
        let d = crate::timefmt::parse_go_duration(v).map_err(GnmiValueError::Interval)?;
        if d < Duration::from_millis(10) {
            return Err(GnmiValueError::IntervalTooShort(v.into()));
        }
        self.dialout_interval = d;
        Ok(())
    }
    pub fn set_dialout_paths(&mut self, v: &str) -> Result<(), GnmiValueError> {
        for p in v.split(',') {
            super::path::parse(p.trim()).map_err(|error| GnmiValueError::Path {
                path: p.into(),
                error,
            })?;
        }
        self.dialout_paths = v.into();
        Ok(())
    }
    pub fn set_dialout_queue(&mut self, v: &str) -> Result<(), GnmiValueError> {
        match v.parse::<usize>() {
            Ok(n) if n >= 1 => {
                self.dialout_queue = n;
                Ok(())
            }
            _ => Err(GnmiValueError::Queue(v.into())),
        }
    }
    pub fn set_dialout_backoff_max(&mut self, v: &str) -> Result<(), GnmiValueError> {
        let d = crate::timefmt::parse_go_duration(v).map_err(GnmiValueError::BackoffMax)?;
        if d < Duration::from_millis(100) {
            return Err(GnmiValueError::BackoffMaxTooShort(v.into()));
        }
        self.dialout_backoff_max = d;
        Ok(())
    }

    /// Checks what depends on several fields, before anything binds.
    pub fn validate(&self) -> Result<(), GnmiConfigError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(GnmiConfigError::CertWithoutKey),
            (None, Some(_)) => Err(GnmiConfigError::KeyWithoutCert),
            _ if self.username.is_some() != self.password.is_some() => {
                Err(GnmiConfigError::HalfCredentials)
            }
            _ => Ok(()),
        }
    }

    /// `-gnmi-port`: the target's base port (0: ephemeral), or `None` when the target is off.
    pub fn port(&self) -> Option<u16> {
        self.port
    }
    pub fn with_port(mut self, port: Option<u16>) -> Self {
        self.port = port;
        self
    }
    /// The certificate and key files, when the target serves TLS.
    pub fn tls(&self) -> Option<(&PathBuf, &PathBuf)> {
        self.tls_cert.as_ref().zip(self.tls_key.as_ref())
    }
    pub fn with_tls(mut self, cert: Option<PathBuf>, key: Option<PathBuf>) -> Self {
        self.tls_cert = cert;
        self.tls_key = key;
        self
    }
    /// The username and password every RPC must carry, when set.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.username.as_deref().zip(self.password.as_deref())
    }
    pub fn with_credentials(mut self, user: &str, password: &str) -> Self {
        self.username = optional(user);
        self.password = optional(password);
        self
    }
    /// The dial-out collector, when on.
    pub fn dialout(&self) -> Option<SocketAddr> {
        self.dialout
    }
    pub fn dialout_interval(&self) -> Duration {
        self.dialout_interval
    }
    /// The dial-out paths as given (comma-separated, each checked by the parser).
    pub fn dialout_paths(&self) -> Vec<String> {
        self.dialout_paths
            .split(',')
            .map(|p| p.trim().to_string())
            .collect()
    }
    pub fn dialout_queue(&self) -> usize {
        self.dialout_queue
    }
    /// The longest pause between two dial-out connection attempts.
    pub fn dialout_backoff_max(&self) -> Duration {
        self.dialout_backoff_max
    }
    pub fn with_dialout(mut self, to: Option<SocketAddr>, interval: Duration, paths: &str) -> Self {
        self.dialout = to;
        self.dialout_interval = interval;
        self.dialout_paths = paths.into();
        self
    }
    pub fn with_dialout_queue(mut self, n: usize) -> Self {
        self.dialout_queue = n.max(1);
        self
    }

    /// The value of every `-gnmi-*` flag as text, in the flag table's order.
    pub fn flag_values(&self) -> Vec<(&'static str, String)> {
        let text = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        vec![
            (
                "gnmi-port",
                self.port.map(|p| p.to_string()).unwrap_or_default(),
            ),
            ("gnmi-tls-cert", text(&self.tls_cert)),
            ("gnmi-tls-key", text(&self.tls_key)),
            ("gnmi-username", self.username.clone().unwrap_or_default()),
            ("gnmi-password", self.password.clone().unwrap_or_default()),
            (
                "gnmi-dialout",
                self.dialout.map(|a| a.to_string()).unwrap_or_default(),
            ),
            (
                "gnmi-dialout-interval",
                format_duration(self.dialout_interval),
            ),
            ("gnmi-dialout-paths", self.dialout_paths.clone()),
            ("gnmi-dialout-queue", self.dialout_queue.to_string()),
            (
                "gnmi-dialout-backoff-max",
                format_duration(self.dialout_backoff_max),
            ),
        ]
    }
}
