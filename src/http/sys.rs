//! The few system calls the server needs that std does not offer: asking whether a socket's peer has
//! gone, a longer accept queue, and raising `RLIMIT_NOFILE`; `poll(2)` itself is [`crate::ready`]'s,
//! named here too so the server's files take every call from one place. Thin wrappers only; no policy
//! lives here.
//!
//! This is the one `unsafe` file of the HTTP layer: each call passes memory it owns for the call's duration.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub use crate::ready::{poll, PollFd};

/// True when the peer of socket `fd` has closed, reset or shut down its sending side (`POLLRDHUP`), or
/// `fd` is not open. Never waits.
pub fn peer_gone(fd: RawFd) -> bool {
    let mut fds = [PollFd::watch(fd, libc::POLLRDHUP)];
    match poll(&mut fds, Duration::ZERO) {
        Ok(_) => {
            fds[0].revents() & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL)
                != 0
        }
        Err(_) => false,
    }
}

/// Sets the accept queue of listening socket `fd` to `backlog` connections (the kernel caps it at
/// `net.core.somaxconn`); std listens with 128, which a burst of connections overflows, and a client whose
/// handshake is dropped retries only after a second.
pub fn set_listen_backlog(fd: RawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: listen(2) on a descriptor the caller owns; no memory is passed.
    if unsafe { libc::listen(fd, backlog) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

    #[test]
    fn peer_gone_sees_a_close_and_a_half_close() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.write_all(b"unread input is not a hang-up").unwrap();
        assert!(!peer_gone(server.as_raw_fd()));
        client.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(poll_until(|| peer_gone(server.as_raw_fd())));
        let (other, _) = {
            let _c = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            listener.accept().unwrap()
        };
        assert!(poll_until(|| peer_gone(other.as_raw_fd())));
    }

    fn poll_until(cond: impl Fn() -> bool) -> bool {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < end {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn nofile_limit_is_raised_to_hard() {
        let (old, new) = raise_nofile_limit().unwrap();
        assert!(new >= old);
    }
}
