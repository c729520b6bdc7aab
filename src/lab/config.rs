//! The fleet's configuration: [`FleetConfig`], its checks and accessors; its flag table ([`FLAGS`], in
//! `flags.rs`: name, value name, default, doc and how each value applies; `nl6`'s parser and `--help`
//! read it, and [`FleetConfig::set`] applies one flag's text the same way); why a value or a combination
//! was refused (`error.rs`).
//!
//! Plain values: parsing resolves host names but never binds or connects.
#![forbid(unsafe_code)]

pub use super::device_net::DeviceNet;
use super::gnmi::config::GnmiConfig;
use super::target::Transport;
use crate::timefmt::format_go_duration as format_duration;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

mod error;
mod flags;
pub use error::{ConfigError, SetError, ValueError};
pub use flags::FLAGS;

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
    fn parse(v: &str) -> Result<SnmpIo, ValueError> {
        match v {
            "auto" => Ok(SnmpIo::Auto),
            "uring" => Ok(SnmpIo::Uring),
            "epoll" => Ok(SnmpIo::Epoll),
            _ => Err(ValueError::SnmpIo(v.into())),
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

/// The shortest period `-traffic` accepts: below it a round cannot finish before the next is due.
pub const MIN_TRAFFIC_PERIOD: Duration = Duration::from_millis(1);

impl FleetConfig {
    /// Sets flag `name` (with or without its leading dash) from its text value, as the command line
    /// would. The error names the flag and says what was wrong, e.g. `-trap-interval: invalid duration
    /// "x": unknown unit (e.g. 500ms, 10s)`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), SetError> {
        let name = name.trim_start_matches('-');
        let flag =
            crate::goflag::find(FLAGS, name).ok_or_else(|| SetError::Unknown(name.into()))?;
        (flag.apply)(self, value).map_err(|why| SetError::Value {
            flag: flag.name,
            why,
        })
    }

    /// Checks what depends on several fields (the port range) before anything binds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.gnmi.validate().map_err(ConfigError::Gnmi)?;
        if self.devices > u32::MAX as usize {
            return Err(ConfigError::TooManyDevices(self.devices));
        }
        if let Some(net) = self.device_net {
            if self.devices > net.capacity() {
                return Err(ConfigError::NetTooSmall {
                    net,
                    devices: self.devices,
                });
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
                target
                    .map_or(Ok(()), |t| net.check_target(flag, t))
                    .map_err(ConfigError::Unreachable)?;
            }
            return Ok(());
        }
        let ports = [
            ("-gnmi-port", self.gnmi.port().unwrap_or(0)),
            ("-snmp-port", self.snmp_port),
        ];
        for (flag, base) in ports {
            if base != 0 && self.devices > 0 && base as usize + self.devices - 1 > 65_535 {
                return Err(ConfigError::PortsAbove {
                    flag,
                    base,
                    devices: self.devices,
                });
            }
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

impl super::gnmi::Settings for FleetConfig {
    fn gnmi(&self) -> &GnmiConfig {
        &self.gnmi
    }
    fn bind(&self) -> IpAddr {
        self.bind
    }
    fn device_net(&self) -> Option<DeviceNet> {
        self.device_net
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
