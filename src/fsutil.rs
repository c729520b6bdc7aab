//! Writing a file so a reader sees the old contents or the whole new ones, never a torn file: the one
//! place `nl6 collect` (each file of a snapshot) and `nl6 report` (`-svg`) write files.
//!
//! Invariants: the temporary is a hidden sibling in the final directory (so the rename never crosses a
//! file system), created with `create_new` (never follows or reuses an existing path), synced before the
//! rename, and removed when anything fails.
#![forbid(unsafe_code)]

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically (temporary sibling, fsync, rename).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporaries() {
        let d = std::env::temp_dir().join(format!("nl6-fsutil-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let f = d.join("a.txt");
        write_atomically(&f, b"one").unwrap();
        write_atomically(&f, b"two").unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("a.txt")]);
        assert!(write_atomically(&d.join("missing/x"), b"x").is_err());
        fs::remove_dir_all(&d).unwrap();
    }
}
