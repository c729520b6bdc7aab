//! The fleet's configuration: [`FleetConfig`] and its flag table ([`FLAGS`]: name, value name, default,
//! doc and how each value applies; `nl6`'s parser and `--help` read it, and [`FleetConfig::set`] applies
//! one flag's text the same way).
//!
//! Plain values: parsing resolves host names but never binds or connects.
#![forbid(unsafe_code)]

pub use super::device_net::DeviceNet;
use super::target::{parse_syslog_target, resolve, TargetError, Transport};
use crate::goflag::Flag;
use crate::timefmt::format_go_duration as format_duration;
use gnmi::GnmiConfig;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Every fleet flag, defined once ([`crate::goflag::Flag`] rows: `--help`, the parser and
/// [`FleetConfig::set`] all read this table). A new flag is one more row here, one field and its default.
pub const FLAGS: &[Flag<FleetConfig>] = &[
    Flag::value(
        "devices",
        "N",
        "4",
        "number of simulated devices (0 allowed)",
        |c, v| {
            c.devices = number(v)? as usize;
            Ok(())
        },
    ),
    Flag::value(
        "bind",
        "ADDR",
        "127.0.0.1",
        "address every device socket binds to (per-port mode; not used for SNMP under -device-net)",
        |c, v| {
            c.bind = v.parse().map_err(|_| format!("invalid IP address {v:?}"))?;
            Ok(())
        },
    ),
    Flag::value(
        "snmp-port",
        "PORT",
        "16100",
        "device i answers SNMP on UDP PORT+i; 0 gives every device an ephemeral port",
        |c, v| {
            c.snmp_port =
                u16::try_from(number(v)?).map_err(|_| format!("port {v} is above 65535"))?;
            Ok(())
        },
    ),
    Flag::value(
        "device-net",
        "CIDR",
        "",
        "device i answers SNMP at the range's first address + 1 + i, every device on -snmp-port \
         (0: one ephemeral port for all), and sends its traps, syslog and flows from that address",
        |c, v| {
            c.device_net = match v {
                "" => None,
                v => Some(DeviceNet::parse(v)?),
            };
            Ok(())
        },
    ),
    Flag::value(
        "snmp-io",
        "MODE",
        "auto",
        "how per-port SNMP sockets are served: uring (io_uring: one system call a batch of answers, \
         Linux 6.1+), epoll, or auto (uring where this kernel allows it, else epoll, said at start)",
        |c, v| {
            c.snmp_io = SnmpIo::parse(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "snmp-community",
        "TEXT",
        DEFAULT_COMMUNITY,
        "SNMPv2c community the agents answer and traps carry",
        |c, v| {
            if v.is_empty() {
                return Err("the community cannot be empty".into());
            }
            c.snmp_community = v.into();
            Ok(())
        },
    ),
    Flag::value(
        "trap-target",
        "HOST:PORT",
        "",
        "send linkUp/linkDown notifications there (off when unset)",
        |c, v| {
            c.trap_target = optional_target(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "trap-interval",
        "DURATION",
        "30s",
        "each device toggles an interface and notifies this often",
        |c, v| {
            c.trap_interval = parse_positive(v)?;
            Ok(())
        },
    ),
    Flag::boolean(
        "trap-inform",
        "false",
        "send acknowledged INFORMs instead of traps (bare -trap-inform means true)",
        |c, v| {
            c.trap_inform = crate::goflag::parse_bool(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "inform-timeout",
        "DURATION",
        "1s",
        "wait this long for an INFORM response before resending",
        |c, v| {
            c.inform_timeout = parse_positive(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "inform-retries",
        "N",
        "2",
        "resend an unanswered INFORM this many times",
        |c, v| {
            c.inform_retries =
                u32::try_from(number(v)?).map_err(|_| "too many retries".to_string())?;
            Ok(())
        },
    ),
    Flag::value(
        "syslog-target",
        "URL",
        "",
        "udp://host:port or tcp://host:port for RFC 5424 syslog (off when unset)",
        |c, v| {
            c.syslog_target = match v {
                "" => None,
                v => Some(parse_syslog_target(v)?),
            };
            Ok(())
        },
    ),
    Flag::value(
        "syslog-interval",
        "DURATION",
        "10s",
        "each device emits one syslog message this often (jittered)",
        |c, v| {
            c.syslog_interval = parse_positive(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "syslog-queue",
        "N",
        "1024",
        "TCP syslog send queue bound; messages beyond it are dropped and counted",
        |c, v| match number(v)? {
            0 => Err("the queue bound must be at least 1".into()),
            n => {
                c.syslog_queue = n as usize;
                Ok(())
            }
        },
    ),
    Flag::value(
        "flow-target",
        "HOST:PORT",
        "",
        "send NetFlow v9 there (off when unset)",
        |c, v| {
            c.flow_target = optional_target(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "flow-interval",
        "DURATION",
        "10s",
        "each device exports its flows this often (devices at their own phases)",
        |c, v| {
            c.flow_interval = parse_positive(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "traffic",
        "PERIOD",
        "",
        "keep the lab busy: every PERIOD (e.g. 10ms) walk each device over SNMP and send flaps, \
         syslog and flows (unset targets: a local discard socket)",
        |c, v| {
            c.traffic = parse_traffic(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "gnmi-port",
        "PORT",
        "",
        "device i serves gNMI on TCP PORT+i (0: an ephemeral port each; with -device-net every device \
         on PORT at its own address); off when unset",
        |c, v| c.gnmi.set_port(v),
    ),
    Flag::value(
        "gnmi-tls-cert",
        "FILE",
        "",
        "PEM certificate chain the gNMI target serves TLS with (with -gnmi-tls-key; plaintext when unset)",
        |c, v| c.gnmi.set_tls_cert(v),
    ),
    Flag::value(
        "gnmi-tls-key",
        "FILE",
        "",
        "PEM private key of -gnmi-tls-cert",
        |c, v| c.gnmi.set_tls_key(v),
    ),
    Flag::value(
        "gnmi-username",
        "TEXT",
        "",
        "every gNMI RPC must carry this `username` metadata (with -gnmi-password); none needed when unset",
        |c, v| c.gnmi.set_username(v),
    ),
    Flag::value(
        "gnmi-password",
        "TEXT",
        "",
        "the `password` metadata every gNMI RPC must carry (visible in ps: a lab credential)",
        |c, v| c.gnmi.set_password(v),
    ),
    Flag::value(
        "gnmi-dialout",
        "HOST:PORT",
        "",
        "every device streams its telemetry there (gNMI dial-out, DialoutTelemetry.Publish; off when unset)",
        |c, v| c.gnmi.set_dialout(v),
    ),
    Flag::value(
        "gnmi-dialout-interval",
        "DURATION",
        "10s",
        "each device samples its dial-out paths this often",
        |c, v| c.gnmi.set_dialout_interval(v),
    ),
    Flag::value(
        "gnmi-dialout-paths",
        "PATHS",
        gnmi::DEFAULT_DIALOUT_PATHS,
        "comma-separated gNMI paths each device streams to the dial-out collector",
        |c, v| c.gnmi.set_dialout_paths(v),
    ),
    Flag::value(
        "gnmi-dialout-queue",
        "N",
        "64",
        "notifications each device holds while the collector is slow or away; beyond it new ones are dropped and counted",
        |c, v| c.gnmi.set_dialout_queue(v),
    ),
    Flag::value(
        "gnmi-dialout-backoff-max",
        "DURATION",
        "5s",
        "longest pause before a device dials a failing collector again (from 100ms, doubling, jittered; \
         only a delivered notification starts it over)",
        |c, v| c.gnmi.set_dialout_backoff_max(v),
    ),
];

fn number(v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("invalid number {v:?}"))
}

/// A `host:port` target; empty is off.
fn optional_target(v: &str) -> Result<Option<SocketAddr>, TargetError> {
    match v {
        "" => Ok(None),
        v => resolve(v).map(Some),
    }
}

/// How the per-port SNMP sockets are served (`-snmp-io`); `-device-net`'s few shared sockets are
/// always served by `epoll` with batched receives and sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnmpIo {
    /// io_uring where the kernel allows it (a probe at start), else epoll.
    Auto,
    /// io_uring, or refuse to start (per port; `-device-net` is served by epoll all the same).
    Uring,
    Epoll,
}

impl SnmpIo {
    fn as_str(self) -> &'static str {
        match self {
            SnmpIo::Auto => "auto",
            SnmpIo::Uring => "uring",
            SnmpIo::Epoll => "epoll",
        }
    }
    fn parse(v: &str) -> Result<SnmpIo, String> {
        match v {
            "auto" => Ok(SnmpIo::Auto),
            "uring" => Ok(SnmpIo::Uring),
            "epoll" => Ok(SnmpIo::Epoll),
            _ => Err(format!("invalid mode {v:?}: give auto, uring or epoll")),
        }
    }
}

/// The SNMPv2c community devices answer when `-snmp-community` is not given.
pub const DEFAULT_COMMUNITY: &str = "public";

/// Fleet configuration. Build with [`Default`] then [`FleetConfig::set`] (text, from flags) or the typed
/// `with_*` methods; [`FleetConfig::validate`] runs at `Fleet::start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetConfig {
    devices: usize,
    bind: IpAddr,
    snmp_port: u16,
    device_net: Option<DeviceNet>,
    snmp_io: SnmpIo,
    snmp_community: String,
    trap_target: Option<SocketAddr>,
    trap_interval: Duration,
    trap_inform: bool,
    inform_timeout: Duration,
    inform_retries: u32,
    syslog_target: Option<(Transport, SocketAddr)>,
    syslog_interval: Duration,
    syslog_queue: usize,
    flow_target: Option<SocketAddr>,
    flow_interval: Duration,
    traffic: Option<Duration>,
    gnmi: GnmiConfig,
}

impl Default for FleetConfig {
    fn default() -> FleetConfig {
        FleetConfig {
            devices: 4,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            snmp_port: 16100,
            device_net: None,
            snmp_io: SnmpIo::Auto,
            snmp_community: DEFAULT_COMMUNITY.into(),
            trap_target: None,
            trap_interval: Duration::from_secs(30),
            trap_inform: false,
            inform_timeout: Duration::from_secs(1),
            inform_retries: 2,
            syslog_target: None,
            syslog_interval: Duration::from_secs(10),
            syslog_queue: 1024,
            flow_target: None,
            flow_interval: Duration::from_secs(10),
            traffic: None,
            gnmi: GnmiConfig::default(),
        }
    }
}

fn parse_positive(text: &str) -> Result<Duration, String> {
    let d = crate::timefmt::parse_go_duration(text).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("duration {text:?} must be greater than zero"));
    }
    Ok(d)
}

/// The shortest period `-traffic` accepts: below it a round cannot finish before the next is due.
pub const MIN_TRAFFIC_PERIOD: Duration = Duration::from_millis(1);

/// `-traffic`: empty is off; otherwise a period of at least [`MIN_TRAFFIC_PERIOD`].
fn parse_traffic(text: &str) -> Result<Option<Duration>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let d = parse_positive(text)?;
    if d < MIN_TRAFFIC_PERIOD {
        return Err(format!(
            "period {text:?} is below {}",
            format_duration(MIN_TRAFFIC_PERIOD)
        ));
    }
    Ok(Some(d))
}

impl FleetConfig {
    /// Sets flag `name` (with or without its leading dash) from its text value, as the command line
    /// would. The error names the flag and says what was wrong, e.g. `-trap-interval: invalid duration
    /// "x": unknown unit (e.g. 500ms, 10s)`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let name = name.trim_start_matches('-');
        let flag =
            crate::goflag::find(FLAGS, name).ok_or(format!("-{name}: unknown fleet flag"))?;
        (flag.apply)(self, value).map_err(|e| format!("-{}: {e}", flag.name))
    }

    /// Checks what depends on several fields (the port range) before anything binds.
    pub fn validate(&self) -> Result<(), String> {
        self.gnmi.validate()?;
        if self.devices > u32::MAX as usize {
            return Err(format!(
                "-devices {}: at most {} devices a fleet: lower -devices",
                self.devices,
                u32::MAX
            ));
        }
        if let Some(net) = self.device_net {
            if self.devices > net.capacity() {
                return Err(format!(
                    "-device-net {net} holds {} device addresses (its first address + 1 up to the one \
                     before the last), not -devices {}: give a wider range, e.g. -device-net {}",
                    net.capacity(),
                    self.devices,
                    net.widened_for(self.devices)
                ));
            }
            // TCP syslog connects from an address the kernel picks: only UDP senders use the devices'.
            let udp_syslog = self
                .syslog_target
                .filter(|(t, _)| *t == Transport::Udp)
                .map(|(_, a)| a);
            let senders = [
                ("-trap-target", self.trap_target),
                ("-syslog-target", udp_syslog),
                ("-flow-target", self.flow_target),
            ];
            for (flag, target) in senders {
                target.map_or(Ok(()), |t| net.check_target(flag, t))?;
            }
            return Ok(());
        }
        if let Some(base) = self.gnmi.port().filter(|&p| p != 0 && self.devices > 0) {
            if base as usize + self.devices - 1 > 65_535 {
                return Err(format!(
                    "-gnmi-port {base} with -devices {} needs ports up to {}, above 65535: lower -gnmi-port or use -gnmi-port 0",
                    self.devices,
                    base as usize + self.devices - 1
                ));
            }
        }
        if self.snmp_port != 0
            && self.devices > 0
            && self.snmp_port as usize + self.devices - 1 > 65_535
        {
            return Err(format!(
                "-snmp-port {} with -devices {} needs ports up to {}, above 65535: lower -snmp-port or use -snmp-port 0",
                self.snmp_port,
                self.devices,
                self.snmp_port as usize + self.devices - 1
            ));
        }
        Ok(())
    }

    /// The startup warning when devices answer SNMP beyond loopback with the default community, which
    /// anyone on the network can guess (each device answers anyone who knows it; answers are bounded,
    /// see `snmp::response_limit`, but they still leave the host). `None` on loopback, with no device or
    /// with a community of one's own.
    pub fn exposure_warning(&self) -> Option<String> {
        if self.devices == 0 || self.snmp_community != DEFAULT_COMMUNITY {
            return None;
        }
        // With -device-net only the range's addresses are answered, whatever -bind says.
        let (place, remedy) = match self.device_net {
            Some(net) if net.device_ip(0).is_loopback() => return None,
            Some(net) => (
                format!("at their own addresses in -device-net {net}"),
                "or use a range under 127.0.0.0/8 (e.g. -device-net 127.1.0.0/16), or firewall the range \
                 (-bind does not apply to -device-net)"
                    .to_string(),
            ),
            None if self.bind.is_loopback() => return None,
            None => (format!("beyond loopback ({})", self.bind), "or -bind 127.0.0.1".to_string()),
        };
        Some(format!(
            "warning: {} simulated device(s) listen {place} with the default SNMP community \
             {DEFAULT_COMMUNITY:?}: anyone who can reach them can read them; set -snmp-community, {remedy}",
            self.devices
        ))
    }

    /// Number of devices. Defaults to 4.
    pub fn devices(&self) -> usize {
        self.devices
    }
    /// Address every device socket binds to. Defaults to 127.0.0.1.
    pub fn bind(&self) -> IpAddr {
        self.bind
    }
    /// SNMP base port (0: ephemeral). Defaults to 16100.
    pub fn snmp_port(&self) -> u16 {
        self.snmp_port
    }
    /// `-snmp-io`: how per-port SNMP sockets are served.
    pub fn snmp_io(&self) -> SnmpIo {
        self.snmp_io
    }
    pub fn with_snmp_io(mut self, io: SnmpIo) -> Self {
        self.snmp_io = io;
        self
    }
    /// `-device-net`: the range devices take their addresses from (off: one port per device).
    pub fn device_net(&self) -> Option<DeviceNet> {
        self.device_net
    }
    pub fn with_device_net(mut self, net: Option<DeviceNet>) -> Self {
        self.device_net = net;
        self
    }
    /// Defaults to `public`.
    pub fn snmp_community(&self) -> &str {
        &self.snmp_community
    }
    /// Defaults to none (off).
    pub fn trap_target(&self) -> Option<SocketAddr> {
        self.trap_target
    }
    /// Defaults to 30s.
    pub fn trap_interval(&self) -> Duration {
        self.trap_interval
    }
    /// Defaults to false.
    pub fn trap_inform(&self) -> bool {
        self.trap_inform
    }
    /// Defaults to 1s.
    pub fn inform_timeout(&self) -> Duration {
        self.inform_timeout
    }
    /// Defaults to 2.
    pub fn inform_retries(&self) -> u32 {
        self.inform_retries
    }
    /// Defaults to none (off).
    pub fn syslog_target(&self) -> Option<(Transport, SocketAddr)> {
        self.syslog_target
    }
    /// Defaults to 10s.
    pub fn syslog_interval(&self) -> Duration {
        self.syslog_interval
    }
    /// Defaults to 1024.
    pub fn syslog_queue(&self) -> usize {
        self.syslog_queue
    }
    /// Defaults to none (off).
    pub fn flow_target(&self) -> Option<SocketAddr> {
        self.flow_target
    }
    /// Defaults to 10s.
    pub fn flow_interval(&self) -> Duration {
        self.flow_interval
    }
    /// The `-traffic` period. Defaults to none (off).
    pub fn traffic(&self) -> Option<Duration> {
        self.traffic
    }

    pub fn with_devices(mut self, n: usize) -> Self {
        self.devices = n;
        self
    }
    pub fn with_bind(mut self, a: IpAddr) -> Self {
        self.bind = a;
        self
    }
    pub fn with_snmp_port(mut self, p: u16) -> Self {
        self.snmp_port = p;
        self
    }
    pub fn with_snmp_community(mut self, c: &str) -> Self {
        self.snmp_community = c.into();
        self
    }
    pub fn with_trap_target(mut self, t: Option<SocketAddr>, interval: Duration) -> Self {
        self.trap_target = t;
        self.trap_interval = interval;
        self
    }
    pub fn with_inform(mut self, on: bool, timeout: Duration, retries: u32) -> Self {
        self.trap_inform = on;
        self.inform_timeout = timeout;
        self.inform_retries = retries;
        self
    }
    pub fn with_syslog_target(
        mut self,
        t: Option<(Transport, SocketAddr)>,
        interval: Duration,
    ) -> Self {
        self.syslog_target = t;
        self.syslog_interval = interval;
        self
    }
    pub fn with_syslog_queue(mut self, n: usize) -> Self {
        self.syslog_queue = n.max(1);
        self
    }
    pub fn with_flow_target(mut self, t: Option<SocketAddr>, interval: Duration) -> Self {
        self.flow_target = t;
        self.flow_interval = interval;
        self
    }
    pub fn with_traffic(mut self, period: Option<Duration>) -> Self {
        self.traffic = period;
        self
    }
    /// The `-gnmi-*` settings. Default: gNMI off.
    pub fn gnmi(&self) -> &GnmiConfig {
        &self.gnmi
    }
    pub fn with_gnmi(mut self, g: GnmiConfig) -> Self {
        self.gnmi = g;
        self
    }

    /// The current value of every flag as text, in [`FLAGS`] order (for `--help` and the round-trip test).
    pub fn flag_values(&self) -> Vec<(&'static str, String)> {
        let addr = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
        let FleetConfig {
            devices,
            bind,
            snmp_port,
            device_net,
            snmp_io,
            snmp_community,
            trap_target,
            trap_interval,
            trap_inform,
            inform_timeout,
            inform_retries,
            syslog_target,
            syslog_interval,
            syslog_queue,
            flow_target,
            flow_interval,
            traffic,
            gnmi,
        } = self;
        let syslog = syslog_target
            .map(|(t, a)| format!("{}://{a}", t.scheme()))
            .unwrap_or_default();
        vec![
            ("devices", devices.to_string()),
            ("bind", bind.to_string()),
            ("snmp-port", snmp_port.to_string()),
            (
                "device-net",
                device_net.map(|n| n.to_string()).unwrap_or_default(),
            ),
            ("snmp-io", snmp_io.as_str().to_string()),
            ("snmp-community", snmp_community.clone()),
            ("trap-target", addr(*trap_target)),
            ("trap-interval", format_duration(*trap_interval)),
            ("trap-inform", trap_inform.to_string()),
            ("inform-timeout", format_duration(*inform_timeout)),
            ("inform-retries", inform_retries.to_string()),
            ("syslog-target", syslog),
            ("syslog-interval", format_duration(*syslog_interval)),
            ("syslog-queue", syslog_queue.to_string()),
            ("flow-target", addr(*flow_target)),
            ("flow-interval", format_duration(*flow_interval)),
            ("traffic", traffic.map(format_duration).unwrap_or_default()),
        ]
        .into_iter()
        .chain(gnmi.flag_values())
        .collect()
    }
}

pub mod gnmi;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
