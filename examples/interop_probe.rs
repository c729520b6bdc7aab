//! The labelled interop probe: nl6's gate, pull surface, HTTP server and Pyroscope push embedded in a small
//! program that burns CPU under `subsystem="interop-probe"` (see `nl6::probe`).
//!
//!     cargo run --example interop_probe -- [LISTEN] [PYROSCOPE_URL] [SECONDS]
//!
//! Each argument falls back to an environment variable, then a default:
//!   LISTEN         NL6_PROBE_LISTEN    127.0.0.1:18080  (loopback; Alloy's example config scrapes it
//!                                                       with NL6_SCRAPE_TARGET=127.0.0.1:18080)
//!   PYROSCOPE_URL  PYROSCOPE_URL       none: the gate opens pull-only; "" also means pull-only
//!   SECONDS        NL6_PROBE_SECONDS   60, then the probe closes the gate (flushing the push) and exits
//! The upload interval is NL6_PROBE_UPLOAD_INTERVAL seconds (default 15).
//!
//! Then query `{service_name="nl6",subsystem="interop-probe"}` in Pyroscope, or scrape
//! `/debug/pprof/profile` while the gate is pull-only.
use nl6::probe::{Probe, ProbeOptions, PROBE_LABEL};
use nl6_profile::heap::SamplingAllocator;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn setting(args: &[String], index: usize, env: &str) -> Option<String> {
    args.get(index).cloned().or_else(|| std::env::var(env).ok())
}

fn seconds(value: Option<String>, what: &str, default: u64) -> Result<u64, String> {
    match value {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{what} {v:?}: expected a whole number of seconds")),
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen =
        setting(&args, 0, "NL6_PROBE_LISTEN").unwrap_or_else(|| "127.0.0.1:18080".to_string());
    let pyroscope = setting(&args, 1, "PYROSCOPE_URL").filter(|a| !a.is_empty());
    let run_for = seconds(setting(&args, 2, "NL6_PROBE_SECONDS"), "SECONDS", 60)?;
    let interval = seconds(
        std::env::var("NL6_PROBE_UPLOAD_INTERVAL").ok(),
        "NL6_PROBE_UPLOAD_INTERVAL",
        15,
    )?;
    if interval == 0 {
        return Err("NL6_PROBE_UPLOAD_INTERVAL must be at least 1".to_string());
    }
    let mut options = ProbeOptions::new(listen).with_upload_interval(Duration::from_secs(interval));
    if let Some(p) = &pyroscope {
        options = options.with_pyroscope(p.clone());
    }
    let probe = Probe::start(options).map_err(|e| e.to_string())?;
    eprintln!(
        "interop probe on http://{}; burning CPU under subsystem={PROBE_LABEL}; {} for {run_for}s",
        probe.local_addr(),
        match &pyroscope {
            Some(p) => format!("pushing to {p}"),
            None => "pull-only".to_string(),
        }
    );
    let end = Instant::now() + Duration::from_secs(run_for);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
    }
    let view = probe.gate().view();
    let rounds = probe.rounds();
    let flushed = probe.shutdown();
    eprintln!(
        "interop probe done: {rounds} burn rounds, {} uploads, {} push errors{}",
        view.uploads,
        view.sdk_errors,
        if flushed {
            ""
        } else {
            ", final flush abandoned"
        }
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("interop_probe: {e}");
        std::process::exit(1);
    }
}
