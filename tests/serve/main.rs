//! The pull surface over HTTP: pprof endpoints, REST, connections, browsers' rules, low limits, wall-clock
//! profiles and goroutine states.
//!
//!   cargo test --test serve [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod browsers;
#[path = "../common/mod.rs"]
mod common;
mod connections;
mod goroutine_states;
mod pull;
mod pull_low_limits;
mod pull_profiles;
mod pull_stacks_signal;
mod rest;
mod source_scan;
mod wall;
