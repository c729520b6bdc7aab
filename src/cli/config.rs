//! Phase two of the command line: validated [`Args`] plus the environment → [`Config`]. This is where the
//! basic-auth file is read (once) and where `PYROSCOPE_ADHOC_SERVER_ADDRESS` is refused when
//! `-profiling-pyroscope` is set.
//!
//! Never binds or connects; refusals are [`CliError`]s (exit 2).
#![forbid(unsafe_code)]

use super::{split_basic_auth, Args, CliError};
use crate::api::browser::{AllowedHost, BrowserPolicy};
use crate::gate::state::{Startup, ADHOC_ENV};
use std::time::Duration;

/// Everything serve mode needs, resolved.
pub struct Config {
    listen: String,
    startup: Startup,
    heap_rate: Option<usize>,
    allowed_hosts: Vec<AllowedHost>,
    allowed_origins: Vec<String>,
    fleet: crate::lab::FleetConfig,
}

impl Config {
    /// Resolves `args`; `env` answers whether a variable is set (the process environment in `main`).
    pub fn resolve(args: Args, env_is_set: &dyn Fn(&str) -> bool) -> Result<Config, CliError> {
        let Args {
            listen,
            pyroscope,
            basic_auth,
            basic_auth_file,
            tenant,
            heap_rate,
            upload_interval,
            wall,
            allowed_hosts,
            allowed_origins,
            fleet,
        } = args;
        if pyroscope.is_some() && env_is_set(ADHOC_ENV) {
            return Err(CliError(format!(
                "{ADHOC_ENV} is set while -profiling-pyroscope is given: nl6 never reads it (the Go SDK would push \
                 there instead); unset it"
            )));
        }
        let basic_auth = match (basic_auth, basic_auth_file) {
            (Some(a), _) => Some(a),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    CliError(format!(
                        "-profiling-pyroscope-basic-auth-file {}: {e}",
                        path.display()
                    ))
                })?;
                let mut lines = text.lines().filter(|l| !l.trim().is_empty());
                let line = lines.next().unwrap_or("").trim_end_matches('\r');
                if lines.next().is_some() {
                    return Err(CliError(format!(
                        "-profiling-pyroscope-basic-auth-file {}: expected one line USER:PASS, found several",
                        path.display()
                    )));
                }
                Some(split_basic_auth(line).map_err(|e| {
                    CliError(format!(
                        "-profiling-pyroscope-basic-auth-file {}: {e}",
                        path.display()
                    ))
                })?)
            }
            (None, None) => None,
        };
        Ok(Config {
            listen,
            startup: Startup::new(pyroscope, basic_auth, tenant, upload_interval).with_wall(wall),
            heap_rate,
            allowed_hosts,
            allowed_origins,
            fleet,
        })
    }

    /// The address to bind. Defaults to `0.0.0.0:8080`.
    pub fn listen(&self) -> &str {
        &self.listen
    }
    /// The gate's startup configuration (flag address, bound credentials, upload interval 15 s by default).
    pub fn startup(&self) -> &Startup {
        &self.startup
    }
    /// `-profiling-heap-rate`, when given. Defaults to none (the engine's 524288).
    pub fn heap_rate(&self) -> Option<usize> {
        self.heap_rate
    }
    /// What browsers may do to a server bound to `bound` (`-allowed-hosts`, `-allowed-origins`).
    pub fn browser_policy(&self, bound: std::net::SocketAddr) -> BrowserPolicy {
        BrowserPolicy::new(
            bound,
            self.allowed_hosts.clone(),
            self.allowed_origins.clone(),
        )
    }
    /// The lab fleet's settings. Defaults to 4 devices on 127.0.0.1, SNMP from UDP 16100, no targets.
    pub fn fleet(&self) -> &crate::lab::FleetConfig {
        &self.fleet
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "0.0.0.0:8080".to_string(),
            startup: Startup::new(None, None, None, Duration::from_secs(15)),
            heap_rate: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            fleet: crate::lab::FleetConfig::default(),
        }
    }
}
