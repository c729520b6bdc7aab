//! The fleet's flag table, [`FLAGS`], and the parsers its rows call: each row names a flag, its value,
//! default and doc, and sets one [`FleetConfig`] field from the flag's text.
#![forbid(unsafe_code)]

use super::{DeviceNet, FleetConfig, SnmpIo, ValueError, DEFAULT_COMMUNITY, MIN_TRAFFIC_PERIOD};
use crate::goflag::Flag;
use crate::lab::gnmi::config::DEFAULT_DIALOUT_PATHS;
use crate::lab::target::{parse_syslog_target, resolve, TargetError};
use std::net::SocketAddr;
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
            c.bind = v.parse().map_err(|_| ValueError::Address(v.into()))?;
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
                u16::try_from(number(v)?).map_err(|_| ValueError::Port(v.into()))?;
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
                v => Some(DeviceNet::parse(v).map_err(ValueError::DeviceNet)?),
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
                return Err(ValueError::EmptyCommunity.into());
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
                u32::try_from(number(v)?).map_err(|_| ValueError::TooManyRetries)?;
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
            0 => Err(ValueError::ZeroQueue.into()),
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
        |c, v| c.gnmi.set_port(v).map_err(String::from),
    ),
    Flag::value(
        "gnmi-tls-cert",
        "FILE",
        "",
        "PEM certificate chain the gNMI target serves TLS with (with -gnmi-tls-key; plaintext when unset)",
        |c, v| {
            c.gnmi.set_tls_cert(v);
            Ok(())
        },
    ),
    Flag::value(
        "gnmi-tls-key",
        "FILE",
        "",
        "PEM private key of -gnmi-tls-cert",
        |c, v| {
            c.gnmi.set_tls_key(v);
            Ok(())
        },
    ),
    Flag::value(
        "gnmi-username",
        "TEXT",
        "",
        "every gNMI RPC must carry this `username` metadata (with -gnmi-password); none needed when unset",
        |c, v| {
            c.gnmi.set_username(v);
            Ok(())
        },
    ),
    Flag::value(
        "gnmi-password",
        "TEXT",
        "",
        "the `password` metadata every gNMI RPC must carry (visible in ps: a lab credential)",
        |c, v| {
            c.gnmi.set_password(v);
            Ok(())
        },
    ),
    Flag::value(
        "gnmi-dialout",
        "HOST:PORT",
        "",
        "every device streams its telemetry there (gNMI dial-out, DialoutTelemetry.Publish; off when unset)",
        |c, v| c.gnmi.set_dialout(v).map_err(String::from),
    ),
    Flag::value(
        "gnmi-dialout-interval",
        "DURATION",
        "10s",
        "each device samples its dial-out paths this often",
        |c, v| c.gnmi.set_dialout_interval(v).map_err(String::from),
    ),
    Flag::value(
        "gnmi-dialout-paths",
        "PATHS",
        DEFAULT_DIALOUT_PATHS,
        "comma-separated gNMI paths each device streams to the dial-out collector",
        |c, v| c.gnmi.set_dialout_paths(v).map_err(String::from),
    ),
    Flag::value(
        "gnmi-dialout-queue",
        "N",
        "64",
        "notifications each device holds while the collector is slow or away; beyond it new ones are dropped and counted",
        |c, v| c.gnmi.set_dialout_queue(v).map_err(String::from),
    ),
    Flag::value(
        "gnmi-dialout-backoff-max",
        "DURATION",
        "5s",
        "longest pause before a device dials a failing collector again (from 100ms, doubling, jittered; \
         only a delivered notification starts it over)",
        |c, v| c.gnmi.set_dialout_backoff_max(v).map_err(String::from),
    ),
];

fn number(v: &str) -> Result<u64, ValueError> {
    v.parse::<u64>().map_err(|_| ValueError::Number(v.into()))
}

/// A `host:port` target; empty is off.
fn optional_target(v: &str) -> Result<Option<SocketAddr>, TargetError> {
    match v {
        "" => Ok(None),
        v => resolve(v).map(Some),
    }
}

fn parse_positive(text: &str) -> Result<Duration, ValueError> {
    let d = crate::timefmt::parse_go_duration(text).map_err(ValueError::Duration)?;
    if d.is_zero() {
        return Err(ValueError::ZeroDuration(text.into()));
    }
    Ok(d)
}

/// `-traffic`: empty is off; otherwise a period of at least [`MIN_TRAFFIC_PERIOD`].
fn parse_traffic(text: &str) -> Result<Option<Duration>, ValueError> {
    if text.is_empty() {
        return Ok(None);
    }
    let d = parse_positive(text)?;
    if d < MIN_TRAFFIC_PERIOD {
        return Err(ValueError::TrafficTooShort(text.into()));
    }
    Ok(Some(d))
}
