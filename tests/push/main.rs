//! The Pyroscope push: to the repository's /ingest double and Alloy, over TLS, from the binary and from
//! the push crate's example.
//!
//!   cargo test --test push [-- MODULE::]
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod alloy;
mod binary;
#[path = "../common/mod.rs"]
mod common;
mod crate_example;
// Both this and `common` include the engine crate's tests/support/go_pprof.rs.
#[allow(clippy::duplicate_mod)]
#[path = "../../crates/nl6-profile/tests/support/encode_check.rs"]
mod engine_encode_support;
mod ingest_double;
#[path = "../push_support/mod.rs"]
mod push_support;
mod suite;
mod tls_lab_cert;
mod wall;
