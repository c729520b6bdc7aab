//! The narrow interface between the gate and the push: the gate decides *whether* and *where* to push; a
//! [`Pusher`] does it. The gate never does I/O itself, so it is tested with a fake pusher.
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime};

/// Where and how to push. Credentials are present only when the address is the startup flag's.
#[derive(Clone, PartialEq, Eq)]
pub struct PushTarget {
    /// The server address as given (http or https URL, validated).
    pub address: String,
    /// `(user, password)` from the flags, bound to the flag's address.
    pub basic_auth: Option<(String, String)>,
    /// `X-Scope-OrgID`, bound like the credentials.
    pub tenant: Option<String>,
    /// Upload cadence.
    pub interval: Duration,
    /// Also push a wall-clock window each interval (`-profiling-wall`).
    pub wall: bool,
}

impl std::fmt::Debug for PushTarget {
    // Never prints the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushTarget")
            .field("address", &self.address)
            .field("basic_auth", &self.basic_auth.as_ref().map(|_| "<set>"))
            .field("tenant", &self.tenant.as_ref().map(|_| "<set>"))
            .field("interval", &self.interval)
            .field("wall", &self.wall)
            .finish()
    }
}

/// What a running push reports for `GET /api/v1/profiling`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushStatus {
    /// Failures since this push started (uploads, refused CPU windows, full queue).
    pub sdk_errors: u64,
    /// The newest failure, never containing credentials.
    pub last_error: Option<String>,
    /// Successful uploads since this push started.
    pub uploads: u64,
    /// When the newest successful upload finished.
    pub last_upload_at: Option<SystemTime>,
}

/// Why a [`Pusher`] did not start a push. Its message is what the POST's 500 and `GET`'s `last_error`
/// say.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The push refused its target (the address, the environment's proxy, the interval): the push's
    /// own error, which names what to change.
    Refused(Box<dyn std::error::Error + Send + Sync>),
    /// The push's thread could not be started (`RLIMIT_NPROC`, out of memory); retry later.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Refused(e) => write!(f, "{e}"),
            StartError::Thread(e) => write!(f, "starting the push thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Refused(e) => Some(e.as_ref()),
            StartError::Thread(e) => Some(e),
        }
    }
}

/// Starts pushes. Implemented by [`crate::push`]; tests use a fake.
pub trait Pusher: Send + Sync {
    /// Starts pushing to `target`. Never touches the network before returning; an `Err` is a push that
    /// could not start (the POST answers 500 with it as `last_error`).
    fn start(&self, target: PushTarget) -> Result<Box<dyn PushRun>, StartError>;
}

/// A running push.
pub trait PushRun: Send + Sync {
    /// Counters and the last error, read without waiting behind uploads.
    fn status(&self) -> PushStatus;
    /// Flushes (a final window, then the queue) within `budget`, then stops the profiler thread. Returns
    /// `false` when the flush was abandoned at the deadline.
    fn stop(self: Box<Self>, budget: Duration) -> bool;
    /// [`PushRun::stop`], and the push's figures as it ended (after the flush's uploads) so they stay
    /// visible once it is gone. The default reads them before stopping.
    fn stop_with_status(self: Box<Self>, budget: Duration) -> (bool, PushStatus) {
        let status = self.status();
        (self.stop(budget), status)
    }
}

/// A pusher whose runs do nothing and report nothing: what the binary uses until [`crate::push`] provides
/// the real one, and what tests use when the push is not under test.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopPusher;

struct NoopRun;

impl Pusher for NoopPusher {
    fn start(&self, _target: PushTarget) -> Result<Box<dyn PushRun>, StartError> {
        Ok(Box::new(NoopRun))
    }
}

impl PushRun for NoopRun {
    fn status(&self) -> PushStatus {
        PushStatus::default()
    }
    fn stop(self: Box<Self>, _budget: Duration) -> bool {
        true
    }
}
