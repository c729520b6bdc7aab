//! The gNMI part of the fleet's configuration: [`GnmiConfig`] (the target's port, TLS files and
//! credentials; the dial-out collector, its paths, interval, queue bound and backoff cap) and the parsers the
//! `-gnmi-*` rows of the fleet's flag table call.
//!
//! Plain values: parsing resolves host names but never binds, connects or reads a file.
#![forbid(unsafe_code)]

use crate::lab::target::resolve;
use crate::timefmt::format_go_duration as format_duration;
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

impl GnmiConfig {
    pub fn set_port(&mut self, v: &str) -> Result<(), String> {
        self.port = match v {
            "" => None,
            v => Some(
                v.parse::<u16>()
                    .map_err(|_| format!("invalid port {v:?} (0 to 65535)"))?,
            ),
        };
        Ok(())
    }
    pub fn set_tls_cert(&mut self, v: &str) -> Result<(), String> {
        self.tls_cert = optional(v).map(PathBuf::from);
        Ok(())
    }
    pub fn set_tls_key(&mut self, v: &str) -> Result<(), String> {
        self.tls_key = optional(v).map(PathBuf::from);
        Ok(())
    }
    pub fn set_username(&mut self, v: &str) -> Result<(), String> {
        self.username = optional(v);
        Ok(())
    }
    pub fn set_password(&mut self, v: &str) -> Result<(), String> {
        self.password = optional(v);
        Ok(())
    }
    pub fn set_dialout(&mut self, v: &str) -> Result<(), String> {
        self.dialout = match v {
            "" => None,
            v => Some(resolve(v).map_err(|e| e.to_string())?),
        };
        Ok(())
    }
    pub fn set_dialout_interval(&mut self, v: &str) -> Result<(), String> {
        let d = crate::timefmt::parse_go_duration(v).map_err(|e| e.to_string())?;
        if d < Duration::from_millis(10) {
            return Err(format!("interval {v:?} is below 10ms"));
        }
        self.dialout_interval = d;
        Ok(())
    }
    pub fn set_dialout_paths(&mut self, v: &str) -> Result<(), String> {
        for p in v.split(',') {
            crate::lab::gnmi_wire::path::parse(p.trim()).map_err(|e| format!("path {p:?}: {e}"))?;
        }
        self.dialout_paths = v.into();
        Ok(())
    }
    pub fn set_dialout_queue(&mut self, v: &str) -> Result<(), String> {
        match v.parse::<usize>() {
            Ok(n) if n >= 1 => {
                self.dialout_queue = n;
                Ok(())
            }
            _ => Err(format!("want a queue bound of at least 1, not {v:?}")),
        }
    }
    pub fn set_dialout_backoff_max(&mut self, v: &str) -> Result<(), String> {
        let d = crate::timefmt::parse_go_duration(v).map_err(|e| e.to_string())?;
        if d < Duration::from_millis(100) {
            return Err(format!("backoff cap {v:?} is below 100ms, the first pause"));
        }
        self.dialout_backoff_max = d;
        Ok(())
    }

    /// Checks what depends on several fields, before anything binds.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                Err("-gnmi-tls-cert needs -gnmi-tls-key (the certificate's private key)".into())
            }
            (None, Some(_)) => {
                Err("-gnmi-tls-key needs -gnmi-tls-cert (the certificate it signs for)".into())
            }
            _ if self.username.is_some() != self.password.is_some() => {
                Err("-gnmi-username and -gnmi-password go together: give both or neither".into())
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
