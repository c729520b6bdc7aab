//! The simulated fleet against real peers: SNMP (net-snmp), traps (snmptrapd), syslog, NetFlow, the
//! traffic load, scale, stalls and catch-up, and the wall-clock soak.
//!
//!   cargo test --test fleet [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod alive_stats;
#[path = "../common/mod.rs"]
mod common;
#[path = "../fleet_common/mod.rs"]
mod fleet_common;
mod flow;
#[path = "../gnmi_support/mod.rs"]
mod gnmi_support;
mod ifxtable;
mod notify;
mod scale;
mod snmp;
mod snmp_batch;
mod stall_catchup;
mod syslog;
mod syslog_outage;
mod syslog_stall;
mod traffic;
mod wall_soak;
