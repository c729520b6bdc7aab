//! One collection cycle: every target fetched on a bounded pool of plain threads (heap, then a CPU
//! profile of `-cpu-seconds`), each snapshot written atomically with its reports, optional baseline
//! diff and meta.json; then retention; then one progress line on stderr.
//!
//! A target that is down, slow, refusing (503) or answering garbage costs only its own worker slot for
//! at most its own timeouts; it is recorded as failed in its meta.json and never blocks the others.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::archive::{snapshot_dir, Stamp};
use super::baseline::SourceError;
use super::baseline::{Baseline, Source};
use super::budget::{Budget, Held, BUDGET_BYTES};
use super::fetch::{fetch_within, FetchError, Fetched};
use super::meta::{BaselineMeta, Meta, ProfileMeta, Status};
use super::pages::Row;
use super::snapshot::{WriteError, Written};
use super::store::Store;
use super::targets::Target;
use super::Config;
use crate::report;
use crate::timefmt::rfc3339_millis;
use nl6_profile::proto::Profile;

/// The outcome of one target in one cycle.
#[derive(Debug, Clone)]
pub struct TargetOutcome {
    pub target: Target,
    pub status: Status,
    /// Where the snapshot went (None if even meta.json could not be written).
    pub dir: Option<PathBuf>,
    pub bytes: u64,
    pub error: Option<String>,
    /// The files its snapshot holds, meta.json apart (for the index pages).
    pub files: Vec<String>,
}

/// The outcome of one cycle.
#[derive(Debug, Clone)]
pub struct CycleReport {
    pub start: Stamp,
    pub outcomes: Vec<TargetOutcome>,
    pub deleted: Vec<PathBuf>,
    pub elapsed: Duration,
}

impl CycleReport {
    fn count(&self, s: Status) -> usize {
        self.outcomes.iter().filter(|o| o.status == s).count()
    }

    /// The progress line printed after each cycle.
    pub fn progress_line(&self) -> String {
        let bytes: u64 = self.outcomes.iter().map(|o| o.bytes).sum();
        format!(
            "nl6 collect: cycle {}: {}: {} ok, {} partial, {} failed; {} bytes; {:.1}s; retention deleted {}",
            self.start.rfc3339(),
            crate::goflag::count(self.outcomes.len(), "target", "targets"),
            self.count(Status::Ok),
            self.count(Status::Partial),
            self.count(Status::Failed),
            bytes,
            self.elapsed.as_secs_f64(),
            self.deleted.len()
        )
    }
}

/// Runs one cycle started at `now` and prints its log lines and progress line on stderr.
pub fn run_cycle(
    cfg: &Config,
    store: &Store,
    baseline: Option<&Source>,
    now: SystemTime,
) -> CycleReport {
    let began = Instant::now();
    let now_unix = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let start = Stamp::from_unix(now_unix);
    store.begin_cycle();
    let listed = baseline.map(|b| b.list(cfg.args.baseline_date.as_ref()));
    let baselines = listed.as_ref();

    let budget = Budget::new(BUDGET_BYTES);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<TargetOutcome>>> = Mutex::new(vec![None; cfg.targets.len()]);
    let workers = cfg.args.concurrency.clamp(1, cfg.targets.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = cfg.targets.get(i) else { break };
                let outcome = collect_target(cfg, store, t, start, baselines, &budget);
                // Remote text in `e` is escaped and bounded where it entered (fetch, decode).
                if let Some(e) = &outcome.error {
                    eprintln!("nl6 collect: {} {}:{}: {e}", t.program, t.fqdn, t.port);
                }
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(outcome);
            });
        }
    });
    let outcomes: Vec<TargetOutcome> = results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect();
    store.publish_pages(start, page_rows(&outcomes));

    let deleted = store.sweep(now_unix, cfg.args.retain);
    let report = CycleReport {
        start,
        outcomes,
        deleted,
        elapsed: began.elapsed(),
    };
    let _ = writeln!(std::io::stderr(), "{}", report.progress_line());
    report
}

/// The index pages' rows of this cycle's stored snapshots, by program.
fn page_rows(outcomes: &[TargetOutcome]) -> BTreeMap<&str, Vec<Row>> {
    let mut by_program: BTreeMap<&str, Vec<Row>> = BTreeMap::new();
    for o in outcomes.iter().filter(|o| o.dir.is_some()) {
        by_program.entry(&o.target.program).or_default().push(Row {
            fqdn: o.target.fqdn.clone(),
            port: o.target.port,
            status: Some(o.status.clone()),
            files: o.files.clone(),
            error: o.error.clone(),
        });
    }
    by_program
}

/// A fetched and checked profile: its archived bytes (always gzip'd) and the decoded value.
struct Good {
    gz: Vec<u8>,
    profile: Profile,
}

/// Why a fetched profile is not archived (meta.json keeps the words).
#[derive(Debug)]
enum ProfileError {
    Fetch(FetchError),
    /// Not pprof: the bytes received and the reader's words.
    NotPprof(usize, report::ReadError),
    /// Past a limit: the bytes received and the limit.
    TooLarge(usize, report::ReadError),
    Gzip(std::io::Error),
}

impl std::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileError::Fetch(e) => write!(f, "{e}"),
            ProfileError::NotPprof(n, e) => write!(f, "not a pprof profile ({n} bytes): {e}"),
            ProfileError::TooLarge(n, e) => write!(f, "{e} ({n} bytes received)"),
            ProfileError::Gzip(e) => write!(f, "gzip: {e}"),
        }
    }
}

fn check(f: &Fetched, held: &mut Held) -> Result<Good, ProfileError> {
    let body = f
        .body
        .as_ref()
        .map_err(|e| ProfileError::Fetch(e.clone()))?;
    let mut charge = |n| -> Result<(), report::limits::Refusal> { Ok(held.charge(n)?) };
    let profile = report::limits::decode_within(body, &report::limits::LIMITS, &mut charge)
        .map_err(|e| match e {
            report::ReadError::Malformed(_) => ProfileError::NotPprof(body.len(), e),
            report::ReadError::TooLarge(_) => ProfileError::TooLarge(body.len(), e),
        })?;
    let gz = if body.starts_with(&[0x1f, 0x8b]) {
        body.clone()
    } else {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(body)
            .and_then(|_| enc.finish())
            .map_err(ProfileError::Gzip)?
    };
    Ok(Good { gz, profile })
}

/// One target's snapshot: fetch both profiles, archive what decoded (with its tables and flame graph),
/// diff against the baseline, write the directory with its meta.json.
fn collect_target(
    cfg: &Config,
    store: &Store,
    t: &Target,
    start: Stamp,
    baselines: Option<&Baseline>,
    budget: &Budget,
) -> TargetOutcome {
    let started = SystemTime::now();
    let began = Instant::now();
    // Everything this target holds (bodies, inflated and decoded profiles) until its snapshot is written.
    let mut held = budget.holder();
    let heap = fetch_within(&t.endpoint("heap", ""), cfg.args.timeout, &mut held);
    let cpu = fetch_within(
        &t.endpoint("profile", &format!("seconds={}", cfg.args.cpu_seconds)),
        Duration::from_secs(cfg.args.cpu_seconds) + cfg.args.timeout,
        &mut held,
    );
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut profiles = BTreeMap::new();
    let mut errors = Vec::new();
    let mut cpu_profile = None;
    for (kind, fetched) in [("cpu", &cpu), ("heap", &heap)] {
        let title = format!(
            "{} {}:{} {kind} {}",
            t.program,
            t.fqdn,
            t.port,
            start.rfc3339()
        );
        let (pm, profile) = archive_profile(kind, fetched, &mut held, &title, &mut files);
        if let Some(e) = &pm.error {
            errors.push(format!("{kind}: {e}"));
        }
        if kind == "cpu" {
            cpu_profile = profile;
        }
        profiles.insert(kind.to_string(), pm);
    }
    let baseline = baselines.map(|b| baseline_diff(b, t, cpu_profile.as_ref(), &mut files));
    let status = match profiles.values().filter(|p| p.status == Status::Ok).count() {
        2 => Status::Ok,
        0 => Status::Failed,
        _ => Status::Partial,
    };
    let error = (!errors.is_empty()).then(|| errors.join("; "));
    let mut meta = Meta {
        target: t.url.clone(),
        program: t.program.clone(),
        fqdn: t.fqdn.clone(),
        port: t.port,
        cycle_start: start.rfc3339(),
        started: rfc3339_millis(started),
        finished: String::new(),
        duration_ms: 0,
        cpu_seconds: cfg.args.cpu_seconds,
        status: status.clone(),
        error: error.clone(),
        profiles,
        files: files
            .iter()
            .map(|(k, v)| (k.clone(), v.len() as u64))
            .collect(),
        baseline,
        collector: concat!("nl6 ", env!("CARGO_PKG_VERSION")).to_string(),
    };
    let bytes = files.values().map(|v| v.len() as u64).sum();
    let relative = snapshot_dir(Path::new(""), t, start);
    let written = write_snapshot(store, &relative, t.port, &files, &mut meta, began);
    let mut out = outcome(t, written, status, bytes, error);
    if out.dir.is_some() {
        out.files = files.keys().cloned().collect();
    }
    out
}

/// The target's line in the cycle report: the snapshot as fetched, or failed when it could not be
/// written (with the fetch errors after the write's); a spooled snapshot keeps its status and says where
/// it waits.
fn outcome(
    t: &Target,
    written: Result<Written, WriteError>,
    status: Status,
    bytes: u64,
    error: Option<String>,
) -> TargetOutcome {
    let then = |e: Option<String>| e.map(|x| format!("; {x}")).unwrap_or_default();
    match written {
        Ok(Written::At(at)) => TargetOutcome {
            target: t.clone(),
            status,
            dir: Some(PathBuf::from(at)),
            bytes,
            error,
            files: Vec::new(),
        },
        Ok(Written::Spooled(at, why)) => TargetOutcome {
            target: t.clone(),
            status,
            dir: Some(at.clone()),
            bytes,
            error: Some(format!(
                "{why}; kept in the spool at {}, uploaded next cycle{}",
                at.display(),
                then(error)
            )),
            files: Vec::new(),
        },
        Err(e) => TargetOutcome {
            target: t.clone(),
            status: Status::Failed,
            dir: None,
            bytes: 0,
            error: Some(format!("{e}{}", then(error))),
            files: Vec::new(),
        },
    }
}

/// One fetched profile's record, and when it decoded, its files (`<kind>.pb.gz`, `.top.txt`, `.svg`)
/// added to `files` and the decoded profile returned (the CPU one is diffed against the baseline).
fn archive_profile(
    kind: &str,
    fetched: &Fetched,
    held: &mut Held,
    title: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> (ProfileMeta, Option<Profile>) {
    let mut pm = ProfileMeta {
        url: fetched.url.clone(),
        status: Status::Failed,
        http_status: fetched.http_status,
        bytes: 0,
        records: None,
        sample_type: None,
        fetch_ms: fetched.elapsed.as_millis() as u64,
        error: None,
    };
    let good = match check(fetched, held) {
        Ok(good) => good,
        Err(e) => {
            pm.error = Some(e.to_string());
            return (pm, None);
        }
    };
    let index = report::default_sample_index(&good.profile);
    pm.status = Status::Ok;
    pm.bytes = good.gz.len() as u64;
    pm.records = Some(good.profile.sample.len());
    pm.sample_type = index
        .and_then(|i| report::nodes::sample_type(&good.profile, i))
        .map(|(t, _)| t);
    files.insert(
        format!("{kind}.top.txt"),
        report::default_top_table(&good.profile).into_bytes(),
    );
    files.insert(
        format!("{kind}.svg"),
        report::flamegraph_svg(&good.profile, title),
    );
    files.insert(format!("{kind}.pb.gz"), good.gz);
    (pm, Some(good.profile))
}

/// `-baseline`'s record: `cpu.diff.txt` added to `files` against the newest baseline profile of this
/// target, or why there is none.
fn baseline_diff(
    baseline: &Baseline,
    t: &Target,
    cpu_profile: Option<&Profile>,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> BaselineMeta {
    let mut bm = BaselineMeta {
        dir: baseline.name(),
        profile: None,
        error: None,
    };
    match (cpu_profile, baseline.newest(t)) {
        (None, _) => bm.error = Some("no CPU profile this cycle".into()),
        (Some(_), None) => bm.error = Some(
            "no cpu.pb.gz for this target under the baseline (on that date, with -baseline-date)"
                .into(),
        ),
        (Some(new), Some(path)) => {
            let shown = baseline.shown(path);
            bm.profile = Some(shown.clone());
            match baseline
                .read(path)
                .map_err(BaselineError::Read)
                .and_then(|bytes| diff_against(&shown, &bytes, new))
            {
                Ok(text) => {
                    files.insert("cpu.diff.txt".into(), text.into_bytes());
                }
                Err(e) => bm.error = Some(e.to_string()),
            }
        }
    }
    bm
}

/// Why there is no `cpu.diff.txt` (meta.json keeps the words).
#[derive(Debug)]
enum BaselineError {
    Read(SourceError),
    /// The baseline profile as shown, and why it did not decode.
    Decode(String, report::ReadError),
    Diff(report::DiffError),
}

impl std::fmt::Display for BaselineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaselineError::Read(e) => write!(f, "{e}"),
            BaselineError::Decode(shown, e) => write!(f, "{shown}: {e}"),
            BaselineError::Diff(e) => write!(f, "{e}"),
        }
    }
}

fn diff_against(shown: &str, bytes: &[u8], new: &Profile) -> Result<String, BaselineError> {
    let base =
        report::decode_untrusted(bytes).map_err(|e| BaselineError::Decode(shown.to_string(), e))?;
    let (new, normalized) = super::normalize::for_diff(&base, new);
    let text = report::default_diff_table(&base, &new).map_err(BaselineError::Diff)?;
    Ok(format!("Baseline: {shown}\n{normalized}{text}"))
}

fn write_snapshot(
    store: &Store,
    relative: &Path,
    port: u16,
    files: &BTreeMap<String, Vec<u8>>,
    meta: &mut Meta,
    began: Instant,
) -> Result<Written, WriteError> {
    meta.finished = rfc3339_millis(SystemTime::now());
    meta.duration_ms = began.elapsed().as_millis() as u64;
    let json = serde_json::to_vec_pretty(meta).map_err(WriteError::Meta)?;
    store.put_snapshot(relative, port, files, &json)
}
