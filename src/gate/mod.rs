//! The profiling gate: whether nl6 profiles, and where it pushes.
//!
//! - [`state`]: the state machine as plain values (request + state + startup → state + actions + log line).
//! - [`control`]: the thread-safe [`control::Gate`] that runs those actions through a [`port::Pusher`],
//!   publishes a snapshot for `GET` and keeps the revert timer.
//! - durations are Go syntax through [`crate::timefmt::parse_positive_go_duration`]; [`address`]: push-address rules and normalisation.
//! - [`port`]: the narrow interface the push implements.
//! - [`turn`]: the first-come-first-served transition lock with a bounded wait (POSTs answer 409 rather
//!   than wait behind a long flush).
//!
//! The gate never does network I/O itself: only the push behind [`port::Pusher`] talks to the network.
#![forbid(unsafe_code)]

pub mod address;
pub mod control;
pub mod port;
pub mod state;
pub mod turn;
