//! `nl6 collect` and `nl6 report`: a fleet's profiles into a dated archive on disk or in a bucket
//! (SeaweedFS on loopback), confined writes, normalisation, and collection from a running nl6.
//!
//!   cargo test --test collect [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod bucket;
#[path = "../collect_support/mod.rs"]
mod collect_support;
#[path = "../common/mod.rs"]
mod common;
mod confined;
mod fleet;
mod from_nl6;
mod hostile_store;
mod normalize;
