//! The archive I/O around [`super::archive`]'s pure rules: listing dated directories under `-out`,
//! deleting the expired ones, and finding archived profiles for `-baseline`.
//!
//! Never follows a symbolic link: entries are examined with `symlink_metadata`, only real directories
//! are descended into, and a symlink met at any level above a snapshot is left alone (neither followed
//! nor deleted). Inside an expired dated directory, `remove_dir_all` removes symlinks as links, so
//! their targets survive. Nothing outside `-out` is ever touched.
#![forbid(unsafe_code)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::archive::{parse_dated_relative, select_expired, DatedDir};

/// Real (non-symlink) subdirectories of `dir`, sorted; unreadable directories yield none.
fn real_subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            fs::symlink_metadata(p)
                .map(|m| m.file_type().is_dir())
                .unwrap_or(false)
        })
        .collect();
    out.sort();
    out
}

/// Every `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` real directory under `out`.
pub fn list_dated_dirs(out: &Path) -> Vec<DatedDir> {
    let mut level = vec![out.to_path_buf()];
    for _ in 0..5 {
        level = level.iter().flat_map(|d| real_subdirs(d)).collect();
    }
    level
        .iter()
        .filter_map(|p| p.strip_prefix(out).ok())
        .filter_map(parse_dated_relative)
        .collect()
}

/// One deletion retention made (or failed to make).
#[derive(Debug)]
pub struct Deletion {
    pub dir: DatedDir,
    pub result: io::Result<()>,
}

/// Deletes the dated directories under `out` older than `retain` at `now_unix`, then any `dd`, `mm`,
/// `yyyy` directories left empty. Returns what it did, for the log.
pub fn apply_retention(out: &Path, now_unix: i64, retain: Duration) -> Vec<Deletion> {
    let expired = select_expired(&list_dated_dirs(out), now_unix, retain);
    expired
        .into_iter()
        .map(|dir| {
            let result = delete_inside(out, &dir.relative);
            if result.is_ok() {
                prune_empty_parents(out, &dir.relative);
            }
            Deletion { dir, result }
        })
        .collect()
}

/// Removes `out/relative` after checking that no component of `relative` is a symlink (the listing
/// already checked, but the tree may have changed since).
fn delete_inside(out: &Path, relative: &Path) -> io::Result<()> {
    let mut p = out.to_path_buf();
    for c in relative.components() {
        p.push(c);
        let meta = fs::symlink_metadata(&p)?;
        if !meta.file_type().is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a real directory; left alone",
                p.display()
            )));
        }
    }
    fs::remove_dir_all(&p)
}

/// Removes the `dd`, `mm` and `yyyy` directories above a deleted snapshot when they became empty.
fn prune_empty_parents(out: &Path, relative: &Path) {
    let mut p = out.join(relative);
    for _ in 0..3 {
        if !p.pop() {
            return;
        }
        // remove_dir only removes an empty directory; anything else stays.
        if fs::remove_dir(&p).is_err() {
            return;
        }
    }
}

/// Every file named `file` under `dir` (depth ≤ 10, symlinks not followed), for baseline lookup.
pub fn find_files(dir: &Path, file: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..=10 {
        let mut next = Vec::new();
        for d in &level {
            let Ok(entries) = fs::read_dir(d) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let p = e.path();
                let Ok(meta) = fs::symlink_metadata(&p) else {
                    continue;
                };
                if meta.file_type().is_dir() {
                    next.push(p);
                } else if meta.file_type().is_file() && e.file_name() == file {
                    found.push(p);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    found
}
