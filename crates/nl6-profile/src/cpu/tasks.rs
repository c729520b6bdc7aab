//! Finding the process's threads without allocating: the thread count from one `stat` of
//! `/proc/self/task`, and the
//! thread ids from `/proc/self/task` read with `getdents64` into buffers the caller keeps.
//!
//! The collector checks every tick, whatever the number of threads: the count, and the last pid the
//! kernel handed out in our pid namespace (`/proc/sys/kernel/ns_last_pid`). The count alone misses a
//! thread born in the same tick another one exited; the last pid does not: every id handed out since the
//! previous tick is probed (`/proc/self/task/<id>` exists?), so a new thread of ours is found while the
//! cost follows the machine's process-creation rate, not our thread count. The ids are listed only when
//! something of ours changed, when too many ids were handed out to probe, or every
//! [`super::timers::FULL_LIST_EVERY`] ticks; see `Timers::rescan`. Never: allocates once the caller's
//! buffers have grown to fit; runs in a signal handler.
use std::io;
use std::os::raw::c_int;

/// Closes a raw file descriptor on drop.
struct Fd(c_int);

impl Fd {
    fn open(path: &std::ffi::CStr, flags: c_int) -> io::Result<Fd> {
        // SAFETY: a NUL-terminated path; the descriptor is closed on drop.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Fd(fd))
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor we opened.
        unsafe { libc::close(self.0) };
    }
}

/// The process's current thread count: the link count of `/proc/self/task` is the thread count plus
/// 2 (`.` and `..`), and one `stat` of it costs the same for any number of threads. (`num_threads` in
/// `/proc/self/stat` does not: that file sums every thread's times, about 2 ms with 10 000 threads.)
pub(crate) fn thread_count() -> Option<usize> {
    // SAFETY: stat fills one struct we own; the path is NUL-terminated.
    let nlink = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::stat(c"/proc/self/task".as_ptr(), &mut st) != 0 {
            return None;
        }
        st.st_nlink
    };
    usize::try_from(nlink).ok()?.checked_sub(2)
}

/// Reads a small /proc file into `buf`; returns the bytes read.
fn read_small<'a>(path: &std::ffi::CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let fd = Fd::open(path, 0).ok()?;
    // SAFETY: reading at most buf.len() bytes into our buffer.
    let n = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
    buf.get(..usize::try_from(n).ok()?)
}

/// The last process or thread id the kernel handed out in our pid namespace (None if unreadable).
pub(crate) fn last_pid() -> Option<i32> {
    let mut buf = [0u8; 32];
    let text = read_small(c"/proc/sys/kernel/ns_last_pid", &mut buf)?;
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// True when `tid` is a thread of this process right now (`/proc/self/task/<tid>` exists). No
/// allocation: the path is formatted into a stack buffer.
pub(crate) fn is_our_thread(tid: i32) -> bool {
    use std::io::Write;
    let mut path = [0u8; 40];
    let mut w = &mut path[..];
    if write!(w, "/proc/self/task/{tid}\0").is_err() {
        return false;
    }
    // SAFETY: a NUL-terminated path in our buffer.
    unsafe { libc::access(path.as_ptr().cast(), libc::F_OK) == 0 }
}

/// Appends the thread ids named by the `linux_dirent64` records in `buf` to `out` (pure).
pub(crate) fn parse_dirents(buf: &[u8], out: &mut Vec<i32>) {
    // Record: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name NUL-terminated.
    let mut at = 0;
    while let Some(head) = buf.get(at..at + 19) {
        let reclen = usize::from(u16::from_ne_bytes([head[16], head[17]]));
        if reclen < 19 {
            break;
        }
        let name = buf.get(at + 19..at + reclen).unwrap_or(&[]);
        let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
        let tid = std::str::from_utf8(name)
            .ok()
            .and_then(|n| n.parse::<i32>().ok());
        if let Some(tid) = tid.filter(|t| *t > 0) {
            out.push(tid);
        }
        at += reclen;
    }
}

/// Lists the live thread ids into `out` (cleared first, sorted), reading directory records through
/// `buf` (grown to 32 KiB on first use, then reused).
pub(crate) fn list_tids_into(buf: &mut Vec<u8>, out: &mut Vec<i32>) -> io::Result<()> {
    out.clear();
    if buf.len() < 32 << 10 {
        buf.resize(32 << 10, 0);
    }
    let dir = Fd::open(c"/proc/self/task", libc::O_DIRECTORY)?;
    loop {
        match getdents(dir.0, buf)? {
            0 => break,
            n => parse_dirents(buf.get(..n).unwrap_or(&[]), out),
        }
    }
    out.sort_unstable();
    Ok(())
}

/// One `getdents64` into `buf`: the bytes of records written (0 at the end).
#[cfg(target_os = "linux")]
fn getdents(fd: libc::c_int, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: getdents64 writes at most buf.len() bytes of records into our buffer.
    let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// No `/proc/self/task` listing off Linux.
#[cfg(not(target_os = "linux"))]
fn getdents(_fd: libc::c_int, _buf: &mut [u8]) -> io::Result<usize> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The process's live thread ids, sorted (allocating: for one-off callers such as the stack capture).
pub(crate) fn list_tids() -> io::Result<Vec<i32>> {
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    list_tids_into(&mut buf, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_process_threads() {
        let (mut buf, mut tids) = (Vec::new(), Vec::new());
        list_tids_into(&mut buf, &mut tids).unwrap();
        let n = thread_count().expect("thread count");
        // Test threads come and go: the two readings agree within a few.
        assert!(
            n >= 1 && n.abs_diff(tids.len()) <= 4,
            "{n} vs {}",
            tids.len()
        );
    }

    #[test]
    fn lists_this_process_threads() {
        let (mut buf, mut tids) = (Vec::new(), Vec::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(crate::signal::gettid()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        let other = rx.recv().unwrap();
        assert!(is_our_thread(other) && !is_our_thread(i32::MAX));
        assert!(last_pid().is_some_and(|p| p >= other), "ns_last_pid");
        list_tids_into(&mut buf, &mut tids).unwrap();
        assert!(tids.contains(&other) && tids.contains(&crate::signal::gettid()));
        assert!(tids.windows(2).all(|w| w[0] < w[1]), "sorted");
        h.join().unwrap();
    }

    #[test]
    fn parses_dirent_records() {
        let mut buf = Vec::new();
        for name in [".", "..", "42", "7"] {
            let reclen = (19 + name.len() + 1).next_multiple_of(8);
            let mut rec = vec![0u8; reclen];
            rec[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
            rec[19..19 + name.len()].copy_from_slice(name.as_bytes());
            buf.extend_from_slice(&rec);
        }
        let mut out = Vec::new();
        parse_dirents(&buf, &mut out);
        assert_eq!(out, vec![42, 7]);
    }
}
