//! The few system calls the server needs that std does not offer: `poll(2)` over many sockets and
//! raising `RLIMIT_NOFILE`. Thin wrappers only; no policy lives here.
//!
//! This is the one `unsafe` file of the HTTP layer: each call passes memory it owns for the call's duration.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Readable (or hung up / errored: all mean "a read will not block").
pub const READABLE: i16 = libc::POLLIN | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;

/// One descriptor to watch for readability, and what poll saw.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// Watches `fd` for input.
    pub fn readable(fd: RawFd) -> PollFd {
        PollFd(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
    }

    /// True when the last poll reported `fd` ready to read (data, end of stream or an error).
    pub fn is_ready(&self) -> bool {
        self.0.revents & READABLE != 0
    }
}

/// Waits until one of `fds` is readable or `timeout` passes. EINTR is returned as `Ok(0)` (a spurious
/// wake-up the caller's loop absorbs), so a profiler's signal never looks like an error.
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `PollFd` is `repr(transparent)` over `libc::pollfd`, so the slice is a valid array of
    // `fds.len()` pollfd structs that we own mutably for the duration of the call.
    let n = unsafe {
        libc::poll(
            fds.as_mut_ptr().cast::<libc::pollfd>(),
            fds.len() as libc::nfds_t,
            ms,
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(n as usize)
}

/// True when the peer of the connected socket `fd` has closed its side (FIN: `POLLRDHUP`) or the
/// connection is reset or broken (`POLLHUP`, `POLLERR`); unread input alone is not. Never blocks (zero
/// timeout); a descriptor that is no longer open counts as gone (`POLLNVAL`).
pub fn peer_closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one pollfd we own for the call; a zero timeout never blocks.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    let gone = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
    n > 0 && p.revents & gone != 0
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns `(old_soft, new_soft)`.
pub fn raise_nofile_limit() -> io::Result<(libc::rlim_t, libc::rlim_t)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let old = lim.rlim_cur;
    if lim.rlim_cur >= lim.rlim_max {
        return Ok((old, old));
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` is a valid rlimit read back from the kernel with only the soft limit changed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((old, lim.rlim_cur))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn poll_sees_readable_and_times_out() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut fds = [PollFd::readable(b.as_raw_fd())];
        assert_eq!(poll(&mut fds, Duration::from_millis(10)).unwrap(), 0);
        assert!(!fds[0].is_ready());
        a.write_all(b"x").unwrap();
        assert_eq!(poll(&mut fds, Duration::from_millis(1000)).unwrap(), 1);
        assert!(fds[0].is_ready());
    }

    #[test]
    fn peer_closed_sees_a_close_and_a_half_close_but_not_unread_input() {
        use std::net::{Shutdown, TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!peer_closed(server.as_raw_fd()));
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !peer_closed(server.as_raw_fd()),
            "unread input is not a close"
        );
        drop(client);
        std::thread::sleep(Duration::from_millis(50));
        assert!(peer_closed(server.as_raw_fd()));

        let half = TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().unwrap();
        half.shutdown(Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            peer_closed(server.as_raw_fd()),
            "a half-close ends the request, as in Go"
        );
    }

    #[test]
    fn nofile_limit_is_raised_to_hard() {
        let (old, new) = raise_nofile_limit().unwrap();
        assert!(new >= old);
    }
}
