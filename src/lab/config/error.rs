//! Why the fleet's configuration was refused: one flag's value ([`ValueError`]), a flag set by name
//! ([`SetError`]), or flags that do not go together ([`ConfigError`]). Each `Display` names what was
//! wrong and, where there is one, the remedy.
#![forbid(unsafe_code)]

use crate::lab::device_net::{DeviceNet, DeviceNetError};
use crate::lab::gnmi::config::{GnmiConfigError, GnmiValueError};
use crate::lab::target::TargetError;
use crate::timefmt::{format_go_duration as format_duration, DurationError};
use std::fmt;

/// Why one fleet flag's value was refused (the flag parser prefixes `-name: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    /// Not a whole number (the text).
    Number(String),
    /// `-bind`: not an IP address (the text).
    Address(String),
    /// A port above 65535 (the text).
    Port(String),
    DeviceNet(DeviceNetError),
    /// `-snmp-io`: not one of the modes (the text).
    SnmpIo(String),
    EmptyCommunity,
    Target(TargetError),
    Duration(DurationError),
    /// A zero duration where a period is needed (the text).
    ZeroDuration(String),
    /// A `-traffic` period below [`super::MIN_TRAFFIC_PERIOD`] (the text).
    TrafficTooShort(String),
    /// `-inform-retries` beyond what a count holds.
    TooManyRetries,
    /// A queue bound of 0.
    ZeroQueue,
    Gnmi(GnmiValueError),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Number(v) => write!(f, "invalid number {v:?}"),
            ValueError::Address(v) => write!(f, "invalid IP address {v:?}"),
            ValueError::Port(v) => write!(f, "port {v} is above 65535"),
            ValueError::DeviceNet(e) => e.fmt(f),
            ValueError::SnmpIo(v) => write!(f, "invalid mode {v:?}: give auto, uring or epoll"),
            ValueError::EmptyCommunity => f.write_str("the community cannot be empty"),
            ValueError::Target(e) => e.fmt(f),
            ValueError::Duration(e) => e.fmt(f),
            ValueError::ZeroDuration(v) => write!(f, "duration {v:?} must be greater than zero"),
            ValueError::TrafficTooShort(v) => write!(
                f,
                "period {v:?} is below {}",
                format_duration(super::MIN_TRAFFIC_PERIOD)
            ),
            ValueError::TooManyRetries => f.write_str("too many retries"),
            ValueError::ZeroQueue => f.write_str("the queue bound must be at least 1"),
            ValueError::Gnmi(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ValueError {}

/// The flag table's boundary: [`crate::goflag::Flag`]'s `apply` returns its refusal as text.
impl From<ValueError> for String {
    fn from(e: ValueError) -> String {
        e.to_string()
    }
}

impl From<GnmiValueError> for String {
    fn from(e: GnmiValueError) -> String {
        ValueError::Gnmi(e).to_string()
    }
}

/// Why [`super::FleetConfig::set`] refused a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// No fleet flag has this name (given without its dash).
    Unknown(String),
    /// The flag refused its value (the parser's text).
    Value { flag: &'static str, why: String },
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::Unknown(name) => write!(f, "-{name}: unknown fleet flag"),
            SetError::Value { flag, why } => write!(f, "-{flag}: {why}"),
        }
    }
}

impl std::error::Error for SetError {}

/// Flags that each parse but do not go together (checked at `Fleet::start`, before anything binds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Gnmi(GnmiConfigError),
    /// More devices than a fleet can number.
    TooManyDevices(usize),
    /// A `-device-net` range without room for every device.
    NetTooSmall {
        net: DeviceNet,
        devices: usize,
    },
    /// An exporter target the `-device-net` addresses cannot reach.
    Unreachable(DeviceNetError),
    /// A base port (`flag`) whose devices' ports run past 65535.
    PortsAbove {
        flag: &'static str,
        base: u16,
        devices: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Gnmi(e) => e.fmt(f),
            ConfigError::TooManyDevices(n) => write!(
                f,
                "-devices {n}: at most {} devices a fleet: lower -devices",
                u32::MAX
            ),
            ConfigError::NetTooSmall { net, devices } => write!(
                f,
                "-device-net {net} holds {} device addresses (its first address + 1 up to the one \
                 before the last), not -devices {devices}: give a wider range, e.g. -device-net {}",
                net.capacity(),
                net.widened_for(*devices)
            ),
            ConfigError::Unreachable(e) => e.fmt(f),
            ConfigError::PortsAbove {
                flag,
                base,
                devices,
            } => write!(
                f,
                "{flag} {base} with -devices {devices} needs ports up to {}, above 65535: lower {flag} \
                 or use {flag} 0",
                *base as usize + devices - 1
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
