//! nl6: a lab tool that simulates network devices and profiles itself continuously, without eBPF.
//!
//! See README.md for use and ARCHITECTURE.md for the map.

pub mod api;
pub mod cli;
pub mod collect;
pub mod console;
pub mod gate;
pub mod http;
pub mod lab;
pub mod profiling;
pub mod push;
pub mod report;
pub mod timefmt;
