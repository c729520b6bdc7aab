//! The labelled interop probe: nl6's profiling stack embedded in another program, as a library user would
//! assemble it — the gate with the [`PyroscopePusher`], the REST + pull surface router
//! ([`crate::api::Api`]) with the console mounted, and the HTTP server — plus a CPU burn under the
//! subsystem label
//! [`PROBE_LABEL`], so an interop check can find `{subsystem="interop-probe"}` both in what the push
//! uploaded and in a scraped `/debug/pprof/profile`.
//!
//! `examples/interop_probe.rs` runs it as a program; tests/push_interop.rs drives it in-process (running
//! the example from a test would re-enter cargo). Owns its burn threads and stops them on
//! [`Probe::shutdown`]; binds only the address it is given; never touches the process's signals or
//! allocator (a program wanting heap profiles installs `SamplingAllocator` itself, as `main.rs` does).
//!
//! A composition like `cli/run.rs`, so it sits above every module it assembles (push, api, console, http,
//! gate) rather than inside one of them.
#![forbid(unsafe_code)]

use crate::api::Api;
use crate::console::{self, CpuSlot, CpuSource};
use crate::gate::control::{Gate, PostError};
use crate::gate::state::{AddressField, PostRequest, Startup};
use crate::http::server::{Handler, Server, ServerConfig};
use crate::labels::Subsystem;
use crate::push::PyroscopePusher;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The `subsystem` label value the burn runs under.
pub const PROBE_LABEL: &str = "interop-probe";

/// What to start. Build with [`ProbeOptions::new`] and the `with_*` methods.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    listen: String,
    pyroscope: Option<String>,
    upload_interval: Duration,
    burners: usize,
}

impl ProbeOptions {
    /// Serve on `listen` (e.g. `127.0.0.1:0`); pull-only, 15 s upload interval, one burn thread.
    pub fn new(listen: impl Into<String>) -> Self {
        ProbeOptions {
            listen: listen.into(),
            pyroscope: None,
            upload_interval: Duration::from_secs(15),
            burners: 1,
        }
    }
    /// Push to this Pyroscope address (as `-profiling-pyroscope`). Defaults to none: the gate opens
    /// pull-only.
    pub fn with_pyroscope(mut self, address: impl Into<String>) -> Self {
        self.pyroscope = Some(address.into()).filter(|a: &String| !a.is_empty());
        self
    }
    /// The push cadence (as `-profiling-upload-interval`). Defaults to 15 s.
    pub fn with_upload_interval(mut self, interval: Duration) -> Self {
        self.upload_interval = interval;
        self
    }
    /// How many threads burn CPU under [`PROBE_LABEL`] (0: none). Defaults to 1.
    pub fn with_burners(mut self, n: usize) -> Self {
        self.burners = n;
        self
    }
}

/// Why the probe did not start.
#[derive(Debug)]
pub enum ProbeError {
    /// The address could not be bound.
    Listen(String, std::io::Error),
    /// The gate did not open: its own words (the push's refusal, or why the POST was refused).
    Gate(String),
    /// A burn thread could not be spawned.
    Burn(std::io::Error),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Listen(addr, e) => write!(f, "listen on {addr}: {e}"),
            ProbeError::Gate(m) => write!(f, "opening the profiling gate: {m}"),
            ProbeError::Burn(e) => write!(f, "starting a burn thread: {e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

/// A running probe: server, gate (open), burn threads.
pub struct Probe {
    server: Option<Server>,
    gate: Gate,
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    burners: Vec<JoinHandle<()>>,
}

impl Probe {
    /// Binds, opens the gate (pushing when an address is given, else pull-only) and starts burning.
    /// A push that cannot start is an error (the server is shut down again).
    pub fn start(options: ProbeOptions) -> Result<Probe, ProbeError> {
        let startup = Startup::new(
            options.pyroscope.clone(),
            None,
            None,
            options.upload_interval,
        );
        let flame = Arc::new(CpuSlot::new());
        let push_hook = console::cpu_hook(Arc::clone(&flame), CpuSource::Push);
        let wall_hook = console::wall_hook(Arc::clone(&flame), CpuSource::Push);
        let push = crate::push::config()
            .with_cpu_hook(Arc::from(push_hook))
            .with_wall_hook(Arc::from(wall_hook));
        let gate = Gate::new(startup, Box::new(PyroscopePusher::new(push)));
        let api = Arc::new(console::mount(Api::new(gate.clone()), &flame));
        let handler: Arc<Handler> = Arc::new(move |req| api.handle(req));
        let server = Server::bind(options.listen.as_str(), ServerConfig::default(), handler)
            .map_err(|e| ProbeError::Listen(options.listen.clone(), e))?;
        let opened = match options.pyroscope {
            Some(_) => gate.start().map_err(|e| e.to_string()),
            None => gate
                .post(&PostRequest {
                    enabled: true,
                    server_address: AddressField::Empty,
                    duration: None,
                })
                .map(|_| ())
                .map_err(|e| match e {
                    PostError::Invalid(m)
                    | PostError::PushFailed { message: m, .. }
                    | PostError::RevertUnavailable { message: m, .. } => m,
                    PostError::Busy { .. } => crate::gate::control::BUSY_MESSAGE.to_string(),
                }),
        };
        if let Err(e) = opened {
            gate.shutdown();
            server.shutdown();
            return Err(ProbeError::Gate(e));
        }
        let mut probe = Probe {
            server: Some(server),
            gate,
            stop: Arc::new(AtomicBool::new(false)),
            rounds: Arc::new(AtomicU64::new(0)),
            burners: Vec::with_capacity(options.burners),
        };
        let label = Subsystem::custom(PROBE_LABEL);
        for i in 0..options.burners {
            let (stop, rounds) = (probe.stop.clone(), probe.rounds.clone());
            match nl6_profile::threads::spawn_labelled(
                label,
                &format!("probe-burn-{i}"),
                move || burn(&stop, &rounds),
            ) {
                Ok(h) => probe.burners.push(h),
                Err(e) => {
                    probe.shutdown();
                    return Err(ProbeError::Burn(e));
                }
            }
        }
        Ok(probe)
    }

    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .map(Server::local_addr)
            .expect("the server runs until shutdown")
    }

    /// The gate (the same one `/api/v1/profiling` drives).
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Burn rounds done so far (proof the burn runs).
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// Stops the burn, closes the gate (bounded flush of a running push), stops the server. Returns
    /// `false` when the flush was abandoned at its deadline.
    pub fn shutdown(mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.burners.drain(..) {
            let _ = h.join();
        }
        let flushed = self.gate.shutdown();
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
        flushed
    }
}

/// Pure CPU work (no allocation, no syscalls) until `stop`; counts rounds. Runs under whatever label the
/// calling thread carries.
pub fn burn(stop: &AtomicBool, rounds: &AtomicU64) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while !stop.load(Ordering::Relaxed) {
        x = probe_spin(x);
        rounds.fetch_add(1, Ordering::Relaxed);
    }
    black_box(x);
}

/// One round of the burn, out of line so profiles show it by name.
#[inline(never)]
fn probe_spin(mut x: u64) -> u64 {
    for i in 0..100_000u64 {
        x = black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(i | 1),
        );
    }
    x
}
