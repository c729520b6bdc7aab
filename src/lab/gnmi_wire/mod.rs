//! gNMI's wire types and path grammar, below the fleet's configuration and every protocol: [`proto`], the
//! messages and services generated at build time from `proto/`; [`path`], paths, their text form and
//! wildcards. The configuration checks `-gnmi-dialout-paths` with the same parser the target serves
//! with, so a bad path is a flag error, not a silent empty stream.
//!
//! Plain values only: no device state, no socket, no runtime.
#![forbid(unsafe_code)]

pub mod path;
pub mod proto;
