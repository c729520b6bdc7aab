//! gNMI: the target read by pygnmi (Get, Subscribe, TLS), dial-out to a grpcio collector (and to hostile
//! ones), and the load.
//!
//!   cargo test --test gnmi [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
#[path = "../common/mod.rs"]
mod common;
mod dialout;
mod dialout_recover;
#[path = "../fleet_common/mod.rs"]
mod fleet_common;
#[path = "../gnmi_support/mod.rs"]
mod gnmi_support;
mod hostile;
mod load;
mod subscribe;
mod target;
