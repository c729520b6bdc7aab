//! The lab: a fleet of simulated network devices whose subsystems do real protocol work a real peer can
//! read, each on plain OS threads labelled as the profiling labels name them.
//!
//! - [`ber`]: the BER codec; [`snmp`]: SNMPv2c messages, the agent, and its few serving threads
//!   ([`snmp::serve`]); [`mib`]: a device's MIB view over one OID layout sorted once; [`device`]: one
//!   device's identity, interfaces and counters; [`device_net`]: the `-device-net` address range;
//! - [`trap`]: SNMPv2-Trap / INFORM; [`syslog`]: RFC 5424 over UDP or TCP (RFC 6587 framing);
//!   [`netflow`]: NetFlow v9; [`scenario`]: link-flap scenarios; [`traffic`]: the `-traffic` load;
//! - [`config`]: [`FleetConfig`] and its flag table; [`target`]: where the fleet sends (`host:port`,
//!   `udp://`/`tcp://`), shared by config and syslog; [`fleet`]: [`Fleet::start`] / [`Fleet::stop`] and the
//!   thread map; [`listen`]: binding the SNMP sockets; [`fleet_error`]: why a fleet did not start;
//!   [`catchup`]: the scheduler's rule for missed periods (skipped, never replayed);
//!   [`api`]: the REST routes (time text comes from [`crate::timefmt`]);
//! - [`gnmi`]: the gNMI target and dial-out, the only async code in nl6 (a tokio `current_thread`
//!   runtime inside each of their two threads).
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
pub mod ber;
pub mod catchup;
pub mod config;
pub mod device;
pub mod device_net;
pub mod fleet;
pub mod fleet_error;
pub mod gnmi;
pub mod listen;
pub mod mib;
pub mod netflow;
pub mod scenario;
pub mod snmp;
pub mod syslog;
pub mod target;
pub mod traffic;
pub mod trap;

#[cfg(test)]
mod label_probe;
#[cfg(test)]
mod label_tests;

pub use config::{FleetConfig, FLAGS};
pub use fleet::{Fleet, FleetError};
