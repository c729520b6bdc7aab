//! Why the fleet did not start ([`FleetError`]), each case one line naming what was wrong and the
//! remedy: a flag (exit 2 at the command line), a port in use, the open-file limit (with the count this
//! configuration needs), the thread or memory-map limit.
#![forbid(unsafe_code)]

use super::config::FleetConfig;
use super::snmp::listen::ListenError;
use std::fmt;
use std::net::SocketAddr;

/// Why the fleet did not start.
#[derive(Debug)]
pub enum FleetError {
    /// A flag the fleet cannot honour: flags that do not go together ([`super::config::ConfigError`]),
    /// `-snmp-io uring` on a kernel without it ([`NoUring`]), a `-device-net` range that is not this
    /// host's, an unusable `-gnmi-tls-*` file. The error names the flag.
    Config(Box<dyn std::error::Error + Send + Sync>),
    /// A device's SNMP port could not be bound.
    Bind {
        device: String,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    /// An exporter socket or a thread could not be created.
    Io { what: String, cause: std::io::Error },
    /// The process ran out of file descriptors (EMFILE/ENFILE) while binding: `needed` is what this
    /// configuration takes, `limit` the soft `RLIMIT_NOFILE` when it could be read.
    FdLimit {
        what: String,
        cause: std::io::Error,
        devices: usize,
        /// One SNMP socket per device (per-port mode) rather than one per serving thread.
        per_device: bool,
        needed: usize,
        limit: Option<u64>,
        /// The hard `RLIMIT_NOFILE`, which only root can raise.
        hard_limit: Option<u64>,
    },
}

/// Descriptors nl6 holds besides the fleet's sockets: stdio, the listener and the server's wake-up
/// pipe, the profiler's files, and room for the HTTP server's connections (16 workers, keep-alive).
pub const FD_HEADROOM: usize = 64;

/// Threads nl6 runs besides the SNMP serving threads, at most: main, the HTTP server (poll thread and
/// 16 workers), the lab's exporters and scheduler, the profiler's collector and pusher.
const THREADS_BESIDES_SNMP: usize = 28;

impl From<super::gnmi::server::StartError> for FleetError {
    fn from(e: super::gnmi::server::StartError) -> FleetError {
        use super::gnmi::server::StartError;
        match e {
            StartError::Bind {
                device,
                addr,
                cause,
            } => FleetError::Bind {
                device,
                addr,
                cause,
            },
            StartError::Io { what, cause } => FleetError::Io { what, cause },
            StartError::Config(what) => FleetError::Config(what.into()),
        }
    }
}

impl FleetError {
    /// Turns an EMFILE/ENFILE into [`FleetError::FdLimit`], which names the limit and the remedy (more
    /// descriptors, not another port).
    pub(crate) fn explain_fd_limit(self, config: &FleetConfig) -> FleetError {
        let out_of_fds = |cause: &std::io::Error| {
            matches!(
                cause.raw_os_error(),
                Some(libc::EMFILE) | Some(libc::ENFILE)
            )
        };
        let (what, cause) = match self {
            FleetError::Bind {
                device,
                addr,
                cause,
            } if out_of_fds(&cause) => (format!("device {device}: cannot bind UDP {addr}"), cause),
            FleetError::Io { what, cause } if out_of_fds(&cause) => (what, cause),
            FleetError::Io { what, cause } if cause.raw_os_error() == Some(libc::EAGAIN) => {
                return FleetError::Io {
                    what: format!(
                        "{what}: the process is at its thread or memory-map limit (see `ulimit -u`, \
                         /proc/sys/kernel/threads-max and /proc/sys/vm/max_map_count; nl6 needs about \
                         {} threads)",
                        THREADS_BESIDES_SNMP + super::snmp::serve::SERVING_THREADS
                    ),
                    cause,
                }
            }
            other => return other,
        };
        let exporters = [
            config.trap_target().is_some(),
            config.syslog_target().is_some(),
            config.flow_target().is_some(),
        ]
        .into_iter()
        .filter(|&on| on)
        .count();
        let per_device = config.device_net().is_none();
        let snmp_sockets = if per_device {
            config.devices()
        } else {
            super::snmp::serve::SERVING_THREADS
        };
        FleetError::FdLimit {
            what,
            cause,
            devices: config.devices(),
            per_device,
            needed: snmp_sockets + exporters + FD_HEADROOM,
            limit: open_file_limits().map(|l| l.0),
            hard_limit: open_file_limits().map(|l| l.1),
        }
    }
}

/// The soft and hard open-file limits from `/proc/self/limits` (the soft one after nl6 raised it to
/// the hard limit at boot).
fn open_file_limits() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut values = line["Max open files".len()..].split_whitespace();
    let mut next = || values.next()?.parse().ok();
    Some((next()?, next()?))
}

/// The remedy for too few descriptors: `ulimit -n` when the hard limit allows `needed`, else what can
/// raise the hard limit (a non-root user's `ulimit -n` cannot go above it).
fn raise_limit_remedy(needed: usize, hard_limit: Option<u64>) -> String {
    match hard_limit {
        Some(hard) if needed as u64 > hard => format!(
            "the hard limit is {hard}, which only root can raise, so `ulimit -n {needed}` fails for other \
             users: raise the hard limit to at least {needed} (`LimitNOFILE={needed}` in nl6's systemd \
             unit, or a `nofile` line in /etc/security/limits.conf, or `ulimit -Hn {needed}` as root)"
        ),
        _ => format!(
            "raise the limit to at least {needed}: `ulimit -n {needed}` in the shell that starts nl6, or \
             `LimitNOFILE={needed}` in its systemd unit"
        ),
    }
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::Config(e) => e.fmt(f),
            FleetError::Bind {
                device,
                addr,
                cause,
            } => {
                write!(f, "device {device}: cannot bind UDP {addr}: {cause}")?;
                // Below 1024 a refusal is about privilege, not about the port being taken.
                if cause.raw_os_error() == Some(libc::EACCES) && addr.port() < 1024 {
                    return write!(
                        f,
                        "; ports below 1024 need root or the CAP_NET_BIND_SERVICE capability: run nl6 as \
                         root, grant it once with `setcap cap_net_bind_service=+ep ./nl6`, or pick a port \
                         of 1024 or above with -snmp-port"
                    );
                }
                f.write_str("; free the port")?;
                // An ephemeral port that failed to bind is not cured by asking for ephemeral ports.
                if addr.port() != 0 {
                    f.write_str(
                        ", pick another with -snmp-port, or use -snmp-port 0 for ephemeral ports",
                    )?;
                }
                Ok(())
            }
            FleetError::Io { what, cause } => write!(f, "{what}: {cause}"),
            FleetError::FdLimit {
                what,
                cause,
                devices,
                per_device,
                needed,
                limit,
                hard_limit,
            } => {
                let (snmp, instead) = if *per_device {
                    (
                        "one socket per device",
                        "; or serve every device from a few sockets with -device-net 127.1.0.0/16",
                    )
                } else {
                    ("one socket per SNMP serving thread", "")
                };
                let limit = limit.map_or("the open-file limit".to_string(), |l| {
                    format!("the open-file limit is {l}")
                });
                write!(
                    f,
                    "{what}: {cause}: {limit}, and {} need about {needed} file descriptors ({snmp}, one per \
                     exporter, {FD_HEADROOM} for the HTTP server and the profiler); {}{instead}",
                    crate::goflag::count(*devices, "device", "devices"),
                    raise_limit_remedy(*needed, *hard_limit)
                )
            }
        }
    }
}

impl std::error::Error for FleetError {}

impl From<super::config::ConfigError> for FleetError {
    fn from(e: super::config::ConfigError) -> FleetError {
        FleetError::Config(Box::new(e))
    }
}

/// `-snmp-io uring` where this kernel cannot serve UDP through io_uring (the probe's reason).
#[derive(Debug)]
pub struct NoUring(pub crate::netsys::uring::Unavailable);

impl fmt::Display for NoUring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "-snmp-io uring: this kernel cannot serve UDP through io_uring ({}); use -snmp-io epoll \
             or auto",
            self.0
        )
    }
}

impl std::error::Error for NoUring {}

impl From<NoUring> for FleetError {
    fn from(e: NoUring) -> FleetError {
        FleetError::Config(Box::new(e))
    }
}

/// A refused SNMP bind is the fleet's: a range that is not this host's is a flag error (exit 2).
impl From<ListenError> for FleetError {
    fn from(e: ListenError) -> FleetError {
        match e {
            ListenError::Bind {
                device,
                addr,
                cause,
            } => FleetError::Bind {
                device,
                addr,
                cause,
            },
            ListenError::Io { what, cause } => FleetError::Io { what, cause },
            ListenError::NotOwned(m) => FleetError::Config(m.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::device_net::DeviceNet;
    use crate::lab::snmp::listen::ownership_error;

    fn err(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    #[test]
    fn a_device_net_bind_error_becomes_a_flag_error_or_the_fd_limit() {
        let net = DeviceNet::parse("10.9.0.0/16").unwrap();
        let ip = net.device_ip(0);
        let refused = |code| FleetError::from(ownership_error(net, 0, ip, err(code)));
        let missing = refused(libc::EADDRNOTAVAIL);
        assert!(matches!(missing, FleetError::Config(_)), "{missing:?}");
        let config = FleetConfig::default().with_device_net(Some(net));
        let out_of_fds = refused(libc::EMFILE).explain_fd_limit(&config);
        assert!(
            matches!(out_of_fds, FleetError::FdLimit { .. }),
            "{out_of_fds:?}"
        );
        let text = out_of_fds.to_string();
        assert!(
            text.contains("ulimit -n") && !text.contains("not this host's"),
            "{text}"
        );
        let other = refused(libc::ENOBUFS);
        assert!(matches!(other, FleetError::Io { .. }), "{other:?}");
    }

    #[test]
    fn out_of_threads_names_the_limits() {
        let e = FleetError::Io {
            what: "starting fleet threads".into(),
            cause: err(libc::EAGAIN),
        }
        .explain_fd_limit(&FleetConfig::default());
        let text = e.to_string();
        for needle in [
            "ulimit -u",
            "threads-max",
            "max_map_count",
            "starting fleet threads",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }

    #[test]
    fn out_of_descriptors_counts_what_the_mode_needs() {
        let bind = || FleetError::Bind {
            device: "nl6-dev-0099".into(),
            addr: "127.0.0.1:0".parse().unwrap(),
            cause: err(libc::EMFILE),
        };
        let per_port = FleetConfig::default().with_devices(1000);
        let text = bind().explain_fd_limit(&per_port).to_string();
        assert!(text.contains("need about 1064 file descriptors"), "{text}");
        assert!(
            text.contains("one socket per device") && text.contains("-device-net"),
            "{text}"
        );
        assert!(!text.contains("-snmp-port 0"), "{text}");
        let net = per_port.with_device_net(Some(DeviceNet::parse("127.1.0.0/16").unwrap()));
        let text = bind().explain_fd_limit(&net).to_string();
        assert!(text.contains("need about 68 file descriptors"), "{text}");
        assert!(
            text.contains("one socket per SNMP serving thread"),
            "{text}"
        );
    }

    #[test]
    fn a_need_above_the_hard_limit_names_it_instead_of_ulimit() {
        let short = |needed: usize| FleetError::FdLimit {
            what: "device nl6-dev-19995: cannot bind UDP 127.0.0.1:0".into(),
            cause: err(libc::EMFILE),
            devices: 30_000,
            per_device: true,
            needed,
            limit: Some(20_000),
            hard_limit: Some(20_000),
        };
        let text = short(30_064).to_string();
        for needle in ["hard limit is 20000", "LimitNOFILE=30064", "-device-net"] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("`ulimit -n 30064` in the shell"), "{text}");
        let text = short(10_064).to_string();
        assert!(text.contains("`ulimit -n 10064` in the shell"), "{text}");
    }

    #[test]
    fn a_taken_ephemeral_port_does_not_suggest_ephemeral_ports() {
        let taken = |port: u16| FleetError::Bind {
            device: "nl6-dev-0000".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            cause: err(libc::EADDRINUSE),
        };
        assert!(taken(16100).to_string().contains("-snmp-port 0"));
        assert!(!taken(0).to_string().contains("-snmp-port 0"));
    }

    #[test]
    fn a_privileged_port_names_root_and_the_capability() {
        let denied = |port: u16| FleetError::Bind {
            device: "nl6-dev-0000 … nl6-dev-29999".into(),
            addr: SocketAddr::from(([0, 0, 0, 0], port)),
            cause: err(libc::EACCES),
        };
        let text = denied(161).to_string();
        for needle in [
            "root",
            "CAP_NET_BIND_SERVICE",
            "setcap cap_net_bind_service=+ep ./nl6",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("free the port"), "{text}");
        assert!(!denied(16100).to_string().contains("setcap"));
    }
}
