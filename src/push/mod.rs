//! The continuous push to Grafana Pyroscope: [`PyroscopePusher`] implements the gate's
//! [`Pusher`](crate::gate::port::Pusher) port.
//!
//! A running push is **one thread**, `nl6-push`, that both collects and uploads. Every interval it takes
//! the CPU window from the engine's sampler (started at push start; when the sampler is busy with a pull
//! profile that window is skipped and counted as an error, and starting is retried at the next window), a
//! heap profile (`alloc_*` as deltas since the previous upload, `inuse_*` absolute) and every thread's
//! stack, and queues three upload jobs on a bounded queue (full: the oldest job is dropped and counted).
//! Between collections the same thread drains the queue, one `POST /ingest` at a time, each bounded by
//! the upload timeout ([`client`] holds the only outbound HTTP code). Collection never waits behind
//! uploads for long: an upload lasts at most the upload timeout, and the sampler keeps sampling meanwhile,
//! so windows stay contiguous.
//!
//! Every failure (transport, TLS, timeout, non-200, full queue, refused CPU, a source error) increments
//! `sdk_errors` and sets `last_error` (credentials scrubbed); the first of a push logs one line
//! `[profiling] push to <address> failing: <error>`. Stopping flushes: a final CPU window and heap
//! profile, then the queue, all before the deadline; past it the rest is abandoned with one log line, and
//! the thread is joined, so nothing is left running. `start` never touches the network.
//!
//! Submodules: [`ingest_url`] (URL joining, query, series name), [`multipart`] (the body),
//! [`source`] (the [`ProfileSource`] seam: engine-backed by default, fakes in tests). The whole stack
//! embedded with a labelled CPU burn is `crate::probe`, above this module.
#![forbid(unsafe_code)]

pub mod client;
pub mod ingest_url;
pub mod multipart;
pub mod source;
pub mod tls;

pub use source::{EncodedProfile, EngineSource, ProfileKind, ProfileSource, SourceError};

use crate::gate::port::{PushRun, PushStatus, PushTarget, Pusher};
use client::Client;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Where log lines go (one line per call, no trailing newline). Defaults to stderr.
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// The `hostname` label's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hostname {
    /// The kernel's hostname (`/proc/sys/kernel/hostname`), read at each push start.
    Os,
    /// A fixed value (tests, or an operator's override).
    Fixed(String),
}

impl Hostname {
    fn resolve(&self) -> String {
        match self {
            Hostname::Fixed(h) => h.clone(),
            Hostname::Os => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .ok()
                .filter(|s| !s.is_empty())
                .or_else(|| std::env::var("HOSTNAME").ok())
                .unwrap_or_else(|| "unknown".to_string()),
        }
    }
}

/// How pushes run. Fields are private; each `with_*` documents its default.
#[derive(Clone)]
pub struct PushConfig {
    upload_timeout: Duration,
    queue_capacity: usize,
    hostname: Hostname,
    version: String,
    log: LogSink,
    cpu_hook: Option<CpuHook>,
}

/// What is told of each CPU window the push encodes (the console keeps the last one).
pub type CpuHook = Arc<dyn Fn(&[u8]) + Send + Sync>;

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            upload_timeout: Duration::from_secs(10),
            queue_capacity: 20,
            hostname: Hostname::Os,
            version: env!("CARGO_PKG_VERSION").to_string(),
            log: Arc::new(|line: &str| eprintln!("{line}")),
            cpu_hook: None,
        }
    }
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("upload_timeout", &self.upload_timeout)
            .field("queue_capacity", &self.queue_capacity)
            .field("hostname", &self.hostname)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl PushConfig {
    /// The whole-upload bound (resolve, connect, TLS, send, answer). Defaults to 10 s.
    pub fn with_upload_timeout(mut self, t: Duration) -> Self {
        self.upload_timeout = t;
        self
    }
    /// Upload jobs waiting at most (at least 1). Defaults to 20.
    pub fn with_queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n.max(1);
        self
    }
    /// The `hostname` label. Defaults to [`Hostname::Os`].
    pub fn with_hostname(mut self, h: Hostname) -> Self {
        self.hostname = h;
        self
    }
    /// The `version` label and `User-Agent: nl6/<version>`. Defaults to the crate version.
    pub fn with_version(mut self, v: impl Into<String>) -> Self {
        self.version = v.into();
        self
    }
    /// Hands each CPU window encoded (gzip'd pprof) to `hook`. Defaults to none.
    pub fn with_cpu_hook(mut self, hook: CpuHook) -> Self {
        self.cpu_hook = Some(hook);
        self
    }
    /// Where log lines go. Defaults to stderr.
    pub fn with_log(mut self, log: LogSink) -> Self {
        self.log = log;
        self
    }
    pub fn upload_timeout(&self) -> Duration {
        self.upload_timeout
    }
    pub fn queue_capacity(&self) -> usize {
        self.queue_capacity
    }
}

/// The gate's pusher: starts one `nl6-push` thread per push.
pub struct PyroscopePusher {
    config: PushConfig,
    source: Arc<Mutex<Box<dyn ProfileSource>>>,
}

impl PyroscopePusher {
    /// A pusher over the real engine.
    pub fn new(config: PushConfig) -> Self {
        let source = EngineSource::new().with_cpu_hook(config.cpu_hook.clone());
        Self::with_source(config, Box::new(source))
    }

    /// A pusher over any source (tests pass fakes). The source outlives pushes: its heap delta state
    /// carries over a re-target.
    pub fn with_source(config: PushConfig, source: Box<dyn ProfileSource>) -> Self {
        PyroscopePusher {
            config,
            source: Arc::new(Mutex::new(source)),
        }
    }
}

impl Pusher for PyroscopePusher {
    fn start(&self, target: PushTarget) -> Result<Box<dyn PushRun>, String> {
        if target.interval.is_zero() {
            return Err("push interval must be positive".to_string());
        }
        let name = ingest_url::series_name(&self.config.hostname.resolve(), &self.config.version);
        let client = Client::new(
            &target,
            name,
            &self.config.version,
            self.config.upload_timeout,
            &|k| std::env::var(k).ok(),
        )
        .map_err(|e| e.to_string())?;
        let address = client.display_address();
        if let Some(proxy) = client.proxy() {
            (self.config.log)(&format!(
                "[profiling] push to {address} goes through proxy {proxy}"
            ));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            address,
            log: self.config.log.clone(),
        });
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            client,
            source: self.source.clone(),
            rx,
            shared: shared.clone(),
            interval: target.interval,
            upload_timeout: self.config.upload_timeout,
            capacity: self.config.queue_capacity,
            queue: VecDeque::new(),
            cpu_running: false,
        };
        let handle = nl6_profile::threads::spawn_recorded("nl6-push", move || worker.run())
            .map_err(|e| format!("starting the push thread: {e}"))?;
        Ok(Box::new(PushHandle {
            tx,
            handle: Some(handle),
            shared,
        }))
    }
}

enum Control {
    /// Flush before this instant, then end.
    Stop(Instant),
}

#[derive(Default)]
struct State {
    status: PushStatus,
    failure_logged: bool,
}

/// What the push thread and the handle share: counters behind a short-held lock.
struct Shared {
    state: Mutex<State>,
    address: String,
    log: LogSink,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, error: String) {
        let first = {
            let mut s = self.lock();
            s.status.sdk_errors += 1;
            s.status.last_error = Some(error.clone());
            !std::mem::replace(&mut s.failure_logged, true)
        };
        if first {
            (self.log)(&format!(
                "[profiling] push to {} failing: {error}",
                self.address
            ));
        }
    }

    fn succeed(&self) {
        let mut s = self.lock();
        s.status.uploads += 1;
        s.status.last_upload_at = Some(SystemTime::now());
    }
}

/// The running push as the gate holds it.
struct PushHandle {
    tx: mpsc::Sender<Control>,
    handle: Option<JoinHandle<bool>>,
    shared: Arc<Shared>,
}

impl PushHandle {
    fn finish(&mut self, deadline: Instant) -> bool {
        let Some(handle) = self.handle.take() else {
            return true;
        };
        // A send error means the thread already ended; joining still reaps it.
        let _ = self.tx.send(Control::Stop(deadline));
        match handle.join() {
            Ok(flushed) => flushed,
            Err(_) => {
                (self.shared.log)(&format!(
                    "[profiling] push to {}: the push thread panicked",
                    self.shared.address
                ));
                false
            }
        }
    }
}

impl PushRun for PushHandle {
    fn status(&self) -> PushStatus {
        self.shared.lock().status.clone()
    }

    fn stop(mut self: Box<Self>, budget: Duration) -> bool {
        self.finish(Instant::now() + budget)
    }

    fn stop_with_status(mut self: Box<Self>, budget: Duration) -> (bool, PushStatus) {
        let flushed = self.finish(Instant::now() + budget);
        (flushed, self.status())
    }
}

impl Drop for PushHandle {
    // A push dropped without `stop` ends at once (no flush), and its thread is still joined.
    fn drop(&mut self) {
        self.finish(Instant::now());
    }
}

/// The `nl6-push` thread's state.
struct Worker {
    client: Client,
    source: Arc<Mutex<Box<dyn ProfileSource>>>,
    rx: mpsc::Receiver<Control>,
    shared: Arc<Shared>,
    interval: Duration,
    upload_timeout: Duration,
    capacity: usize,
    queue: VecDeque<EncodedProfile>,
    cpu_running: bool,
}

impl Worker {
    fn run(mut self) -> bool {
        let mut window_start = SystemTime::now();
        self.cpu_begin();
        let mut next_tick = Instant::now() + self.interval;
        loop {
            match self.rx.try_recv() {
                Ok(Control::Stop(deadline)) => return self.flush(deadline, window_start),
                Err(TryRecvError::Disconnected) => return self.flush(Instant::now(), window_start),
                Err(TryRecvError::Empty) => {}
            }
            let now = Instant::now();
            if now >= next_tick {
                window_start = self.collect(window_start);
                next_tick += self.interval;
                if next_tick <= now {
                    // Far behind (uploads hung for several intervals): skip ticks rather than burst.
                    next_tick = now + self.interval;
                }
                continue;
            }
            if let Some(job) = self.queue.pop_front() {
                self.upload(&job, self.upload_timeout);
                continue;
            }
            match self.rx.recv_timeout(next_tick - now) {
                Ok(Control::Stop(deadline)) => return self.flush(deadline, window_start),
                Err(RecvTimeoutError::Disconnected) => {
                    return self.flush(Instant::now(), window_start)
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Runs one source call, turning a panic into [`SourceError::Panicked`] so a broken engine cannot
    /// kill the thread.
    fn with_source<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut dyn ProfileSource) -> T,
    ) -> Result<T, SourceError> {
        let mut guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        catch_unwind(AssertUnwindSafe(|| f(guard.as_mut()))).map_err(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            SourceError::Panicked { what, message }
        })
    }

    fn cpu_begin(&mut self) {
        match self.with_source("cpu profile", |s| s.cpu_start()) {
            Ok(Ok(())) => self.cpu_running = true,
            Ok(Err(refused)) => self.fail(SourceError::CpuRefused(refused)),
            Err(panicked) => self.fail(panicked),
        }
    }

    /// Ends the window that began at `window_start`; returns the next window's start.
    fn collect(&mut self, window_start: SystemTime) -> SystemTime {
        let now = SystemTime::now();
        if self.cpu_running {
            match self.with_source("cpu profile", |s| s.cpu_window()) {
                Ok(Some(p)) => self.enqueue(p),
                Ok(None) => self.cpu_running = false,
                Err(panicked) => self.fail(panicked),
            }
        }
        if !self.cpu_running {
            self.cpu_begin();
        }
        let heap = self.with_source("heap profile", |s| s.heap(window_start));
        self.enqueue_or_fail(heap);
        let threads = self.with_source("thread stacks", |s| s.threads(window_start));
        self.enqueue_or_fail(threads);
        now
    }

    fn enqueue_or_fail(&mut self, r: Result<EncodedProfile, SourceError>) {
        match r {
            Ok(p) => self.enqueue(p),
            Err(e) => self.fail(e),
        }
    }

    /// Records a source's failure as the push's `last_error` (scrubbed like every error it shows).
    fn fail(&self, e: SourceError) {
        self.shared.fail(self.client.scrub(&e.to_string()));
    }

    fn enqueue(&mut self, profile: EncodedProfile) {
        if self.queue.len() >= self.capacity {
            if let Some(dropped) = self.queue.pop_front() {
                self.shared.fail(format!(
                    "upload queue full ({} jobs): dropped the oldest {} profile",
                    self.capacity,
                    dropped.kind.name()
                ));
            }
        }
        self.queue.push_back(profile);
    }

    /// Uploads one job; `true` on success.
    fn upload(&self, job: &EncodedProfile, timeout: Duration) -> bool {
        match self.client.upload(job, timeout) {
            Ok(()) => {
                self.shared.succeed();
                true
            }
            Err(e) => {
                self.shared.fail(e.to_string());
                false
            }
        }
    }

    /// The final window and heap profile, then the queue, before `deadline`. `false` when abandoned.
    fn flush(mut self, deadline: Instant, window_start: SystemTime) -> bool {
        if self.cpu_running {
            // Always stopped, even past the deadline: the sampler must be free for the next user.
            let last = self.with_source("cpu profile", |s| s.cpu_stop());
            self.cpu_running = false;
            match last {
                Ok(Some(p)) => self.enqueue(p),
                Ok(None) => {}
                Err(panicked) => self.fail(panicked),
            }
        }
        if Instant::now() < deadline {
            let heap = self.with_source("heap profile", |s| s.heap(window_start));
            self.enqueue_or_fail(heap);
        }
        let mut abandoned = false;
        while !self.queue.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                abandoned = true;
                break;
            }
            let job = self.queue.pop_front().expect("queue is not empty");
            let clipped = left < self.upload_timeout;
            if !self.upload(&job, left.min(self.upload_timeout))
                && clipped
                && Instant::now() >= deadline
            {
                abandoned = true;
            }
        }
        if abandoned {
            (self.shared.log)(&format!(
                "[profiling] push to {}: flush abandoned at the deadline, {} queued uploads dropped",
                self.shared.address,
                self.queue.len()
            ));
        }
        !abandoned
    }
}
