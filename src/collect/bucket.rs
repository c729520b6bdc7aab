//! The archive in a bucket: snapshots uploaded file by file with `If-None-Match: *` (an existing key is
//! refused, never overwritten: two collectors with disjoint targets share a bucket and prefix), meta.json
//! last (its presence marks a snapshot complete); a snapshot the store refused or could not take waits in
//! a local spool (bounded in bytes, oldest dropped and counted) and goes up at the next cycle's start;
//! retention by listing the prefix (never a key outside it) and by the bucket's lifecycle rule.
//!
//! Every failure is one log line naming the bucket, the key, the store's code and the remedy
//! ([`super::s3::S3Error`]).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::archive::{select_expired, DatedDir};
use super::s3::{S3Error, S3};
use super::s3key::{self, Listed};
use super::snapshot::{slash_path, write_local, Files, WriteError, Written};
use crate::dirfd::{Dir, Kind};
use crate::timefmt::format_go_duration;

/// Dated directory → its place in the archive and the listed keys below it.
type ByDir = BTreeMap<String, (DatedDir, Vec<String>)>;

/// A bucket archive and its spool.
#[derive(Debug)]
pub struct Bucket {
    pub s3: S3,
    pub spool: PathBuf,
    pub spool_bytes: u64,
    dropped: AtomicU64,
}

/// Largest spooled file read back (a profile is at most 64 MiB; its SVG and tables are smaller).
const SPOOLED_FILE_LIMIT: u64 = 80 << 20;

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("html") => "text/html; charset=utf-8",
        _ => "application/octet-stream",
    }
}

impl Bucket {
    pub fn new(s3: S3, spool: PathBuf, spool_bytes: u64) -> Bucket {
        Bucket {
            s3,
            spool,
            spool_bytes,
            dropped: AtomicU64::new(0),
        }
    }

    /// Snapshots dropped from the spool since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Uploads `files` then `meta` under `relative`. With `replay`, a key that exists already with the
    /// same bytes counts as uploaded (an earlier try got that far).
    fn upload(
        &self,
        relative: &Path,
        files: &Files,
        meta: &[u8],
        replay: bool,
    ) -> Result<(), S3Error> {
        let base = self.s3.location.key(&slash_path(relative));
        let all = files
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .chain([("meta.json", meta)]);
        for (name, bytes) in all {
            let key = format!("{base}/{name}");
            match self.s3.put(&key, bytes, true, content_type(name)) {
                Ok(()) => {}
                Err(e) if e.exists() && replay => {
                    if self.s3.get(&key, bytes.len() as u64 + 1)? != bytes {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// One snapshot: uploaded, or spooled when the store refused or could not be reached; a key that
    /// exists already (another collector's) is refused and not spooled.
    pub fn put_snapshot(
        &self,
        relative: &Path,
        port: u16,
        files: &Files,
        meta: &[u8],
    ) -> Result<Written, WriteError> {
        let e = match self.upload(relative, files, meta, false) {
            Ok(()) => {
                let key = self.s3.location.key(&slash_path(relative));
                return Ok(Written::At(format!(
                    "s3://{}/{key}/",
                    self.s3.location.bucket
                )));
            }
            Err(e) if e.exists() => return Err(WriteError::Exists(Box::new(e))),
            Err(e) => e,
        };
        match write_local(&self.spool, relative, port, files, meta) {
            Ok(at) => {
                self.bound_spool();
                Ok(Written::Spooled(at, e))
            }
            Err(error) => Err(WriteError::Unspooled {
                store: Box::new(e),
                spool: self.spool.clone(),
                error,
            }),
        }
    }

    /// Writes (replacing) a page.
    pub fn put_page(&self, relative: &Path, bytes: &[u8]) -> Result<(), WriteError> {
        let key = self.s3.location.key(&slash_path(relative));
        self.s3
            .put(&key, bytes, false, content_type(&key))
            .map_err(|e| WriteError::Bucket(Box::new(e)))
    }

    /// Every snapshot in the spool (`<program>/…/<fqdn>/<port>`, relative to it), oldest first.
    fn spooled(&self) -> Vec<(DatedDir, PathBuf)> {
        let mut out = Vec::new();
        for dated in super::retention::list_dated_dirs(&self.spool) {
            let Ok(dir) = open_chain(&self.spool, &dated.relative) else {
                continue;
            };
            for (fqdn, kind) in dir.entries().unwrap_or_default() {
                if kind != Kind::Dir || fqdn.as_encoded_bytes().first() == Some(&b'.') {
                    continue;
                }
                let Ok(host) = dir.open_dir(&fqdn) else {
                    continue;
                };
                for (port, kind) in host.entries().unwrap_or_default() {
                    if kind == Kind::Dir && port.as_encoded_bytes().first() != Some(&b'.') {
                        out.push((dated.clone(), dated.relative.join(&fqdn).join(&port)));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.stamp.cmp(&b.0.stamp).then_with(|| a.1.cmp(&b.1)));
        out
    }

    /// Uploads the spool's snapshots, oldest first, removing each once it is up; stops at the first
    /// failure (one line). Returns how many went up.
    pub fn replay_spool(&self) -> usize {
        self.s3.new_cycle();
        let waiting = self.spooled();
        let mut sent = 0;
        for (_, relative) in &waiting {
            let result = read_snapshot(&self.spool, relative)
                .map_err(|e| format!("reading {}: {e}", self.spool.join(relative).display()))
                .and_then(|(files, meta)| {
                    self.upload(relative, &files, &meta, true)
                        .map_err(|e| e.to_string())
                });
            match result {
                Ok(()) => {
                    let _ = super::retention::remove_inside(&self.spool, relative);
                    sent += 1;
                }
                Err(e) => {
                    eprintln!(
                        "nl6 collect: spool: {} of {} snapshots uploaded, the rest wait in {}: {e}",
                        sent,
                        waiting.len(),
                        self.spool.display()
                    );
                    return sent;
                }
            }
        }
        if sent > 0 {
            eprintln!(
                "nl6 collect: spool: uploaded {sent} waiting snapshots to {}",
                self.s3.location.display()
            );
        }
        sent
    }

    /// Drops the oldest spooled snapshots while the spool holds more than `-spool-bytes`.
    fn bound_spool(&self) {
        let mut snaps: Vec<(PathBuf, u64)> = self
            .spooled()
            .into_iter()
            .map(|(_, rel)| {
                let size = read_snapshot(&self.spool, &rel)
                    .map(|(f, m)| f.values().map(|v| v.len() as u64).sum::<u64>() + m.len() as u64)
                    .unwrap_or(0);
                (rel, size)
            })
            .collect();
        let mut total: u64 = snaps.iter().map(|s| s.1).sum();
        snaps.reverse(); // newest first: pop() gives the oldest
        while total > self.spool_bytes {
            let Some((rel, size)) = snaps.pop() else {
                break;
            };
            if super::retention::remove_inside(&self.spool, &rel).is_ok() {
                total -= size;
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                eprintln!(
                    "nl6 collect: spool: over -spool-bytes {}: dropped the oldest waiting snapshot {} ({n} dropped since start)",
                    self.spool_bytes,
                    rel.display()
                );
            }
        }
    }

    /// Retention in the bucket: lists the prefix, deletes every object of each dated snapshot time older
    /// than `retain`, one line each; names future-dated ones once. Only a listed key [`s3key::classify`]
    /// accepts (literally under the prefix, of the archive's shape) is acted on, and deleted as
    /// listed; the others are counted in one line.
    pub fn sweep(&self, now_unix: i64, retain: Duration) -> Vec<PathBuf> {
        let prefix = self.s3.location.prefix.clone();
        let listing = match self.s3.list(&prefix) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("nl6 collect: retention: {e}");
                return Vec::new();
            }
        };
        let cut = listing.cut;
        let (by_dir, day_pages) = self.group(listing);
        let dirs: Vec<DatedDir> = by_dir.values().map(|v| v.0.clone()).collect();
        let mut deleted = Vec::new();
        for d in select_expired(&dirs, now_unix, retain) {
            let name = slash_path(&d.relative);
            let keys = &by_dir[&name].1;
            let failed = keys.iter().filter_map(|k| self.s3.delete(k).err()).next();
            let shown = format!("{}{name}/", self.s3.location.display());
            match failed {
                None => {
                    eprintln!(
                        "nl6 collect: retention: deleted {shown} ({} objects; dated {}, older than {})",
                        keys.len(),
                        d.stamp.rfc3339(),
                        format_go_duration(retain)
                    );
                    deleted.push(PathBuf::from(shown));
                }
                Some(e) => eprintln!("nl6 collect: retention: could not delete {shown}: {e}"),
            }
        }
        // A day page whose every snapshot time is gone lists nothing: it goes too.
        let left: Vec<String> = by_dir
            .keys()
            .filter(|k| {
                !deleted
                    .iter()
                    .any(|d| d.to_string_lossy().ends_with(&format!("{k}/")))
            })
            .cloned()
            .collect();
        for (day, key) in day_pages {
            if !left.iter().any(|k| k.starts_with(&day)) {
                if let Err(e) = self.s3.delete(&key) {
                    eprintln!("nl6 collect: retention: {e}");
                }
            }
        }
        if let Some(f) = dirs
            .iter()
            .filter(|d| d.stamp.to_unix() > now_unix + 60)
            .max_by_key(|d| d.stamp)
        {
            eprintln!(
                "nl6 collect: retention: snapshots dated in the future kept (the latest {}{}); delete them by hand if a wrong clock made them",
                self.s3.location.display(),
                slash_path(&f.relative)
            );
        }
        if let Some(cut) = cut {
            eprintln!(
                "nl6 collect: retention: {cut} of {}; the rest wait for the next sweep or the bucket's lifecycle rule",
                self.s3.location.display()
            );
        }
        deleted
    }

    /// The listed keys retention may act on, by dated directory (`<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>`,
    /// with its files and page), and the day pages (day `…/<dd>/` → key); the other keys are counted
    /// in one line.
    fn group(&self, listing: super::s3list::Listing) -> (ByDir, Vec<(String, String)>) {
        let prefix = &self.s3.location.prefix;
        let mut skipped = listing.skipped;
        let mut by_dir = ByDir::new();
        let mut day_pages = Vec::new();
        for (key, _) in listing.keys {
            let (dated, stamp) = match s3key::classify(&key, prefix) {
                Ok(Listed::DayPage { day }) => {
                    day_pages.push((day, key));
                    continue;
                }
                Ok(Listed::Snapshot { dated, stamp } | Listed::TimePage { dated, stamp }) => {
                    (dated, stamp)
                }
                Err(why) => {
                    skipped.add(&key, why);
                    continue;
                }
            };
            let relative = PathBuf::from(&dated);
            by_dir
                .entry(dated)
                .or_insert_with(|| (DatedDir { relative, stamp }, Vec::new()))
                .1
                .push(key);
        }
        if let Some(line) = skipped.line(&self.s3.location.display()) {
            eprintln!("{line}");
        }
        (by_dir, day_pages)
    }

    /// Sets the bucket's lifecycle rule for the prefix (expire after `retain`, in whole days, at least 1),
    /// or checks it; returns the line to log. A bucket with rules of its own is left alone (the line
    /// says what to add).
    pub fn ensure_lifecycle(&self, retain: Duration) -> String {
        let days = retain.as_secs().div_ceil(86_400).max(1);
        let loc = &self.s3.location;
        let id = format!(
            "nl6-collect-{}",
            loc.prefix.trim_end_matches('/').replace('/', "-")
        );
        let ours = super::lifecycle::rule_xml(&id, &loc.prefix, days, loc.gcs);
        let current = match self.s3.get_lifecycle() {
            Ok(c) => c,
            Err(e) => return format!("nl6 collect: lifecycle: {e}"),
        };
        match super::lifecycle::compare(current.as_deref(), &id, days) {
            super::lifecycle::State::Same => format!(
                "nl6 collect: lifecycle: {} expires {} after {days} days (rule {id}, checked)",
                loc.bucket,
                loc.display()
            ),
            super::lifecycle::State::Foreign => format!(
                "nl6 collect: lifecycle: {} has lifecycle rules of its own; left alone: add this rule to expire {} after {days} days: {ours}",
                loc.bucket,
                loc.display()
            ),
            super::lifecycle::State::Missing | super::lifecycle::State::Different => {
                match self.s3.put_lifecycle(&super::lifecycle::document(&ours, loc.gcs)) {
                    Ok(()) => format!(
                        "nl6 collect: lifecycle: {} now expires {} after {days} days (rule {id}, set)",
                        loc.bucket,
                        loc.display()
                    ),
                    Err(e) => format!("nl6 collect: lifecycle: {e}"),
                }
            }
        }
    }
}

/// Opens every directory of `relative` under `root` without following links or creating any.
fn open_chain(root: &Path, relative: &Path) -> std::io::Result<Dir> {
    let mut dir = Dir::open(root)?;
    for name in relative.iter() {
        dir = dir.open_dir(name)?;
    }
    Ok(dir)
}

/// A spooled snapshot's files and its meta.json.
fn read_snapshot(spool: &Path, relative: &Path) -> std::io::Result<(Files, Vec<u8>)> {
    let dir = open_chain(spool, relative)?;
    let mut files = Files::new();
    for (name, kind) in dir.entries()? {
        let Some(n) = name.to_str() else { continue };
        if kind != Kind::File || n.starts_with('.') {
            continue;
        }
        let mut bytes = Vec::new();
        dir.open_file(OsStr::new(n))?
            .take(SPOOLED_FILE_LIMIT)
            .read_to_end(&mut bytes)?;
        files.insert(n.to_string(), bytes);
    }
    let meta = files
        .remove("meta.json")
        .ok_or_else(|| std::io::Error::other("no meta.json (not a finished snapshot)"))?;
    Ok((files, meta))
}
