//! Hostile input and hostile neighbours: fuzzed surfaces, floods, smuggling, credentials, signals, low
//! limits and profiles from misbehaving programs. Loopback only; every loop bounded in count and time.
//!
//!   cargo test --test harden [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod busy_gate;
#[path = "../collect_support/mod.rs"]
mod collect_support;
#[path = "../common/mod.rs"]
mod common;
mod credentials;
#[path = "../fleet_common/mod.rs"]
mod fleet_common;
mod floods;
mod fuzz;
mod fuzz_surfaces;
#[path = "../harden_support/mod.rs"]
mod harden_support;
#[path = "../hostile_support/mod.rs"]
mod hostile_support;
mod inputs;
mod neighbours;
mod profile_hold;
mod profiles;
mod push_faults;
#[path = "../push_support/mod.rs"]
mod push_support;
mod remote_text;
mod serving;
mod signals;
mod smuggling;
mod snmp_reflection;
mod toggle;
