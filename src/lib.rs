//! nl6: a lab tool that simulates network devices and profiles itself continuously, without eBPF.
//!
//! See README.md for use and ARCHITECTURE.md for the map.

pub mod profiling;
pub mod gate;
pub mod http;
