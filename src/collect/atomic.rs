//! Atomic snapshot directories: a snapshot directory is assembled under a hidden partial name
//! ([`super::archive::partial_name`]) and renamed into place only when complete, so a crash never leaves a
//! directory that looks finished. Each file in it is written by [`crate::fsutil::write_atomically`].
//!
//! Never follows a path out of the directory it is given; never deletes anything but its own temporaries.
#![forbid(unsafe_code)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::archive::partial_name;
use crate::fsutil::write_atomically;

/// A snapshot directory under construction. Files go into the hidden partial directory; [`commit`]
/// renames it to its final name. Dropped without a commit, it removes the partial directory.
///
/// [`commit`]: PartialDir::commit
#[derive(Debug)]
pub struct PartialDir {
    partial: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl PartialDir {
    /// Creates the parents of `final_dir` and the hidden partial directory beside it. Fails if
    /// `final_dir` already exists (two snapshots never share a directory).
    pub fn create(final_dir: &Path, port: u16) -> io::Result<PartialDir> {
        let parent = final_dir
            .parent()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent"))?;
        fs::create_dir_all(parent)?;
        if fs::symlink_metadata(final_dir).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", final_dir.display()),
            ));
        }
        let partial = parent.join(partial_name(port, std::process::id()));
        if fs::symlink_metadata(&partial).is_ok() {
            // Left by an earlier crashed run with the same pid: it is ours to clear.
            fs::remove_dir_all(&partial)?;
        }
        fs::create_dir(&partial)?;
        Ok(PartialDir {
            partial,
            target: final_dir.to_path_buf(),
            committed: false,
        })
    }

    /// The directory files are being written into.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Writes `name` inside the partial directory atomically.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        write_atomically(&self.partial.join(name), bytes)
    }

    /// Renames the partial directory to its final name and returns that name.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        if fs::symlink_metadata(&self.target).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", self.target.display()),
            ));
        }
        fs::File::open(&self.partial)?.sync_all()?;
        fs::rename(&self.partial, &self.target)?;
        if let Some(parent) = self.target.parent() {
            // Make the rename durable; a failure here does not undo it.
            let _ = fs::File::open(parent).and_then(|d| d.sync_all());
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for PartialDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.partial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nl6-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn partial_dir_is_hidden_until_commit_and_removed_if_dropped() {
        let d = tempdir("p");
        let final_dir = d.join("prog/2026/11/29/10:00:00/host/8080");
        let pd = PartialDir::create(&final_dir, 8080).unwrap();
        pd.write("meta.json", b"{}").unwrap();
        assert!(!final_dir.exists());
        let partial = pd.path().to_path_buf();
        assert!(partial
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(".8080.partial-"));
        assert_eq!(pd.commit().unwrap(), final_dir);
        assert_eq!(fs::read(final_dir.join("meta.json")).unwrap(), b"{}");
        assert!(!partial.exists());
        // A second snapshot for the same directory is refused, and its partial dir cleaned up.
        assert_eq!(
            PartialDir::create(&final_dir, 8080).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let other = d.join("prog/2026/11/29/10:00:00/host/9090");
        let pd = PartialDir::create(&other, 9090).unwrap();
        let partial = pd.path().to_path_buf();
        drop(pd);
        assert!(!partial.exists() && !other.exists());
        fs::remove_dir_all(&d).unwrap();
    }
}
