//! The local archive's I/O around [`super::archive`]'s pure rules: listing dated directories under
//! `-out`, deleting the expired ones, naming the future-dated ones, and finding archived profiles for
//! `-baseline`.
//!
//! Never follows a symbolic link below `-out`: every component is opened relative to its parent's
//! descriptor with `O_NOFOLLOW` ([`crate::dirfd`]) and deletes are `unlinkat` relative to those, so a
//! directory swapped for a link mid-sweep cannot send a delete outside the archive. A link met above a
//! snapshot is left alone and named in the sweep's report; inside an expired snapshot a link is removed
//! as a link, its target untouched.
#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::archive::{parse_dated_relative, select_expired, DatedDir};
use crate::dirfd::{Dir, Kind};

/// Deepest tree retention removes below a dated directory (`<fqdn>/<port>/<file>` is 3).
const SNAPSHOT_DEPTH: usize = 8;

/// What one listing found: the dated directories, and the symlinks it left alone on the way.
#[derive(Debug, Default)]
pub struct Listing {
    pub dated: Vec<DatedDir>,
    /// Paths relative to `-out` that are symbolic links where the layout has directories.
    pub links: Vec<PathBuf>,
}

/// Every `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` real directory under `out`, and the links in the way.
pub fn list(out: &Path) -> Listing {
    let mut listing = Listing::default();
    let Ok(root) = Dir::open(out) else {
        return listing;
    };
    walk(&root, PathBuf::new(), 5, &mut listing);
    listing
}

fn walk(dir: &Dir, rel: PathBuf, levels: usize, listing: &mut Listing) {
    if levels == 0 {
        if let Some(d) = parse_dated_relative(&rel) {
            listing.dated.push(d);
        }
        return;
    }
    let Ok(entries) = dir.entries() else { return };
    for (name, kind) in entries {
        // Hidden names are the collector's partial snapshots and temporaries.
        if name.as_encoded_bytes().first() == Some(&b'.') {
            continue;
        }
        match kind {
            Kind::Dir => {
                if let Ok(sub) = dir.open_dir(&name) {
                    walk(&sub, rel.join(&name), levels - 1, listing);
                }
            }
            Kind::Symlink => listing.links.push(rel.join(&name)),
            _ => {}
        }
    }
}

/// Every `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` real directory under `out`.
pub fn list_dated_dirs(out: &Path) -> Vec<DatedDir> {
    list(out).dated
}

/// One deletion retention made (or failed to make).
#[derive(Debug)]
pub struct Deletion {
    pub dir: DatedDir,
    pub result: io::Result<()>,
    /// Where the removed directory really was when it was removed, when that is not
    /// `<out>/<relative>` (its parent moved during the sweep).
    pub moved_to: Option<PathBuf>,
}

/// One sweep: what was deleted, the links left alone, the directories dated in the future.
#[derive(Debug, Default)]
pub struct Sweep {
    pub deletions: Vec<Deletion>,
    pub links: Vec<PathBuf>,
    pub future: Vec<DatedDir>,
}

/// Deletes the dated directories under `out` older than `retain` at `now_unix`, then any `dd`, `mm`,
/// `yyyy` directories left empty. Returns what it did, for the log.
pub fn apply_retention(out: &Path, now_unix: i64, retain: Duration) -> Vec<Deletion> {
    sweep(out, now_unix, retain).deletions
}

/// [`apply_retention`], plus the links left alone and the directories dated more than a minute after
/// `now_unix` (kept: a clock that was wrong made them, and only a person can tell).
pub fn sweep(out: &Path, now_unix: i64, retain: Duration) -> Sweep {
    let listing = list(out);
    let future = listing
        .dated
        .iter()
        .filter(|d| d.stamp.to_unix() > now_unix + 60)
        .cloned()
        .collect();
    let deletions = select_expired(&listing.dated, now_unix, retain)
        .into_iter()
        .map(|dir| {
            let (result, moved_to) = match delete_inside(out, &dir.relative) {
                Ok(at) => (Ok(()), at.filter(|p| *p != out.join(&dir.relative))),
                Err(e) => (Err(e), None),
            };
            Deletion {
                dir,
                result,
                moved_to,
            }
        })
        .collect();
    Sweep {
        deletions,
        links: listing.links,
        future,
    }
}

/// Removes `out/relative` (a dated directory or a snapshot below one), every component opened without
/// following links, and prunes the directories above it it emptied (down to the program's).
pub fn remove_inside(out: &Path, relative: &Path) -> io::Result<()> {
    delete_inside(out, relative).map(|_| ())
}

/// Removes `out/relative`, every component opened without following links, and prunes the `dd`, `mm`
/// and `yyyy` directories it emptied. Returns where the directory really was, as the kernel names it.
fn delete_inside(out: &Path, relative: &Path) -> io::Result<Option<PathBuf>> {
    let names: Vec<&OsStr> = relative.iter().collect();
    let Some((last, parents)) = names.split_last() else {
        return Err(io::Error::other("empty path"));
    };
    let mut chain = vec![Dir::open(out)?];
    for name in parents {
        let next = chain[chain.len() - 1].open_dir(name)?;
        chain.push(next);
    }
    let parent = &chain[chain.len() - 1];
    parent.remove_tree(last, SNAPSHOT_DEPTH)?;
    let at = parent.current_path().map(|p| p.join(last));
    // `dd`, `mm`, `yyyy`: removed only when empty (remove_empty_dir fails otherwise, and that stops it).
    for i in (2..chain.len()).rev() {
        // A day left with only its index page is empty too: the page lists nothing any more.
        let index = OsStr::new("index.html");
        if let Ok(entries) = chain[i].entries() {
            if entries.len() == 1 && entries[0].0 == index {
                let _ = chain[i].remove_file(index);
            }
        }
        if chain[i - 1].remove_empty_dir(names[i - 1]).is_err() {
            break;
        }
    }
    Ok(at)
}

/// The visible files exactly `depth` levels below `out/relative`, as `/`-joined paths relative to it
/// (links never followed; hidden names, partial snapshots among them, skipped).
pub fn files_below(out: &Path, relative: &Path, depth: usize) -> Vec<String> {
    fn walk(dir: &Dir, rel: String, depth: usize, out: &mut Vec<String>) {
        for (name, kind) in dir.entries().unwrap_or_default() {
            let Ok(name) = name.into_string() else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            match (kind, depth) {
                (Kind::File, 1) => out.push(path),
                (Kind::Dir, d) if d > 1 => {
                    if let Ok(sub) = dir.open_dir(OsStr::new(&name)) {
                        walk(&sub, path, d - 1, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut found = Vec::new();
    let Ok(mut dir) = Dir::open(out) else {
        return found;
    };
    for name in relative.iter() {
        match dir.open_dir(name) {
            Ok(d) => dir = d,
            Err(_) => return found,
        }
    }
    walk(&dir, String::new(), depth, &mut found);
    found
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
