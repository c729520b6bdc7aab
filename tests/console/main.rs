//! The browser console: served pages checked in headless Chromium, and the fleet it shows.
//!
//!   cargo test --test console
//!
//! One test binary for the area (each file a module): one link instead of one a file. Support modules
//! shared with other areas live beside this folder and are included by path.
mod browser;
#[path = "../common/mod.rs"]
mod common;
#[path = "../console_support/mod.rs"]
mod console_support;
mod fleet;
