//! Finding the process's threads without allocating: the thread count from `/proc/self/stat`, and the
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

/// `num_threads` (field 20) from the text of `/proc/<pid>/stat` (pure). The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
pub(crate) fn num_threads_of(stat: &[u8]) -> Option<usize> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let after = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    // After ")" come field 3 (state) onwards: num_threads is the 18th of them.
    after.split_ascii_whitespace().nth(17)?.parse().ok()
}

/// The process's current thread count, from one read of `/proc/self/stat` into a stack buffer.
pub(crate) fn thread_count() -> Option<usize> {
    let mut buf = [0u8; 1024];
    num_threads_of(read_small(c"/proc/self/stat", &mut buf)?)
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
        // SAFETY: getdents64 writes at most buf.len() bytes of records into our buffer.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.0,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        match usize::try_from(n) {
            Ok(0) => break,
            Ok(n) => parse_dirents(buf.get(..n).unwrap_or(&[]), out),
            Err(_) => return Err(io::Error::last_os_error()),
        }
    }
    out.sort_unstable();
    Ok(())
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
    fn parses_num_threads_after_the_command_name() {
        let stat = b"1234 (a) b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 7 0 99 1000 50";
        assert_eq!(num_threads_of(stat), Some(7));
        assert_eq!(num_threads_of(b"1234 (x) S 1"), None);
        assert!(thread_count().is_some_and(|n| n >= 1));
    }

    #[test]
    fn lists_this_process_threads() {
        let (mut buf, mut tids) = (Vec::new(), Vec::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(crate::profiling::signal::gettid()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        let other = rx.recv().unwrap();
        assert!(is_our_thread(other) && !is_our_thread(i32::MAX));
        assert!(last_pid().is_some_and(|p| p >= other), "ns_last_pid");
        list_tids_into(&mut buf, &mut tids).unwrap();
        assert!(tids.contains(&other) && tids.contains(&crate::profiling::signal::gettid()));
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
