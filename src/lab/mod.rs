//! The lab: a fleet of simulated network devices whose subsystems do real protocol work a real peer can
//! read, each on plain OS threads labelled as the profiling labels name them.
//!
//! One folder per protocol, over what they share (the order `tests/repo/layering.rs` checks, in
//! ARCHITECTURE.md's lab table):
//! - [`snmp`]: SNMPv2c: the BER codec, a device's MIB view (system, ifTable, ifXTable), the agent, the
//!   few serving threads and the binding of their sockets; [`trap`]: SNMPv2-Trap / INFORM;
//!   [`syslog`]: RFC 5424 over UDP or TCP (RFC 6587 framing); [`netflow`]: NetFlow v9;
//! - shared below them: [`send`]: sending a datagram as a device (from its own address under
//!   `-device-net`), with waits through [`crate::ready`]; [`device`]: one device's identity, interfaces
//!   and counters; [`device_net`]: the `-device-net` address range; [`target`]: where the fleet sends
//!   (`host:port`, `udp://`/`tcp://`); [`config`]: [`FleetConfig`] and its flag table; [`catchup`]: the
//!   scheduler's rule for missed periods (skipped, never replayed); [`lateness`]: how late the
//!   scheduler reaches its jobs (a histogram the API reads); [`wheel`]: the scheduler's timer wheel;
//! - above them: [`scenario`]: link-flap scenarios; [`schedule`]: the lab scheduler's periodic jobs; [`traffic`]: the `-traffic` load; [`fleet`]:
//!   [`Fleet::start`] / [`Fleet::stop`] and the thread map; [`fleet_error`]: why a fleet did not start;
//!   [`api`]: the REST routes (time text comes from [`crate::timefmt`]);
//! - [`gnmi`]: the gNMI target and dial-out, the only async code in nl6 (a tokio `current_thread`
//!   runtime inside each of their two threads), with its messages, path grammar and `-gnmi-*` settings;
//!   below the configuration, which holds those settings and checks `-gnmi-*` paths with its parser.
//!
//! Never here: traffic outside the configured bind address and targets.
#![forbid(unsafe_code)]

/// Records the thread's label at a named point, in unit tests only (compiles to nothing otherwise).
macro_rules! probe {
    ($point:literal) => {{
        #[cfg(test)]
        $crate::lab::label_probe::hit($point);
    }};
}
pub(crate) use probe;

pub mod api;
pub mod catchup;
pub mod config;
pub mod device;
pub mod device_net;
pub mod fleet;
pub mod fleet_error;
pub mod gnmi;
pub mod lateness;
pub mod netflow;
pub mod scenario;
pub mod schedule;
pub mod send;
pub mod snmp;
pub mod syslog;
pub mod target;
pub mod traffic;
pub mod trap;
pub mod wheel;

#[cfg(test)]
mod label_probe;
#[cfg(test)]
mod label_tests;

pub use config::{FleetConfig, FLAGS};
pub use fleet::{Fleet, FleetError};
