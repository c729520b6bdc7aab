//! Atomic snapshot directories: a snapshot directory is assembled under a hidden partial name
//! ([`super::archive::partial_name`]) and renamed into place only when complete (`RENAME_NOREPLACE`:
//! an existing snapshot is never replaced), so a crash never leaves a directory that looks finished.
//!
//! Every component below `-out` is opened relative to its parent without following links
//! ([`crate::dirfd`]): a program or date directory that is a symlink is refused, never written through.
//! Never deletes anything but its own partial directory.
#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use super::archive::partial_name;
use crate::dirfd::Dir;

/// A snapshot directory under construction. Files go into the hidden partial directory; [`commit`]
/// renames it to its final name. Dropped without a commit, it removes the partial directory.
///
/// [`commit`]: PartialDir::commit
#[derive(Debug)]
pub struct PartialDir {
    parent: Dir,
    partial: Dir,
    partial_name: OsString,
    name: OsString,
    target: PathBuf,
    committed: bool,
}

/// Opens (creating when missing) every directory of `relative` below `root`, refusing links; an error
/// names the component's full path.
pub fn open_path(root: &Path, relative: &Path) -> io::Result<Dir> {
    let mut dir = Dir::open(root)?;
    let mut at = root.to_path_buf();
    for name in relative.iter() {
        at.push(name);
        dir = dir.open_or_create_dir(name).map_err(|e| {
            if dir.kind(name).ok().flatten() == Some(crate::dirfd::Kind::Symlink) {
                crate::dirfd::symlink_refused(at.as_os_str())
            } else {
                io::Error::new(e.kind(), format!("{}: {e}", at.display()))
            }
        })?;
    }
    Ok(dir)
}

impl PartialDir {
    /// Creates the parents of `out/relative` and the hidden partial directory beside it. Fails if
    /// the snapshot already exists (two snapshots never share a directory) or a component is a link.
    pub fn create(out: &Path, relative: &Path, port: u16) -> io::Result<PartialDir> {
        let target = out.join(relative);
        let (Some(parent_rel), Some(name)) = (relative.parent(), relative.file_name()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no parent"));
        };
        let parent = open_path(out, parent_rel)?;
        if parent.kind(name)?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            ));
        }
        let partial_name = OsString::from(partial_name(port, std::process::id()));
        if parent.kind(&partial_name)?.is_some() {
            // Left by an earlier crashed run with the same pid: it is ours to clear.
            parent.remove_tree(&partial_name, 8)?;
        }
        parent.create_dir(&partial_name)?;
        let partial = parent.open_dir(&partial_name)?;
        Ok(PartialDir {
            parent,
            partial,
            partial_name,
            name: name.to_os_string(),
            target,
            committed: false,
        })
    }

    /// Writes `name` inside the partial directory atomically.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.partial.write_atomically(OsStr::new(name), bytes)
    }

    /// Renames the partial directory to its final name and returns that name.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        self.partial.sync()?;
        self.parent
            .rename(&self.partial_name, &self.parent, &self.name, true)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => io::Error::new(
                    e.kind(),
                    format!("{} already exists", self.target.display()),
                ),
                _ => e,
            })?;
        // Make the rename durable; a failure here does not undo it.
        let _ = self.parent.sync();
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for PartialDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.parent.remove_tree(&self.partial_name, 8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nl6-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn partial_dir_is_hidden_until_commit_and_removed_if_dropped() {
        let d = tempdir("p");
        let rel = Path::new("prog/2026/11/29/10:00:00/host/8080");
        let final_dir = d.join(rel);
        let pd = PartialDir::create(&d, rel, 8080).unwrap();
        pd.write("meta.json", b"{}").unwrap();
        assert!(!final_dir.exists());
        let partial = d
            .join("prog/2026/11/29/10:00:00/host")
            .join(&pd.partial_name);
        assert!(partial.is_dir());
        assert!(pd
            .partial_name
            .to_str()
            .unwrap()
            .starts_with(".8080.partial-"));
        assert_eq!(pd.commit().unwrap(), final_dir);
        assert_eq!(fs::read(final_dir.join("meta.json")).unwrap(), b"{}");
        assert!(!partial.exists());
        // A second snapshot for the same directory is refused, and its partial dir cleaned up.
        assert_eq!(
            PartialDir::create(&d, rel, 8080).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let other = Path::new("prog/2026/11/29/10:00:00/host/9090");
        let pd = PartialDir::create(&d, other, 9090).unwrap();
        let partial = d
            .join("prog/2026/11/29/10:00:00/host")
            .join(&pd.partial_name);
        drop(pd);
        assert!(!partial.exists() && !d.join(other).exists());
        // A program directory that is a link is refused, and nothing is written through it.
        let outside = d.join("outside");
        fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("linked")).unwrap();
        let e = PartialDir::create(&d, Path::new("linked/2026/11/29/10:00:00/h/1"), 1);
        assert!(e.unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        fs::remove_dir_all(&d).unwrap();
    }
}
