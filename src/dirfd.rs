//! Directories held open as file descriptors, and every operation relative to one (`openat`, `mkdirat`,
//! `unlinkat`, `renameat2`, `fstatat`), never following a symbolic link below the directory first opened:
//! a path component swapped for a symlink between a check and a use cannot redirect a write or a delete
//! (the `remove_dir_all` TOCTOU class). `nl6 collect`'s local archive and spool go through it.
//!
//! Thin wrappers only; no policy lives here. This is the one `unsafe` file of the file-system code: each
//! call passes a NUL-terminated name and memory it owns for the call's duration.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What a directory entry is, seen without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// A directory held open. Every name passed to its methods is one path component (no `/`).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

fn cname(name: &OsStr) -> io::Result<CString> {
    if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not one path component", name),
        ));
    }
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The error for a component that is a symbolic link where a directory or file was wanted.
pub fn symlink_refused(name: &OsStr) -> io::Error {
    io::Error::other(format!(
        "{} is a symbolic link; refused (nl6 never follows links inside its archive)",
        Path::new(name).display()
    ))
}

impl Dir {
    /// Opens `path` as the root of the operations (following links in `path` itself: the caller named it).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `c` is NUL-terminated and lives for the call.
        let fd = check(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(Dir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// What `name` is, without following it; `None` when it does not exist.
    pub fn kind(&self, name: &OsStr) -> io::Result<Option<Kind>> {
        let c = cname(name)?;
        // SAFETY: stat is plain data; fstatat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is NUL-terminated, `st` writable, both live for the call.
        let r =
            unsafe { libc::fstatat(self.raw(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            };
        }
        Ok(Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFREG => Kind::File,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        }))
    }

    fn openat(&self, name: &OsStr, flags: libc::c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
        let c = cname(name)?;
        // SAFETY: `c` is NUL-terminated and lives for the call.
        let r = unsafe {
            libc::openat(
                self.raw(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        };
        match check(r) {
            // SAFETY: `fd` was just opened and is owned by nobody else.
            Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Err(symlink_refused(name)),
            Err(e)
                if e.raw_os_error() == Some(libc::ENOTDIR)
                    && self.kind(name).ok().flatten() == Some(Kind::Symlink) =>
            {
                Err(symlink_refused(name))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the subdirectory `name`; a symlink is refused ([`symlink_refused`]).
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.openat(name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?,
        })
    }

    /// Opens the subdirectory `name`, creating it (mode 0755) first when missing.
    pub fn open_or_create_dir(&self, name: &OsStr) -> io::Result<Dir> {
        match self.create_dir(name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        self.open_dir(name)
    }

    /// Creates the subdirectory `name` (mode 0755); fails if anything has that name.
    pub fn create_dir(&self, name: &OsStr) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: `c` is NUL-terminated and lives for the call.
        check(unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o755) }).map(|_| ())
    }

    /// Opens the regular file `name` for reading; a symlink is refused.
    pub fn open_file(&self, name: &OsStr) -> io::Result<File> {
        Ok(File::from(self.openat(name, libc::O_RDONLY, 0)?))
    }

    /// Creates `name` (mode 0644) for writing; fails if anything has that name.
    pub fn create_new_file(&self, name: &OsStr) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        Ok(File::from(self.openat(name, flags, 0o644)?))
    }

    /// Writes `bytes` to `name` so a reader sees the old file or the whole new one: a hidden temporary
    /// beside it, synced, renamed over it.
    pub fn write_atomically(&self, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".tmp-{}", std::process::id()));
        let _ = self.remove_file(&tmp);
        let result = (|| {
            let mut f = self.create_new_file(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            self.rename(&tmp, self, name, false)
        })();
        if result.is_err() {
            let _ = self.remove_file(&tmp);
        }
        result
    }

    /// Renames `from` (in this directory) to `to` in `to_dir`; with `no_replace`, fails with
    /// `AlreadyExists` rather than replace anything there (`RENAME_NOREPLACE`, atomic).
    pub fn rename(
        &self,
        from: &OsStr,
        to_dir: &Dir,
        to: &OsStr,
        no_replace: bool,
    ) -> io::Result<()> {
        let (f, t) = (cname(from)?, cname(to)?);
        let flags: libc::c_uint = if no_replace {
            libc::RENAME_NOREPLACE
        } else {
            0
        };
        // SAFETY: both names are NUL-terminated and live for the call; renameat2 takes plain ints.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                self.raw(),
                f.as_ptr(),
                to_dir.raw(),
                t.as_ptr(),
                flags,
            )
        };
        check(r as libc::c_int).map(|_| ())
    }

    /// Removes the file or symlink `name` (a symlink as a link: its target is untouched).
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: `c` is NUL-terminated and lives for the call.
        check(unsafe { libc::unlinkat(self.raw(), c.as_ptr(), 0) }).map(|_| ())
    }

    /// Removes the empty directory `name`.
    pub fn remove_empty_dir(&self, name: &OsStr) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: `c` is NUL-terminated and lives for the call.
        check(unsafe { libc::unlinkat(self.raw(), c.as_ptr(), libc::AT_REMOVEDIR) }).map(|_| ())
    }

    /// Removes the directory `name` and everything in it, descending only through directories opened
    /// with `O_NOFOLLOW` (symlinks inside are removed as links). Returns the files and links removed.
    /// Refuses a tree deeper than `max_depth`.
    pub fn remove_tree(&self, name: &OsStr, max_depth: usize) -> io::Result<u64> {
        if max_depth == 0 {
            return Err(io::Error::other(format!(
                "{} is nested too deep; left alone",
                Path::new(name).display()
            )));
        }
        let sub = self.open_dir(name)?;
        let mut removed = 0;
        for (entry, kind) in sub.entries()? {
            if kind == Kind::Dir {
                removed += sub.remove_tree(&entry, max_depth - 1)?;
            } else {
                sub.remove_file(&entry)?;
                removed += 1;
            }
        }
        self.remove_empty_dir(name)?;
        Ok(removed)
    }

    /// Every entry but `.` and `..`, with its kind (not followed), sorted by name.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        // SAFETY: F_DUPFD_CLOEXEC takes and returns plain ints.
        let dup = check(unsafe { libc::fcntl(self.raw(), libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: `dup` is ours; fdopendir takes ownership of it on success.
        let dirp = unsafe { libc::fdopendir(dup) };
        if dirp.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `dup` is still ours to close.
            unsafe { libc::close(dup) };
            return Err(e);
        }
        // Rewind: a dup shares the file offset with earlier listings of the same descriptor.
        // SAFETY: `dirp` is a valid DIR* until closedir.
        unsafe { libc::rewinddir(dirp) };
        let mut names = Vec::new();
        loop {
            // SAFETY: `dirp` is valid; readdir returns null at the end or on error.
            let ent = unsafe { libc::readdir(dirp) };
            if ent.is_null() {
                break;
            }
            // SAFETY: a non-null dirent from readdir holds a NUL-terminated d_name, valid until the
            // next readdir; it is copied at once.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name.to_vec()));
            }
        }
        // SAFETY: `dirp` is valid and closed once (this closes `dup`).
        unsafe { libc::closedir(dirp) };
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            if let Some(k) = self.kind(&n)? {
                out.push((n, k));
            }
        }
        Ok(out)
    }

    /// Flushes the directory's entries (a rename into it) to disk.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: fsync takes a plain fd we own.
        check(unsafe { libc::fsync(self.raw()) }).map(|_| ())
    }

    /// Where this directory is now, as the kernel names it (it may have moved since it was opened): what
    /// a log line names after a delete.
    pub fn current_path(&self) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/self/fd/{}", self.raw())).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nl6-dirfd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn links_are_refused_and_removed_as_links() {
        let d = tempdir("links");
        let outside = d.join("outside");
        std::fs::create_dir_all(outside.join("keep")).unwrap();
        std::fs::write(outside.join("keep/f"), "x").unwrap();
        let root = Dir::open(&d.join("")).unwrap();
        let a = root.open_or_create_dir(OsStr::new("a")).unwrap();
        symlink(&outside, d.join("a/link")).unwrap();
        let e = a.open_dir(OsStr::new("link")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(a.create_new_file(OsStr::new("link")).is_err());
        a.write_atomically(OsStr::new("m.json"), b"{}").unwrap();
        a.write_atomically(OsStr::new("m.json"), b"{1}").unwrap();
        assert_eq!(std::fs::read(d.join("a/m.json")).unwrap(), b"{1}");
        let names: Vec<_> = a.entries().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, [OsString::from("link"), OsString::from("m.json")]);
        assert_eq!(root.remove_tree(OsStr::new("a"), 4).unwrap(), 2);
        assert!(!d.join("a").exists());
        assert_eq!(std::fs::read(outside.join("keep/f")).unwrap(), b"x");
        let b = root.open_or_create_dir(OsStr::new("b")).unwrap();
        b.create_dir(OsStr::new("c")).unwrap();
        let e = root.rename(OsStr::new("b"), &root, OsStr::new("outside"), true);
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert!(cname(OsStr::new("x/y")).is_err() && cname(OsStr::new("..")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
