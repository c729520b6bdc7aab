//! Where `-baseline` profiles come from: a directory (`-baseline DIR`), a bucket (`-baseline
//! s3://BUCKET/PREFIX`, signed with the collector's bucket settings), or, with only `-baseline-date`, the
//! archive `-out` itself. Each cycle lists the candidates once ([`Baseline::list`]); `-baseline-date
//! YYYY-MM-DD` keeps those of that day; the newest for the target wins (by the date in its path).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use super::archive::newest_for_target;
use super::s3::{S3Error, S3};
use super::targets::Target;

/// Where baseline profiles are read.
#[derive(Debug)]
pub enum Source {
    Dir(PathBuf),
    Bucket(Box<S3>),
}

/// One cycle's baseline candidates.
#[derive(Debug)]
pub struct Baseline<'a> {
    source: &'a Source,
    candidates: Vec<PathBuf>,
}

/// A `-baseline-date` that is no date (the text as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateError(pub String);

impl std::fmt::Display for DateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "want a date as YYYY-MM-DD (2026-11-29), got {:?}",
            self.0
        )
    }
}

impl std::error::Error for DateError {}

/// Why a baseline profile could not be read: the local file and its error, or the bucket's.
#[derive(Debug)]
pub enum SourceError {
    Dir(PathBuf, std::io::Error),
    Bucket(S3Error),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::Dir(path, e) => write!(f, "{}: {e}", path.display()),
            SourceError::Bucket(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// `-baseline-date YYYY-MM-DD` as path components, checked.
pub fn parse_date(v: &str) -> Result<[String; 3], DateError> {
    let parts: Vec<&str> = v.split('-').collect();
    let ok = parts.len() == 3
        && super::archive::Stamp::parse_components(parts[0], parts[1], parts[2], "00:00:00")
            .is_some();
    if !ok {
        return Err(DateError(v.to_string()));
    }
    Ok([parts[0].into(), parts[1].into(), parts[2].into()])
}

impl Source {
    /// `-baseline` (or `-out`) as typed, for meta.json.
    pub fn name(&self) -> String {
        match self {
            Source::Dir(d) => d.display().to_string(),
            Source::Bucket(s3) => s3.location.display(),
        }
    }

    /// Lists every archived `cpu.pb.gz`, keeping only `date`'s when given. A bucket that cannot be
    /// listed is one log line and no candidates.
    pub fn list(&self, date: Option<&[String; 3]>) -> Baseline<'_> {
        let mut candidates = match self {
            Source::Dir(d) => super::retention::find_files(d, "cpu.pb.gz"),
            Source::Bucket(s3) => match s3.list(&s3.location.prefix) {
                Ok(listing) => listing
                    .keys
                    .into_iter()
                    .filter(|(k, _)| k.ends_with("/cpu.pb.gz"))
                    // The store's listing: only a key of this archive's shape under its prefix.
                    .filter(|(k, _)| super::s3key::classify(k, &s3.location.prefix).is_ok())
                    .map(|(k, _)| PathBuf::from(k))
                    .collect(),
                Err(e) => {
                    eprintln!("nl6 collect: -baseline: {e}");
                    Vec::new()
                }
            },
        };
        if let Some([y, m, d]) = date {
            candidates.retain(|p| {
                let parts: Vec<&str> = p.iter().filter_map(|c| c.to_str()).collect();
                let n = parts.len();
                n >= 8 && parts[n - 7] == y && parts[n - 6] == m && parts[n - 5] == d
            });
        }
        Baseline {
            source: self,
            candidates,
        }
    }
}

impl Baseline<'_> {
    /// The newest candidate archived for `t`.
    pub fn newest(&self, t: &Target) -> Option<&Path> {
        newest_for_target(&self.candidates, t, "cpu.pb.gz").map(PathBuf::as_path)
    }

    /// The source's name, for meta.json.
    pub fn name(&self) -> String {
        self.source.name()
    }

    /// How `path` is named in meta.json and the diff's first line.
    pub fn shown(&self, path: &Path) -> String {
        match self.source {
            Source::Dir(_) => path.display().to_string(),
            Source::Bucket(s3) => format!("s3://{}/{}", s3.location.bucket, path.display()),
        }
    }

    /// The bytes of `path`, within nl6's limit for a profile.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, SourceError> {
        match self.source {
            Source::Dir(_) => std::fs::read(path).map_err(|e| SourceError::Dir(path.into(), e)),
            Source::Bucket(s3) => s3
                .get(&path.to_string_lossy(), super::fetch::BODY_LIMIT)
                .map_err(SourceError::Bucket),
        }
    }
}
