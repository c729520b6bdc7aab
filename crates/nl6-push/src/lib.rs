//! Continuous profiling for a Rust service: every interval, the [`nl6_profile`] engine's CPU window, heap
//! profile, every thread's stack and, when [`Target::with_wall`] asks, its wall-clock window are uploaded to Grafana Pyroscope's `/ingest` (the HTTP API
//! pyroscope-go and Grafana Alloy use), on one thread named `nl6-push`, with a flush when it stops.
//!
//! ```no_run
//! use std::time::Duration;
//! use nl6_push::{PushConfig, Pusher, Target};
//!
//! #[global_allocator] // optional: heap profiles (the `memory` series)
//! static ALLOC: nl6_profile::heap::SamplingAllocator = nl6_profile::heap::SamplingAllocator::system();
//!
//! let pusher = Pusher::new(PushConfig::new("my-service").with_version(env!("CARGO_PKG_VERSION")));
//! let push = pusher.start(Target::new("http://127.0.0.1:4040", Duration::from_secs(15)))?;
//! // … the service runs …
//! let (flushed, status) = push.stop_with_status(Duration::from_secs(5));
//! println!("flushed: {flushed}, uploads: {}, errors: {}", status.uploads, status.sdk_errors);
//! # Ok::<(), nl6_push::StartError>(())
//! ```
//!
//! What a push does to the process: one thread (`nl6-push`; plus `nl6-push-dns` for a moment per upload
//! when the address is a host name), the engine's CPU sampler held for as long as the push runs (a pull
//! `profile?seconds=N` is refused meanwhile, and the push's window for that interval is skipped and
//! counted), and outbound HTTP(S) to the target only. `start` never touches the network; errors of the
//! running push are counted in [`Status`], logged once per push through the [`LogSink`], and never
//! panic the service.
//!
//! Modules: [`config`] (what a push is told), [`push`] (the running push), [`source`] (where profiles
//! come from: the engine, or a fake in tests), [`client`] (the one `POST /ingest`), [`ingest_url`] and
//! [`multipart`] (the request), [`tls`] (rustls with the configured roots). The URL splitter and the
//! escaping of remote text are the `nl6-text` crate's, shared with nl6.
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod ingest_url;
pub mod multipart;
pub mod push;
pub mod source;
pub mod tls;

pub use client::PushError;
pub use config::{CpuHook, Hostname, LogSink, PushConfig, Target, WallHook};
pub use push::{Push, Pusher, Status, THREAD_NAME};
pub use source::{EncodedProfile, EngineSource, ProfileKind, ProfileSource, SourceError};

use std::fmt;

/// Why [`Pusher::start`] did not start a push.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The interval was zero.
    Interval,
    /// The address or the environment's proxy cannot be used.
    Client(PushError),
    /// The `nl6-push` thread could not be started.
    Thread(std::io::Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Interval => write!(f, "push interval must be positive"),
            StartError::Client(e) => write!(f, "{e}"),
            StartError::Thread(e) => write!(f, "starting the push thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Interval => None,
            StartError::Client(e) => Some(e),
            StartError::Thread(e) => Some(e),
        }
    }
}
