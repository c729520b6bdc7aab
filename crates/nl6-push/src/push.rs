//! The running push: [`Pusher`] starts one, [`Push`] is its handle, and its `nl6-push` thread collects
//! and uploads.
//!
//! A running push is **one thread**, `nl6-push`, that both collects and uploads. Every interval it takes
//! the CPU window from the engine's sampler (started at push start; when the sampler is busy with a pull
//! profile that window is skipped and counted as an error, and starting is retried at the next window), a
//! heap profile (`alloc_*` as deltas since the previous upload, `inuse_*` absolute) and every thread's
//! stack, and, when the target asks for it ([`Target::wall`]), the wall-clock window (the wall-clock
//! sampler is held like the CPU one: refused, that window is skipped and counted, and starting is retried
//! at the next), and queues those upload jobs on a bounded queue (full: the oldest job is dropped and
//! counted).
//! Between collections the same thread drains the queue, one `POST /ingest` at a time, each bounded by
//! the upload timeout ([`crate::client`] holds the only HTTP code). Collection never waits behind
//! uploads for long: an upload lasts at most the upload timeout, and the sampler keeps sampling meanwhile,
//! so windows stay contiguous.
//!
//! Every failure (transport, TLS, timeout, non-200, full queue, refused CPU, a source error) increments
//! `sdk_errors` and sets `last_error` (credentials scrubbed); the first of a push logs one line
//! `[profiling] push to <address> failing: <error>`. Stopping flushes: a final CPU window (and
//! wall-clock window) and heap profile, then the queue, all before the deadline; past it the rest is abandoned with one log line, and
//! the thread is joined, so nothing is left running. `start` never touches the network.
#![forbid(unsafe_code)]

use crate::client::Client;
use crate::config::{LogSink, PushConfig, Target};
use crate::ingest_url;
use crate::source::{EncodedProfile, EngineSource, ProfileSource, SourceError};
use crate::StartError;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// The name of the push's one thread.
pub const THREAD_NAME: &str = "nl6-push";

/// Starts pushes: one `nl6-push` thread per [`Pusher::start`]. Holds the profile source across pushes
/// (its heap delta carries over a re-target, so no allocation is uploaded twice).
pub struct Pusher {
    config: PushConfig,
    source: Arc<Mutex<Box<dyn ProfileSource>>>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Pusher {
    /// A pusher over the real engine (`nl6_profile`'s CPU sampler, sampling allocator and threads).
    pub fn new(config: PushConfig) -> Self {
        let source = EngineSource::new()
            .with_cpu_hook(config.cpu_hook.clone())
            .with_wall_hook(config.wall_hook.clone());
        Self::with_source(config, Box::new(source))
    }

    /// A pusher over any source (tests pass fakes). The source outlives pushes: its heap delta state
    /// carries over a re-target.
    pub fn with_source(config: PushConfig, source: Box<dyn ProfileSource>) -> Self {
        Pusher {
            config,
            source: Arc::new(Mutex::new(source)),
        }
    }

    /// The config every push of this pusher runs with.
    pub fn config(&self) -> &PushConfig {
        &self.config
    }

    /// Starts pushing to `target`; never touches the network before returning (the first upload is one
    /// interval later). `Err` when the interval is zero, the address or the environment's proxy cannot
    /// be used, or the thread cannot start.
    pub fn start(&self, target: Target) -> Result<Push, StartError> {
        if target.interval.is_zero() {
            return Err(StartError::Interval);
        }
        let c = &self.config;
        let name = ingest_url::series_name(&c.application, &c.hostname.resolve(), &c.version);
        let user_agent = format!(
            "{}/{}",
            ingest_url::sanitize_label_value(&c.application),
            c.version
        );
        let client = Client::new(
            &target,
            name,
            &c.spy_name,
            &user_agent,
            c.upload_timeout,
            &|k| std::env::var(k).ok(),
        )
        .map_err(StartError::Client)?;
        let address = client.display_address();
        if let Some(proxy) = client.proxy() {
            (c.log)(&format!(
                "[profiling] push to {address} goes through proxy {proxy}"
            ));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            address,
            log: c.log.clone(),
        });
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            client,
            source: self.source.clone(),
            rx,
            shared: shared.clone(),
            interval: target.interval,
            upload_timeout: c.upload_timeout,
            capacity: c.queue_capacity,
            queue: VecDeque::new(),
            cpu_running: false,
            wall: target.wall,
            wall_running: false,
        };
        let handle = nl6_profile::threads::spawn_recorded(THREAD_NAME, move || worker.run())
            .map_err(StartError::Thread)?;
        Ok(Push {
            tx,
            handle: Some(handle),
            shared,
        })
    }
}

/// What a running push reports: counters and the newest error, read without waiting behind uploads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Failures since this push started (uploads, refused CPU windows, full queue, source errors).
    pub sdk_errors: u64,
    /// The newest failure, never containing credentials.
    pub last_error: Option<String>,
    /// Successful uploads since this push started.
    pub uploads: u64,
    /// When the newest successful upload finished.
    pub last_upload_at: Option<SystemTime>,
}

enum Control {
    /// Flush before this instant, then end.
    Stop(Instant),
}

#[derive(Default)]
struct State {
    status: Status,
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

/// A running push. [`Push::stop`] flushes and joins its thread; dropping it without `stop` ends the
/// thread at once (no flush) and still joins it, so nothing is left running either way.
pub struct Push {
    tx: mpsc::Sender<Control>,
    handle: Option<JoinHandle<bool>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Push")
            .field("address", &self.shared.address)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Push {
    /// Counters and the newest error, read without waiting behind uploads.
    pub fn status(&self) -> Status {
        self.shared.lock().status.clone()
    }

    /// Flushes (a final CPU window and heap profile, then the queue) within `budget`, then joins the
    /// thread. `false` when the flush was abandoned at the deadline (one log line says how many uploads
    /// were dropped).
    pub fn stop(mut self, budget: Duration) -> bool {
        self.finish(Instant::now() + budget)
    }

    /// [`Push::stop`], and the figures as the push ended (after the flush's uploads).
    pub fn stop_with_status(mut self, budget: Duration) -> (bool, Status) {
        let flushed = self.finish(Instant::now() + budget);
        (flushed, self.status())
    }

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

impl Drop for Push {
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
    /// The target asks for wall-clock windows.
    wall: bool,
    wall_running: bool,
}

impl Worker {
    fn run(mut self) -> bool {
        let mut window_start = SystemTime::now();
        self.cpu_begin();
        if self.wall {
            self.wall_begin();
        }
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

    fn wall_begin(&mut self) {
        match self.with_source("wall-clock profile", |s| s.wall_start()) {
            Ok(Ok(())) => self.wall_running = true,
            Ok(Err(refused)) => self.fail(SourceError::WallRefused(refused)),
            Err(panicked) => self.fail(panicked),
        }
    }

    /// The wall-clock window, when the target asks for them: taken if sampling runs, else (re)started.
    fn collect_wall(&mut self) {
        if !self.wall {
            return;
        }
        if self.wall_running {
            let window = self.with_source("wall-clock profile", |s| s.wall_window());
            self.wall_running = self.enqueue_window(window);
        }
        if !self.wall_running {
            self.wall_begin();
        }
    }

    /// Ends the window that began at `window_start`; returns the next window's start.
    fn collect(&mut self, window_start: SystemTime) -> SystemTime {
        let now = SystemTime::now();
        self.collect_wall();
        if self.cpu_running {
            let window = self.with_source("cpu profile", |s| s.cpu_window());
            self.cpu_running = self.enqueue_window(window);
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

    /// Queues a sampler's window; `false` when the source had none (its sampler no longer runs). A
    /// panicked source is counted and leaves the sampler as it was.
    fn enqueue_window(&mut self, r: Result<Option<EncodedProfile>, SourceError>) -> bool {
        match r {
            Ok(Some(p)) => self.enqueue(p),
            Ok(None) => return false,
            Err(panicked) => self.fail(panicked),
        }
        true
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
            self.enqueue_window(last);
        }
        if self.wall_running {
            // Stopped even past the deadline, as the CPU one: a pull may want the sampler next.
            let last = self.with_source("wall-clock profile", |s| s.wall_stop());
            self.wall_running = false;
            self.enqueue_window(last);
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
