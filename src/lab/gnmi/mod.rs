//! gNMI on every simulated device (`-gnmi-port`) and gNMI dial-out (`-gnmi-dialout`): the two parts of
//! the lab that speak gRPC, each confined to its own OS thread running a tokio `current_thread` runtime
//! (the rest of nl6 stays blocking):
//!
//! | thread | label at birth | what it does |
//! |---|---|---|
//! | `gnmi` | `gnmi` | every device's gNMI target: Capabilities, Get, Set, Subscribe ([`server`], [`service`], [`subscribe`]) |
//! | `gnmi-dialout` | `gnmi-dialout` | every device's stream to the collector, reconnecting with backoff ([`dialout`]) |
//!
//! - [`proto`]: the messages, generated at build time from `proto/*.proto`; [`path`]: paths, their
//!   text form and wildcards; [`config`]: the `-gnmi-*` settings (the fleet's configuration holds them,
//!   so this folder sits below it and reads the rest through [`Settings`]); [`schema`]: a device's OpenConfig leaves (the state SNMP
//!   serves); [`select`]: a request's paths joined, limited and matched; [`encode`]: JSON_IETF / JSON / PROTO values; [`target`]: which device a connection
//!   reached, credentials; [`load`]: `-traffic`'s gNMI client side; [`limits`]: what one request,
//!   stream and connection may cost; [`idle`]: the deadline that closes a silent connection.
//!
//! Never here: a socket on an address the configuration did not name, an unbounded queue, a thread per
//! device or per connection.
#![forbid(unsafe_code)]

use crate::lab::device::Device;
use crate::lab::device_net::DeviceNet;
use crate::labels::Subsystem;
use config::GnmiConfig;
use std::net::IpAddr;
use std::sync::Arc;

pub mod config;
pub mod dialout;
pub mod encode;
pub mod idle;
pub mod limits;
pub mod load;
pub mod path;
pub mod proto;
pub mod schema;
pub mod select;
pub mod server;
pub mod service;
pub mod subscribe;
pub mod target;

/// What the gNMI threads need of the fleet that runs them. The fleet implements it, so gNMI stays
/// below the fleet that assembles it (no import cycle), as `scenario::Host` does for scenarios.
pub trait Host: std::fmt::Debug + Send + Sync + 'static {
    /// Every device, by index.
    fn devices(&self) -> &[Arc<Device>];
    fn config(&self) -> &dyn Settings;
    /// True once the fleet is stopping.
    fn stopping(&self) -> bool;
    /// Sets an interface's admin status and announces a link change as a flap does (trap, syslog);
    /// `None` for an unknown device or interface, else whether oper status changed.
    fn set_admin(&self, index: usize, if_index: u32, up: bool) -> Option<bool>;
    /// Spawns a fleet thread with a birth label (joined at stop).
    fn spawn(
        &self,
        label: Subsystem,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()>;
}

/// What gNMI reads of the fleet's configuration, which holds its [`GnmiConfig`] (so gNMI cannot name
/// the configuration's type without an import cycle; the configuration implements this).
pub trait Settings: Send + Sync {
    /// The `-gnmi-*` settings.
    fn gnmi(&self) -> &GnmiConfig;
    /// `-bind`: where each device's listener binds in per-port mode.
    fn bind(&self) -> IpAddr;
    /// `-device-net`: the range whose addresses name the devices (one listener for all).
    fn device_net(&self) -> Option<DeviceNet>;
}
