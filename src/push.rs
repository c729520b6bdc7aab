//! nl6's continuous push to Grafana Pyroscope: [`PyroscopePusher`] implements the gate's
//! [`Pusher`](crate::gate::port::Pusher) port over the `nl6-push` crate, which owns everything else (the
//! `nl6-push` thread, the bounded queue, the `/ingest` uploads, TLS, proxies, flush on stop, error
//! counting). This module only names the service (`service_name="nl6"`, nl6's version) and converts the
//! gate's target and status to and from the crate's. The whole stack embedded with a labelled CPU burn is
//! `crate::probe`, above this module.
#![forbid(unsafe_code)]

use crate::gate::port::{PushRun, PushStatus, PushTarget, Pusher, StartError};
use std::time::Duration;

pub use nl6_push::{client, ingest_url, multipart, source, tls};
pub use nl6_push::{
    CpuHook, EncodedProfile, EngineSource, Hostname, LogSink, ProfileKind, ProfileSource,
    PushConfig, SourceError, WallHook,
};

/// The service name every nl6 push uses (`service_name="nl6"` on the server, `User-Agent: nl6/…`).
pub const SERVICE_NAME: &str = "nl6";

/// nl6's push config: [`SERVICE_NAME`] as the series and the spy name, and nl6's version; the rest at the
/// crate's defaults.
pub fn config() -> PushConfig {
    PushConfig::new(SERVICE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_spy_name(SERVICE_NAME)
}

/// The gate's pusher: one `nl6-push` thread per push.
#[derive(Debug)]
pub struct PyroscopePusher(nl6_push::Pusher);

impl PyroscopePusher {
    /// A pusher over the real engine.
    pub fn new(config: PushConfig) -> Self {
        PyroscopePusher(nl6_push::Pusher::new(config))
    }

    /// A pusher over any source (tests pass fakes). The source outlives pushes: its heap delta state
    /// carries over a re-target.
    pub fn with_source(config: PushConfig, source: Box<dyn ProfileSource>) -> Self {
        PyroscopePusher(nl6_push::Pusher::with_source(config, source))
    }
}

impl Pusher for PyroscopePusher {
    fn start(&self, gate_target: PushTarget) -> Result<Box<dyn PushRun>, StartError> {
        let mut target = nl6_push::Target::new(gate_target.address, gate_target.interval)
            .with_wall(gate_target.wall);
        target.basic_auth = gate_target.basic_auth;
        target.tenant = gate_target.tenant;
        let push = self.0.start(target).map_err(|e| match e {
            nl6_push::StartError::Thread(e) => StartError::Thread(e),
            e => StartError::Refused(Box::new(e)),
        })?;
        Ok(Box::new(Run(push)))
    }
}

/// A running push as the gate holds it.
struct Run(nl6_push::Push);

fn status_of(s: nl6_push::Status) -> PushStatus {
    PushStatus {
        sdk_errors: s.sdk_errors,
        last_error: s.last_error,
        uploads: s.uploads,
        last_upload_at: s.last_upload_at,
    }
}

impl PushRun for Run {
    fn status(&self) -> PushStatus {
        status_of(self.0.status())
    }

    fn stop(self: Box<Self>, budget: Duration) -> bool {
        self.0.stop(budget)
    }

    fn stop_with_status(self: Box<Self>, budget: Duration) -> (bool, PushStatus) {
        let (flushed, status) = self.0.stop_with_status(budget);
        (flushed, status_of(status))
    }
}
