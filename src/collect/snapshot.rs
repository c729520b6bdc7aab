//! One snapshot as both stores take it: its files, where it went, what stopped it, and the local
//! writer the directory archive and the bucket's spool share. Below [`super::store`] and
//! [`super::bucket`], so neither needs the other for these.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::atomic::PartialDir;
use super::s3::S3Error;

/// A snapshot's files as the cycle made them (meta.json apart: it is written last).
pub type Files = BTreeMap<String, Vec<u8>>;

/// Where a snapshot went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Stored under this name (a directory, or `s3://bucket/key/`).
    At(String),
    /// The store refused or could not be reached: kept in the spool at this path, uploaded next cycle.
    Spooled(PathBuf, S3Error),
}

/// Why a snapshot or a page was not stored.
#[derive(Debug)]
pub enum WriteError {
    /// A local write failed: the path and the error.
    Local(PathBuf, std::io::Error),
    /// A page's path names no file.
    NotAFile(PathBuf),
    /// meta.json could not be made.
    Meta(serde_json::Error),
    /// The bucket refused the page or could not be reached.
    Bucket(Box<S3Error>),
    /// The snapshot's key exists already (another collector's): neither replaced nor spooled.
    Exists(Box<S3Error>),
    /// The bucket did not take the snapshot and the spool could not keep it.
    Unspooled {
        store: Box<S3Error>,
        spool: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Local(path, e) => write!(f, "writing {}: {e}", path.display()),
            WriteError::NotAFile(path) => write!(f, "{}: not a file path", path.display()),
            WriteError::Meta(e) => write!(f, "meta.json: {e}"),
            WriteError::Bucket(e) => write!(f, "{e}"),
            WriteError::Exists(e) => write!(f, "{e} (not overwritten, not spooled)"),
            WriteError::Unspooled {
                store,
                spool,
                error,
            } => write!(
                f,
                "{store}; and the spool {} could not keep it: {error}",
                spool.display()
            ),
        }
    }
}

impl std::error::Error for WriteError {}

/// A local snapshot: assembled hidden, renamed into place whole.
pub fn write_local(
    out: &Path,
    relative: &Path,
    port: u16,
    files: &Files,
    meta: &[u8],
) -> std::io::Result<PathBuf> {
    let partial = PartialDir::create(out, relative, port)?;
    for (name, bytes) in files {
        partial.write(name, bytes)?;
    }
    partial.write("meta.json", meta)?;
    partial.commit()
}

/// `/`-joined, for object keys.
pub fn slash_path(relative: &Path) -> String {
    relative
        .iter()
        .map(|c| c.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
