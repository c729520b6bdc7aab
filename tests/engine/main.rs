//! The engine seen through real programs: nl6's own stacks proven call by call against the machine code,
//! symbols of the shipped binary, the embed example and a tokio + axum service built outside the workspace.
//!
//!   cargo test --test engine [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod callers;
#[path = "../callers_support/mod.rs"]
mod callers_support;
#[path = "../collect_support/mod.rs"]
mod collect_support;
#[path = "../common/mod.rs"]
mod common;
mod embed_example;
#[path = "../fleet_common/mod.rs"]
mod fleet_common;
#[path = "../../crates/nl6-profile/tests/support/maps.rs"]
mod maps;
#[path = "../push_support/mod.rs"]
mod push_support;
mod symbols_binary;
mod tokio_axum;
