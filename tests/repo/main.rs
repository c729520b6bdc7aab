//! The repository itself: module layering, no file reaching outside the repository, and Go-style flags.
//!
//!   cargo test --test repo
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
#[path = "../common/mod.rs"]
mod common;
mod flags_go_style;
mod layering;
mod self_contained;
