//! Where the push's profiles come from: the [`ProfileSource`] seam and its engine-backed implementation.
//!
//! The profiler thread asks a source for a CPU window, a heap profile, the thread stacks and, when the
//! push asks for it, a wall-clock window, already encoded as gzip'd pprof with their time bounds. [`EngineSource`] (the default) drives the real engine:
//! the SIGPROF sampler through `nl6_profile::cpu` (one window per interval, `take_window`), the sampling
//! allocator's snapshot (made a delta by the engine's godeltaprof-style `nl6_profile::delta::HeapDelta`:
//! `alloc_*` since the previous upload, `inuse_*` absolute, because the server never computes heap deltas
//! for `/ingest`), `nl6_profile::threads` and the wall-clock sampler `nl6_profile::wall` (a session per
//! window, ended and begun again at each window's end, encoded in fgprof's shape). Tests hand the pusher a fake source instead, so queue,
//! uploads, errors and flush are tested without the engine. A source never does network I/O.
#![forbid(unsafe_code)]

use crate::multipart::{
    HEAP_SAMPLE_TYPE_CONFIG, THREADS_SAMPLE_TYPE_CONFIG, WALL_SAMPLE_TYPE_CONFIG,
};
use nl6_profile::cpu::{self, CpuError};
use nl6_profile::delta::HeapDelta;
use nl6_profile::wall::{self, WallError};
use nl6_profile::{encode, heap, threads};
use std::time::{Duration, SystemTime};

/// What one upload holds; decides the query parameters and the `sample_type_config` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfileKind {
    /// A CPU window (`process_cpu` on the server; no `sample_type_config`).
    Cpu,
    /// The four heap types in one profile (`memory`).
    Heap,
    /// Every thread's stack, as a goroutine profile (`goroutines`).
    Threads,
    /// A wall-clock window in fgprof's shape (`fgprof`), when the push's target asks for it.
    Wall,
}

impl ProfileKind {
    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "cpu",
            ProfileKind::Heap => "heap",
            ProfileKind::Threads => "threads",
            ProfileKind::Wall => "wall-clock",
        }
    }

    /// The `sample_type_config` part, `None` for CPU (the server's default mapping already says `cpu`).
    pub fn sample_type_config(self) -> Option<&'static str> {
        match self {
            ProfileKind::Cpu => None,
            ProfileKind::Heap => Some(HEAP_SAMPLE_TYPE_CONFIG),
            ProfileKind::Threads => Some(THREADS_SAMPLE_TYPE_CONFIG),
            ProfileKind::Wall => Some(WALL_SAMPLE_TYPE_CONFIG),
        }
    }

    /// `(units, aggregationType, sampleRate)` as pyroscope-go sends them for the same profiles. The server
    /// ignores all three on the pprof path; they are sent for older servers and for people reading logs.
    pub fn query_meta(self) -> (&'static str, &'static str, u32) {
        match self {
            ProfileKind::Cpu => ("samples", "sum", cpu::DEFAULT_HZ),
            ProfileKind::Heap => ("", "", 100),
            ProfileKind::Threads => ("goroutines", "average", 0),
            ProfileKind::Wall => ("samples", "sum", wall::DEFAULT_HZ),
        }
    }
}

/// One encoded profile ready to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedProfile {
    pub kind: ProfileKind,
    /// gzip'd pprof.
    pub pprof_gz: Vec<u8>,
    /// Window start (`from`).
    pub from: SystemTime,
    /// Window end (`until`).
    pub until: SystemTime,
}

/// The profiles a push uploads. Only starting the CPU sampler can be refused; the push shows the refusal
/// as `last_error` and asks again at the next window.
pub trait ProfileSource: Send {
    /// Starts CPU sampling for the push's windows. `Err` when the sampler is refused: busy (another CPU
    /// profile holds it) or the OS said no.
    fn cpu_start(&mut self) -> Result<(), CpuError>;
    /// Ends the current CPU window and starts the next one; `None` when sampling is not running.
    fn cpu_window(&mut self) -> Option<EncodedProfile>;
    /// Stops CPU sampling and returns the last window; `None` when it was not running.
    fn cpu_stop(&mut self) -> Option<EncodedProfile>;
    /// The heap, `alloc_*` as deltas since the previous call, `inuse_*` absolute; `from` is the window
    /// start.
    fn heap(&mut self, from: SystemTime) -> EncodedProfile;
    /// Every thread's stack; `from` is the window start.
    fn threads(&mut self, from: SystemTime) -> EncodedProfile;
    /// Starts wall-clock sampling for the push's windows (only asked when the target wants them). `Err`
    /// when the sampler is refused: busy (a pull `/debug/fgprof` holds it) or the OS said no.
    fn wall_start(&mut self) -> Result<(), WallError>;
    /// Ends the current wall-clock window and starts the next one; `None` when sampling is not running
    /// (or the next window could not start: the push asks [`ProfileSource::wall_start`] again).
    fn wall_window(&mut self) -> Option<EncodedProfile>;
    /// Stops wall-clock sampling and returns the last window; `None` when it was not running.
    fn wall_stop(&mut self) -> Option<EncodedProfile>;
}

/// Why a source call gave the push no profile; shown as the push's `last_error`.
#[derive(Debug)]
pub enum SourceError {
    /// The CPU sampler refused a session (busy: another CPU profile holds it; or the OS said no). The push
    /// asks again at the next window.
    CpuRefused(CpuError),
    /// The wall-clock sampler refused a session (busy: a pull wall-clock profile holds it; or the OS said
    /// no). The push asks again at the next window.
    WallRefused(WallError),
    /// The engine panicked while producing `what` (the push thread survives it).
    Panicked { what: &'static str, message: String },
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::CpuRefused(e) => write!(f, "{e}"),
            SourceError::WallRefused(e) => write!(f, "{e}"),
            SourceError::Panicked { what, message } => write!(f, "{what}: {message}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// How long a thread-stack capture waits for each thread to answer.
const THREAD_CAPTURE_TIMEOUT: Duration = Duration::from_millis(500);

/// The real engine. Holds the CPU session while a push runs and the heap delta across pushes, so a
/// re-targeted push does not upload the same allocations twice.
#[derive(Default)]
pub struct EngineSource {
    session: Option<cpu::CpuSession>,
    wall: Option<wall::WallSession>,
    heap_delta: HeapDelta,
    cpu_hook: Option<crate::CpuHook>,
    wall_hook: Option<crate::WallHook>,
}

impl EngineSource {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands each CPU window it encodes to `hook` (none: nobody is told).
    pub fn with_cpu_hook(mut self, hook: Option<crate::CpuHook>) -> Self {
        self.cpu_hook = hook;
        self
    }

    /// Hands each wall-clock window it encodes to `hook` (none: nobody is told).
    pub fn with_wall_hook(mut self, hook: Option<crate::WallHook>) -> Self {
        self.wall_hook = hook;
        self
    }

    fn encode_cpu(&self, profile: &cpu::CpuProfile) -> EncodedProfile {
        let window = (profile.start, profile.duration);
        window_told(
            ProfileKind::Cpu,
            encode::cpu(profile),
            window,
            &self.cpu_hook,
        )
    }

    fn encode_wall(&self, profile: &wall::WallProfile) -> EncodedProfile {
        let window = (profile.start, profile.duration);
        window_told(
            ProfileKind::Wall,
            wall::encode(profile),
            window,
            &self.wall_hook,
        )
    }
}

/// An encoded sampler window, handed first to its hook: the console's flame graph shows the last CPU
/// or wall-clock profile, pulled or pushed, from one copy per window and no decoding.
fn window_told(
    kind: ProfileKind,
    pprof_gz: Vec<u8>,
    (start, duration): (SystemTime, Duration),
    hook: &Option<crate::CpuHook>,
) -> EncodedProfile {
    if let Some(hook) = hook {
        hook(&pprof_gz);
    }
    EncodedProfile {
        kind,
        pprof_gz,
        from: start,
        until: start + duration,
    }
}

impl ProfileSource for EngineSource {
    fn cpu_start(&mut self) -> Result<(), CpuError> {
        if self.session.is_none() {
            self.session = Some(cpu::start(cpu::DEFAULT_HZ)?);
        }
        Ok(())
    }

    fn cpu_window(&mut self) -> Option<EncodedProfile> {
        let window = self.session.as_mut().map(|s| s.take_window());
        window.map(|w| self.encode_cpu(&w))
    }

    fn cpu_stop(&mut self) -> Option<EncodedProfile> {
        let last = self.session.take().map(|s| s.stop());
        last.map(|w| self.encode_cpu(&w))
    }

    fn heap(&mut self, from: SystemTime) -> EncodedProfile {
        let snapshot = heap::snapshot();
        EncodedProfile {
            kind: ProfileKind::Heap,
            pprof_gz: self.heap_delta.next(&snapshot),
            from,
            until: SystemTime::now(),
        }
    }

    fn threads(&mut self, from: SystemTime) -> EncodedProfile {
        let stacks = threads::capture_all(THREAD_CAPTURE_TIMEOUT);
        EncodedProfile {
            kind: ProfileKind::Threads,
            pprof_gz: encode::goroutine(&stacks),
            from,
            until: SystemTime::now(),
        }
    }

    fn wall_start(&mut self) -> Result<(), WallError> {
        if self.wall.is_none() {
            self.wall = Some(wall::start()?);
        }
        Ok(())
    }

    fn wall_window(&mut self) -> Option<EncodedProfile> {
        let ended = self.wall.take()?.stop();
        // The engine's session has no window of its own: the next one starts at once. Refused (a pull
        // took the sampler in between), the push sees `None` next time and asks `wall_start` again.
        self.wall = wall::start().ok();
        Some(self.encode_wall(&ended))
    }

    fn wall_stop(&mut self) -> Option<EncodedProfile> {
        let last = self.wall.take().map(|s| s.stop());
        last.map(|w| self.encode_wall(&w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The composition root hands the console's slot to the push as a hook: every CPU window the push
    /// encodes reaches it, byte for byte (nothing else writes the console's state).
    #[test]
    fn every_cpu_window_reaches_the_hook() {
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = Arc::clone(&seen);
        let hook: crate::CpuHook = Arc::new(move |p: &[u8]| sink.lock().unwrap().push(p.to_vec()));
        let mut source = EngineSource::new().with_cpu_hook(Some(hook));
        // The sampler is one per process: wait (bounded) for any other test's profile to end.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while let Err(e) = source.cpu_start() {
            assert!(
                std::time::Instant::now() < deadline,
                "CPU sampler busy: {e}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let window = source.cpu_window().expect("a window");
        let last = source.cpu_stop().expect("the last window");
        assert_eq!(*seen.lock().unwrap(), [window.pprof_gz, last.pprof_gz]);
        assert!(EngineSource::new().cpu_window().is_none());
    }

    /// The same for wall-clock windows: each one the push encodes reaches the wall hook, and not the CPU one.
    #[test]
    fn every_wall_window_reaches_the_wall_hook() {
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let sink = Arc::clone(&seen);
        let hook: crate::WallHook = Arc::new(move |p: &[u8]| sink.lock().unwrap().push(p.to_vec()));
        let cpu_seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let cpu_sink = Arc::clone(&cpu_seen);
        let cpu_hook: crate::CpuHook =
            Arc::new(move |p: &[u8]| cpu_sink.lock().unwrap().push(p.to_vec()));
        let mut source = EngineSource::new()
            .with_cpu_hook(Some(cpu_hook))
            .with_wall_hook(Some(hook));
        // One wall-clock session per process: wait (bounded) for any other test's to end.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while let Err(e) = source.wall_start() {
            assert!(
                std::time::Instant::now() < deadline,
                "wall-clock sampler busy: {e}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(50));
        let window = source.wall_window().expect("a window");
        let last = source.wall_stop().expect("the last window");
        assert_eq!(*seen.lock().unwrap(), [window.pprof_gz, last.pprof_gz]);
        assert!(cpu_seen.lock().unwrap().is_empty());
    }
}
