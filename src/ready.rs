//! Readiness, the waits that std does not offer: `poll(2)` over a set of descriptors ([`PollFd`],
//! [`poll`]; [`poll_until`] waits to a deadline through signals), and an `epoll(7)` set ([`Epoll`]) whose
//! wait costs in proportion to the descriptors that are ready, not to those watched (the SNMP serving
//! threads' thousands of per-port sockets). A leaf every layer can reach: the HTTP server's poll loop and
//! the lab's serving threads and senders wait through it, so no layer borrows another's system calls.
//! Thin wrappers; no policy.
//!
//! One of the few `unsafe` files: each call passes memory or a descriptor it owns for the call's
//! duration.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Readable (or hung up / errored: all mean "a read will not block").
pub const READABLE: i16 = libc::POLLIN | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;

/// One descriptor to watch, and what poll saw.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// Watches `fd` for input.
    pub fn readable(fd: RawFd) -> PollFd {
        PollFd::watch(fd, libc::POLLIN)
    }

    /// Watches `fd` for room to write.
    pub fn writable(fd: RawFd) -> PollFd {
        PollFd::watch(fd, libc::POLLOUT)
    }

    /// Watches `fd` for `events` (`libc::POLL*` bits).
    pub fn watch(fd: RawFd, events: i16) -> PollFd {
        PollFd(libc::pollfd {
            fd,
            events,
            revents: 0,
        })
    }

    /// True when the last poll reported `fd` ready for what it was watched for, hung up or errored: in
    /// each case the next read or write will not block. Never true for a negative `fd` (not watched).
    pub fn is_ready(&self) -> bool {
        self.0.revents != 0
    }

    /// What the last poll reported for `fd` (`libc::POLL*` bits; 0 before any poll).
    pub fn revents(&self) -> i16 {
        self.0.revents
    }
}

/// Waits until one of `fds` is ready or `timeout` passes. EINTR is returned as `Ok(0)` (a spurious
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

/// An epoll set of descriptors watched for input (level-triggered: a descriptor left with data stays
/// ready, so a reader may stop after a burst and come back), each reported by the token it was added
/// with.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Room for what one [`Epoll::wait`] reports.
pub struct Events {
    list: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    /// Room for at most `n` ready descriptors a wait (at least one).
    pub fn with_capacity(n: usize) -> Events {
        Events {
            list: vec![libc::epoll_event { events: 0, u64: 0 }; n.max(1)],
            len: 0,
        }
    }

    /// The tokens of the descriptors the last wait reported ready (readable, hung up or errored).
    pub fn tokens(&self) -> impl Iterator<Item = u64> + '_ {
        // A copy of each (packed) event, never a reference into it.
        self.list[..self.len].iter().map(|e| {
            let e = *e;
            e.u64
        })
    }
}

impl Epoll {
    /// A new, empty set (closed on exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointer is passed; a non-negative result is a descriptor we now own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by epoll_create1 and nothing else owns it.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Watches `fd` for input; waits report it as `token`. The caller keeps `fd` open while it is in
    /// the set (closing it removes it).
    pub fn add_readable(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `event` is a valid epoll_event we own for the call; the kernel copies it.
        let r =
            unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until a watched descriptor is ready or `timeout` passes, and fills `events` with what is
    /// ready. EINTR is returned as `Ok(0)` (a spurious wake-up the caller's loop absorbs), as in
    /// [`poll`].
    pub fn wait(&self, events: &mut Events, timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        events.len = 0;
        let room = events.list.len().min(i32::MAX as usize) as i32;
        // SAFETY: `events.list` is an array of `room` epoll_event structs we own mutably for the call.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.list.as_mut_ptr(), room, ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(err);
        }
        events.len = n as usize;
        Ok(events.len)
    }
}

/// Waits until one of `fds` is ready or `deadline` passes, whatever signals arrive meanwhile: each EINTR
/// resumes the wait with what is left of it (never cut short, never lengthened). The count of ready
/// descriptors; 0 once the deadline has passed.
pub fn poll_until(fds: &mut [PollFd], deadline: Instant) -> io::Result<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Round up: a wait of 0.4 ms must not become a zero-timeout busy poll.
        let left = left + Duration::from_micros(999);
        match poll(fds, left)? {
            0 if Instant::now() < deadline => continue,
            n => return Ok(n),
        }
    }
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
    fn epoll_reports_only_the_ready_descriptor_by_its_token() {
        let pairs: Vec<_> = (0..3).map(|_| UnixStream::pair().unwrap()).collect();
        let set = Epoll::new().unwrap();
        for (i, (_, b)) in pairs.iter().enumerate() {
            set.add_readable(b.as_raw_fd(), 10 + i as u64).unwrap();
        }
        let mut events = Events::with_capacity(8);
        assert_eq!(set.wait(&mut events, Duration::from_millis(10)).unwrap(), 0);
        assert_eq!(events.tokens().count(), 0);
        (&pairs[1].0).write_all(b"x").unwrap();
        assert_eq!(
            set.wait(&mut events, Duration::from_millis(1000)).unwrap(),
            1
        );
        assert_eq!(events.tokens().collect::<Vec<_>>(), vec![11]);
        // Level-triggered: unread input is reported again.
        assert_eq!(
            set.wait(&mut events, Duration::from_millis(1000)).unwrap(),
            1
        );
        assert_eq!(events.tokens().collect::<Vec<_>>(), vec![11]);
    }

    #[test]
    fn poll_until_waits_to_its_deadline_through_signals() {
        let (_a, b) = UnixStream::pair().unwrap();
        let mut fds = [PollFd::readable(b.as_raw_fd())];
        // Every thread is signalled 99 times a second meanwhile: poll answers EINTR each time.
        let session = crate::testwall::session();
        let t0 = Instant::now();
        let n = poll_until(&mut fds, t0 + Duration::from_millis(300)).unwrap();
        let waited = t0.elapsed();
        drop(session);
        assert_eq!(n, 0);
        assert!(
            waited >= Duration::from_millis(300),
            "cut short: {waited:?}"
        );
    }
}
