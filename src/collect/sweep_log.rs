//! The log lines of one local retention sweep ([`super::retention::Sweep`]): each deletion (naming where
//! the directory really was when its parent moved mid-sweep), each failure, each symbolic link left alone,
//! and one line for all directories dated in the future.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::retention::Sweep;
use crate::timefmt::format_go_duration;

/// Prints the sweep's lines on stderr; returns the paths deleted.
pub fn log_sweep(out: &Path, sweep: &Sweep, retain: Duration) -> Vec<PathBuf> {
    let mut deleted = Vec::new();
    for d in &sweep.deletions {
        let path = out.join(&d.dir.relative);
        match (&d.result, &d.moved_to) {
            (Ok(()), None) => {
                eprintln!(
                    "nl6 collect: retention: deleted {} (dated {}, older than {})",
                    path.display(),
                    d.dir.stamp.rfc3339(),
                    format_go_duration(retain)
                );
                deleted.push(path);
            }
            (Ok(()), Some(at)) => {
                eprintln!(
                    "nl6 collect: retention: deleted {} (dated {}, older than {}), found at {}: its parent moved during the sweep",
                    path.display(),
                    d.dir.stamp.rfc3339(),
                    format_go_duration(retain),
                    at.display()
                );
                deleted.push(at.clone());
            }
            (Err(e), _) => eprintln!(
                "nl6 collect: retention: could not delete {}: {e}",
                path.display()
            ),
        }
    }
    for link in &sweep.links {
        eprintln!(
            "nl6 collect: retention: left {} alone: a symbolic link inside -out (nl6 never follows links in its archive; replace it with a directory)",
            out.join(link).display()
        );
    }
    if let Some(first) = sweep.future.iter().max_by_key(|d| d.stamp) {
        eprintln!(
            "nl6 collect: retention: {} dated in the future kept (the latest {}, {}); retention deletes them only once they are older than {}; delete them by hand if a wrong clock made them",
            crate::goflag::count(sweep.future.len(), "directory", "directories"),
            out.join(&first.relative).display(),
            first.stamp.rfc3339(),
            format_go_duration(retain)
        );
    }
    deleted
}
