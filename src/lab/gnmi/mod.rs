//! gNMI on every simulated device (`-gnmi-port`) and gNMI dial-out (`-gnmi-dialout`): the two parts of
//! the lab that speak gRPC, each confined to its own OS thread running a tokio `current_thread` runtime
//! (the rest of nl6 stays blocking):
//!
//! | thread | label at birth | what it does |
//! |---|---|---|
//! | `gnmi` | `gnmi` | every device's gNMI target: Capabilities, Get, Set, Subscribe ([`server`], [`service`], [`subscribe`]) |
//! | `gnmi-dialout` | `gnmi-dialout` | every device's stream to the collector, reconnecting with backoff ([`dialout`]) |
//!
//! - [`proto`]: the messages, generated at build time from `proto/*.proto`; [`config`]: the `-gnmi-*`
//!   settings; [`path`]: paths and wildcards; [`schema`]: a device's OpenConfig leaves (the state SNMP
//!   serves); [`encode`]: JSON_IETF / JSON / PROTO values; [`target`]: which device a connection
//!   reached, credentials; [`load`]: `-traffic`'s gNMI client side; [`limits`]: what one request,
//!   stream and connection may cost; [`idle`]: the deadline that closes a silent connection.
//!
//! Never here: a socket on an address the configuration did not name, an unbounded queue, a thread per
//! device or per connection.
#![forbid(unsafe_code)]

use crate::lab::config::FleetConfig;
use crate::lab::device::Device;
use crate::labels::Subsystem;
use std::sync::Arc;

/// The `-gnmi-*` settings live with the fleet's configuration (below every protocol).
pub use crate::lab::config::gnmi as config;
pub mod dialout;
pub use crate::lab::gnmi_wire::{path, proto};
pub mod encode;
pub mod idle;
pub mod limits;
pub mod load;
pub mod schema;
pub mod server;
pub mod service;
pub mod subscribe;
pub mod target;

/// What the gNMI threads need of the fleet that runs them. The fleet implements it, so gNMI stays
/// below the fleet that assembles it (no import cycle), as `scenario::Host` does for scenarios.
pub trait Host: std::fmt::Debug + Send + Sync + 'static {
    /// Every device, by index.
    fn devices(&self) -> &[Arc<Device>];
    fn config(&self) -> &FleetConfig;
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
