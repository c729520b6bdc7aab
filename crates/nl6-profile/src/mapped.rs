//! Read-only views of ELF images for the symbolizer, without copying them into the heap: a file mapped with
//! `mmap` (its pages are file-backed: the kernel reads them on first touch and may drop them again, so they
//! never count in `RssAnon` nor in the heap profile), and the vDSO the kernel mapped into the process.
//!
//! What it owns: the `mmap` call and the lifetime rule. A view lives for the rest of the process (the
//! symbolizer keeps one per object file it has looked into and parses names out of it on demand), so each
//! mapping is made once and never unmapped, which is what makes the `'static` slices sound.
//!
//! What it never does: write through a view, or run in a signal handler.
use std::fs::File;
use std::os::fd::AsRawFd;

/// Maps the whole of `file` read-only and private for the rest of the process.
///
/// A file truncated under the mapping would fault on access; the symbolizer only maps files whose inode is
/// the one the process has mapped already (a running binary cannot be written, and package managers
/// replace shared objects by renaming a new file over the path), so this is not expected in practice.
pub fn map_file(file: &File) -> std::io::Result<&'static [u8]> {
    let len = file.metadata()?.len();
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l > 0)
        .ok_or_else(|| std::io::Error::other("empty or oversized file"))?;
    // SAFETY: a fresh read-only private mapping at an address the kernel chooses; it replaces nothing.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `p` is readable for `len` bytes and is never unmapped (module doc), nor written (PROT_READ).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// Where the kernel mapped the vDSO's ELF header (`getauxval(AT_SYSINFO_EHDR)`; 0 off Linux).
fn vdso_base() -> u64 {
    #[cfg(target_os = "linux")]
    // SAFETY: getauxval only reads the auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    #[cfg(not(target_os = "linux"))]
    let base = 0;
    base
}

/// The vDSO image, `[start, start + len)` as `/proc/self/maps` lists `[vdso]`, if that is where the kernel
/// says it is (`getauxval(AT_SYSINFO_EHDR)`); `None` otherwise.
pub fn vdso(start: u64, len: u64) -> Option<&'static [u8]> {
    let ehdr = vdso_base();
    if ehdr == 0 || ehdr != start || len == 0 {
        return None;
    }
    let len = usize::try_from(len).ok()?;
    // SAFETY: the kernel maps the vDSO readable at AT_SYSINFO_EHDR for the life of the process, and the
    // maps entry says it spans `len` bytes.
    Some(unsafe { std::slice::from_raw_parts(ehdr as usize as *const u8, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_a_file_without_reading_it_into_the_heap() {
        let exe = File::open("/proc/self/exe").unwrap();
        let data = map_file(&exe).unwrap();
        assert_eq!(&data[..4], b"\x7fELF");
        assert_eq!(data.len() as u64, exe.metadata().unwrap().len());
        let empty = File::open("/dev/null").unwrap();
        assert!(map_file(&empty).is_err());
    }

    #[test]
    fn finds_the_vdso_only_where_the_kernel_put_it() {
        let maps = super::super::maps::read_self().unwrap();
        let Some(v) = maps.iter().find(|e| e.path == "[vdso]") else {
            return; // a kernel booted with vdso=0
        };
        let image = vdso(v.start, v.end - v.start).expect("vdso at AT_SYSINFO_EHDR");
        assert_eq!(&image[..4], b"\x7fELF");
        assert!(vdso(v.start + 4096, 4096).is_none());
    }
}
