//! `nl6 collect`: scheduled collection of CPU and heap profiles from every target in a fleet (Go services
//! with net/http/pprof, nl6 itself, anything that speaks the same surface) into a dated, bucket-ready
//! archive, with reports, retention and baseline diffs.
//!
//! ```text
//! nl6 collect -targets FILE -out DIR [-interval 1h] [-cpu-seconds 10] [-retain 168h]
//!             [-concurrency 8] [-timeout 30s] [-baseline DIR] [-once]
//! ```
//!
//! Each cycle (started every `-interval`, or once with `-once`) fetches `/debug/pprof/heap` and
//! `/debug/pprof/profile?seconds=N` from every target and writes
//! `<out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/` (UTC, from the cycle start) holding
//! `cpu.pb.gz`, `heap.pb.gz`, `cpu.top.txt`, `heap.top.txt`, `cpu.svg`, `heap.svg`, `meta.json` and,
//! with `-baseline`, `cpu.diff.txt`. Failed profiles are recorded in meta.json only.
//!
//! Modules: [`flags`] (the flag table and parsing; durations come from [`crate::timefmt`]), [`targets`] (the
//! targets file), [`archive`] (layout and retention rules as plain values), [`retention`] (the archive
//! I/O), [`atomic`] (snapshot directories renamed into place when complete), [`fetch`] (the HTTP client, the collector's only network
//! code), [`budget`] (the memory all targets fetched at once may hold), [`cycle`] (one cycle on plain
//! threads), [`meta`] (meta.json).
//!
//! Exit status: 2 on a usage error (bad flag, unreadable or bad targets file), 1 when `-out` cannot be
//! created, 0 after `-once` completes a cycle (whatever the targets answered: failures are in meta.json).
#![forbid(unsafe_code)]

pub mod archive;
pub mod atomic;
pub mod baseline;
pub mod bucket;
pub mod budget;
pub mod cycle;
pub mod fetch;
pub mod flags;
pub mod lifecycle;
pub mod meta;
pub mod normalize;
pub mod pages;
pub mod remote;
pub mod retention;
pub mod s3;
pub mod s3creds;
pub mod s3key;
pub mod s3list;
pub mod s3redact;
pub mod s3url;
pub mod snapshot;
pub mod stop;
pub mod store;
pub mod sweep_log;
pub mod targets;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::SystemTime;

pub use cycle::{run_cycle, CycleReport, TargetOutcome};
pub use targets::{parse_targets, Target, TargetsError};

/// Everything a cycle needs: the validated flags plus the parsed targets.
#[derive(Debug, Clone)]
pub struct Config {
    /// The flags as parsed (`-out`, `-interval`, `-cpu-seconds`, `-retain`, …).
    pub args: flags::CollectArgs,
    /// The targets file's entries.
    pub targets: Vec<Target>,
}

/// Why the targets file gave no targets: the file, and its read error or the line at fault.
#[derive(Debug)]
pub enum LoadError {
    Read(PathBuf, std::io::Error),
    Targets(PathBuf, TargetsError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read(path, e) => write!(f, "-targets {}: {e}", path.display()),
            LoadError::Targets(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for LoadError {}

impl Config {
    /// Reads and parses the targets file named by `args`. Errors name the file and line.
    pub fn load(args: &flags::CollectArgs) -> Result<Config, LoadError> {
        let path = &args.targets;
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read(path.clone(), e))?;
        let targets = parse_targets(&text).map_err(|e| LoadError::Targets(path.clone(), e))?;
        Ok(Config {
            args: args.clone(),
            targets,
        })
    }
}

/// Runs `nl6 collect` with `args` (without the program name and subcommand); returns the exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    main_until(args, &stop::Stop::new())
}

/// [`main`], stopping as [`stop::Stop`] says (the composition root feeds it SIGTERM, SIGINT, SIGHUP).
pub fn main_until(args: Vec<OsString>, stop: &stop::Stop) -> i32 {
    let args = match flags::parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nl6 collect: {e} (see nl6 collect -help)");
            return 2;
        }
    };
    if args.help {
        print!("{}", flags::usage());
        return 0;
    }
    let cfg = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nl6 collect: {e}");
            return 2;
        }
    };
    let env = |k: &str| std::env::var(k).ok();
    let store = match store::Store::open(&cfg.args, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nl6 collect: {e}");
            return 1;
        }
    };
    if let store::Store::Bucket(b) = &store {
        // Keys that do not work and a missing bucket stop the collector here, in one line; a store
        // that cannot be reached does not (snapshots wait in the spool).
        match b.s3.probe() {
            Err(e) if e.answered() => {
                eprintln!("nl6 collect: {e}");
                return 1;
            }
            Err(e) => eprintln!("nl6 collect: {e}"),
            Ok(()) => eprintln!("{}", b.ensure_lifecycle(cfg.args.retain)),
        }
    }
    let baseline = match store::baseline_source(&cfg.args, &env) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nl6 collect: {e}");
            return 1;
        }
    };
    loop {
        let start = SystemTime::now();
        stop.begin_cycle(crate::timefmt::rfc3339_millis(start));
        run_cycle(&cfg, &store, baseline.as_ref(), start);
        if stop.end_cycle() || cfg.args.once {
            return 0;
        }
        // Cycles start every interval; a cycle that overran starts the next one at once.
        if !stop.sleep_until(start + cfg.args.interval) {
            return 0;
        }
    }
}
