//! gNMI on every simulated device (`-gnmi-port`) and gNMI dial-out (`-gnmi-dialout`): the two parts of
//! the lab that speak gRPC, each confined to its own OS thread running a tokio `current_thread` runtime
//! (the rest of nl6 stays blocking):
//!
//! | thread | label at birth | what it does |
//! |---|---|---|
//! | `gnmi` | `gnmi` | every device's gNMI target: Capabilities, Get, Set, Subscribe ([`server`], [`service`], [`subscribe`]) |
//! | `gnmi-dialout` | `gnmi-dialout` | every device's stream to the collector, reconnecting with backoff ([`dialout`]) |
//!
//! - [`proto`]: the messages, generated at build time from `proto/*.proto`; [`config`]: the `-gnmi-*`
//!   settings; [`path`]: paths and wildcards; [`schema`]: a device's OpenConfig leaves (the state SNMP
//!   serves); [`encode`]: JSON_IETF / JSON / PROTO values; [`target`]: which device a connection
//!   reached, credentials; [`load`]: `-traffic`'s gNMI client side.
//!
//! Never here: a socket on an address the configuration did not name, an unbounded queue, a thread per
//! device or per connection.
#![forbid(unsafe_code)]

pub mod config;
pub mod dialout;
pub mod encode;
pub mod load;
pub mod path;
pub mod proto;
pub mod schema;
pub mod server;
pub mod service;
pub mod subscribe;
pub mod target;
