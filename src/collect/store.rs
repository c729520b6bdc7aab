//! Where snapshots go: a local directory (`-out DIR`, the embedded default: snapshot directories renamed
//! into place whole, [`super::atomic`]) or a bucket (`-out s3://…` / `gs://…`, [`super::bucket`]). One
//! value the cycle writes snapshots and pages through and sweeps; the layout is the same in both.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::archive::Stamp;
use super::bucket::Bucket;
use super::flags::CollectArgs;
use super::pages::{self, Row};
use super::s3::{Addressing, EndpointError, S3};
use super::s3creds::CredsError;
use super::s3url::{self, UrlError};
use super::snapshot::{slash_path, write_local, Files, WriteError, Written};

/// Why the archive (or `-baseline`'s bucket) could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// A directory could not be created: its flag, path and the error.
    Dir(&'static str, PathBuf, std::io::Error),
    /// The flag's bucket URL.
    Url(&'static str, UrlError),
    Creds(CredsError),
    Endpoint(EndpointError),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Dir(flag, path, e) => write!(f, "{flag} {}: {e}", path.display()),
            OpenError::Url(flag, e) => write!(f, "{flag}: {e}"),
            OpenError::Creds(e) => write!(f, "{e}"),
            OpenError::Endpoint(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// The archive.
#[derive(Debug)]
pub enum Store {
    Local(PathBuf),
    Bucket(Box<Bucket>),
}

impl Store {
    /// The store `args` name: creates a local `-out`, or reads the bucket's credentials (never from argv).
    pub fn open(
        args: &CollectArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Store, OpenError> {
        let out = args.out.to_string_lossy();
        if !s3url::is_bucket(&out) {
            std::fs::create_dir_all(&args.out)
                .map_err(|e| OpenError::Dir("-out", args.out.clone(), e))?;
            return Ok(Store::Local(args.out.clone()));
        }
        let s3 = open_s3(args, "-out", &out, env)?;
        let spool = args.spool.join(&s3.location.bucket);
        std::fs::create_dir_all(&spool).map_err(|e| OpenError::Dir("-spool", spool.clone(), e))?;
        Ok(Store::Bucket(Box::new(Bucket::new(
            s3,
            spool,
            args.spool_bytes,
        ))))
    }

    /// `-out` as the logs name it.
    pub fn name(&self) -> String {
        match self {
            Store::Local(p) => p.display().to_string(),
            Store::Bucket(b) => b.s3.location.display(),
        }
    }

    /// Before a cycle's targets: with a bucket, uploads what the spool holds (bounded by the store's
    /// timeout when it is still down). Returns snapshots uploaded.
    pub fn begin_cycle(&self) -> usize {
        match self {
            Store::Local(_) => 0,
            Store::Bucket(b) => b.replay_spool(),
        }
    }

    /// Writes one snapshot at `relative` (`<program>/…/<fqdn>/<port>`): every file, then `meta` as
    /// meta.json, last. An existing snapshot is never replaced.
    pub fn put_snapshot(
        &self,
        relative: &Path,
        port: u16,
        files: &Files,
        meta: &[u8],
    ) -> Result<Written, WriteError> {
        match self {
            Store::Local(out) => write_local(out, relative, port, files, meta)
                .map(|p| Written::At(p.display().to_string()))
                .map_err(|e| WriteError::Local(out.join(relative), e)),
            Store::Bucket(b) => b.put_snapshot(relative, port, files, meta),
        }
    }

    /// Writes (replacing) a page such as `index.html` at `relative`.
    pub fn put_page(&self, relative: &Path, bytes: &[u8]) -> Result<(), WriteError> {
        match self {
            Store::Local(out) => {
                let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
                    return Err(WriteError::NotAFile(relative.to_path_buf()));
                };
                super::atomic::open_path(out, parent)
                    .and_then(|d| d.write_atomically(name, bytes))
                    .map_err(|e| WriteError::Local(out.join(relative), e))
            }
            Store::Bucket(b) => b.put_page(relative, bytes),
        }
    }

    /// Retention: deletes dated snapshots older than `retain`, logs each deletion; returns their names.
    pub fn sweep(&self, now_unix: i64, retain: Duration) -> Vec<PathBuf> {
        match self {
            Store::Local(out) => super::sweep_log::log_sweep(
                out,
                &super::retention::sweep(out, now_unix, retain),
                retain,
            ),
            Store::Bucket(b) => b.sweep(now_unix, retain),
        }
    }
}

impl Store {
    /// Writes the index pages of the cycle started at `start`: one per program's snapshot time (this
    /// collector's targets, `rows` by program, and any other collector's found stored under the same
    /// time), and that program's day page (every time of the day found in the store). A failure is one
    /// line.
    pub fn publish_pages(&self, start: Stamp, by_program: BTreeMap<&str, Vec<Row>>) {
        let [y, m, d, hms] = start.components();
        for (program, mut rows) in by_program {
            let day = Path::new(program).join(&y).join(&m).join(&d);
            let listing = self.day_listing(&day);
            for ((fqdn, port), files) in listing.get(&hms).into_iter().flatten() {
                if !rows.iter().any(|r| &r.fqdn == fqdn && r.port == *port) {
                    rows.push(Row {
                        fqdn: fqdn.clone(),
                        port: *port,
                        status: None,
                        files: files
                            .iter()
                            .filter(|f| *f != "meta.json")
                            .cloned()
                            .collect(),
                        error: None,
                    });
                }
            }
            rows.sort_by(|a, b| (&a.fqdn, a.port).cmp(&(&b.fqdn, b.port)));
            let page = pages::snapshot_page(program, &start.rfc3339(), &rows);
            let mut result = self.put_page(&day.join(&hms).join("index.html"), page.as_bytes());
            if result.is_ok() {
                let mut times: Vec<String> = listing.into_keys().collect();
                if !times.contains(&hms) {
                    times.push(hms.clone());
                    times.sort();
                }
                let page = pages::day_page(program, &format!("{y}-{m}-{d}"), &times);
                result = self.put_page(&day.join("index.html"), page.as_bytes());
            }
            if let Err(e) = result {
                eprintln!(
                    "nl6 collect: index pages of {program} {}: {e}",
                    start.rfc3339()
                );
            }
        }
    }

    /// What is stored under `day` (`<program>/<yyyy>/<mm>/<dd>`): snapshot time → (fqdn, port) → files.
    fn day_listing(&self, day: &Path) -> DayListing {
        let paths: Vec<String> = match self {
            Store::Local(out) => super::retention::files_below(out, day, 4),
            Store::Bucket(b) => {
                let prefix = format!("{}/", b.s3.location.key(&slash_path(day)));
                let archive = &b.s3.location.prefix;
                match b.s3.list(&prefix) {
                    // Only keys of the archive's shape under the day: the rest is the sweep's to name.
                    Ok(listing) => listing
                        .keys
                        .into_iter()
                        .filter(|(k, _)| super::s3key::classify(k, archive).is_ok())
                        .filter_map(|(k, _)| k.strip_prefix(&prefix).map(str::to_string))
                        .collect(),
                    Err(e) => {
                        eprintln!("nl6 collect: index pages: {e}");
                        Vec::new()
                    }
                }
            }
        };
        let mut out = DayListing::new();
        for p in paths {
            let parts: Vec<&str> = p.split('/').collect();
            let [hms, fqdn, port, file] = parts[..] else {
                continue;
            };
            let (Some(_), Ok(port)) = (
                Stamp::parse_components("2000", "01", "01", hms),
                port.parse(),
            ) else {
                continue;
            };
            out.entry(hms.to_string())
                .or_default()
                .entry((fqdn.to_string(), port))
                .or_default()
                .push(file.to_string());
        }
        out
    }
}

/// Snapshot time → (fqdn, port) → file names.
type DayListing = BTreeMap<String, BTreeMap<(String, u16), Vec<String>>>;

/// The bucket client for `url` (`s3://…` or `gs://…`, named by `flag` in errors), with the collector's
/// `-s3-*` settings and credentials (never from argv).
pub fn open_s3(
    args: &CollectArgs,
    flag: &'static str,
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<S3, OpenError> {
    let location = s3url::parse(url).map_err(|e| OpenError::Url(flag, e))?;
    let creds =
        super::s3creds::load(args.s3_credentials.as_deref(), env).map_err(OpenError::Creds)?;
    let region = args
        .s3_region
        .clone()
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| if location.gcs { "auto" } else { "us-east-1" }.to_string());
    let addressing = match args.s3_addressing.as_str() {
        "path" => Addressing::Path,
        "virtual" => Addressing::VirtualHost,
        _ if args.s3_endpoint.is_some() || location.gcs => Addressing::Path,
        _ => Addressing::VirtualHost,
    };
    S3::new(
        location,
        args.s3_endpoint.as_deref(),
        &region,
        addressing,
        creds,
        args.timeout,
    )
    .map_err(OpenError::Endpoint)
}

/// Where `-baseline` profiles come from: `-baseline` (a directory or a bucket), or with only
/// `-baseline-date`, `-out` itself; `None` without either flag.
pub fn baseline_source(
    args: &CollectArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<super::baseline::Source>, OpenError> {
    use super::baseline::Source;
    let (flag, path) = match (&args.baseline, &args.baseline_date) {
        (Some(b), _) => ("-baseline", b),
        (None, Some(_)) => ("-out", &args.out),
        (None, None) => return Ok(None),
    };
    let text = path.to_string_lossy();
    Ok(Some(if s3url::is_bucket(&text) {
        Source::Bucket(Box::new(open_s3(args, flag, &text, env)?))
    } else {
        Source::Dir(path.clone())
    }))
}
