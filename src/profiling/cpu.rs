//! STUB: the CPU sampler. Owner: engine-cpu helper. Public interface below is the contract.
use super::Stack;
use std::time::{Duration, SystemTime};

/// Default sampling rate, as Go's.
pub const DEFAULT_HZ: u32 = 100;

/// Why a CPU profile could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuError {
    /// Another CPU profile is running (Display: "cpu profiling already in use").
    Busy,
    /// The OS refused a timer or the signal handler (Display names the call and errno).
    Os(String),
}

impl std::fmt::Display for CpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuError::Busy => f.write_str("cpu profiling already in use"),
            CpuError::Os(m) => f.write_str(m),
        }
    }
}
impl std::error::Error for CpuError {}

/// One aggregated CPU sample: a stack, the subsystem label index at sample time (0 = none), and how many
/// signals landed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSample {
    pub stack: Stack,
    pub label: u16,
    pub count: u64,
}

/// The result of a profiling window.
#[derive(Debug, Clone)]
pub struct CpuProfile {
    pub start: SystemTime,
    pub duration: Duration,
    /// Nanoseconds of CPU one sample stands for (1e9 / hz).
    pub period_ns: u64,
    pub samples: Vec<CpuSample>,
    /// Samples dropped because buffers were full.
    pub lost: u64,
}

/// A running CPU profile. Dropping it stops sampling (same as [`CpuSession::stop`]).
pub struct CpuSession {
    _private: (),
}

/// Starts sampling every thread at `hz`. Returns [`CpuError::Busy`] if a session exists.
pub fn start(hz: u32) -> Result<CpuSession, CpuError> {
    let _ = hz;
    todo!()
}

impl CpuSession {
    /// Returns what was sampled since start (or the previous window) and keeps sampling.
    pub fn take_window(&mut self) -> CpuProfile {
        todo!()
    }
    /// Stops sampling and returns the last window.
    pub fn stop(self) -> CpuProfile {
        todo!()
    }
}

/// True while a CPU session exists.
pub fn is_running() -> bool {
    todo!()
}
