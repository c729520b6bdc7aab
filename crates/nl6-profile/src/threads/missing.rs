//! Why a thread dump has no stack for a thread: [`Missing`], carried by a [`super::ThreadStack`] whose
//! stack is empty and printed by the `debug=2` dump, so a thread is never dropped from the dump nor shown
//! empty without a reason. Also the one place that sends the stack-capture signal ([`send`]), since its
//! refusals are such reasons.
//!
//! Never: runs in a signal handler.
use crate::signal;

/// Why a thread's stack is not in a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Missing {
    /// The signal could not be sent: `tgkill` failed with this errno (`EAGAIN`: the per-user
    /// pending-signal limit `RLIMIT_SIGPENDING` is reached, every CPU-profile timer holding one slot).
    Unsignalled(i32),
    /// Signalled, but the thread did not answer in time (it blocks the signal, or did not run).
    NoAnswer,
    /// Its answer was still being written when the capture gave up.
    Late,
    /// More threads than capture slots ([`super::MAX_CAPTURED`]).
    NoSlot,
    /// Another owner's handler holds the capture signal (at this address) and
    /// [`crate::SignalOptions::take_foreign`] is off: no thread was signalled.
    Foreign {
        /// The capture signal.
        signal: i32,
        /// The other owner's handler.
        handler: u64,
    },
    /// The capture signal's handler could not be installed: `sigaction` failed with this errno.
    NoHandler(i32),
    /// Not Linux on x86_64 or aarch64: no thread's stack can be captured.
    Unsupported,
}

impl Missing {
    /// Why no thread was signalled when the capture handler was refused.
    pub(super) fn unhandled(e: crate::SignalError) -> Missing {
        match e {
            crate::SignalError::Foreign {
                signal, handler, ..
            } => Missing::Foreign { signal, handler },
            crate::SignalError::Os { errno, .. } => Missing::NoHandler(errno),
            crate::SignalError::Unsupported => Missing::Unsupported,
            _ => Missing::NoHandler(0),
        }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Unsignalled(errno) if *errno == libc::EAGAIN => f.write_str(
                "the stack-capture signal could not be queued (tgkill: EAGAIN: the pending-signal limit RLIMIT_SIGPENDING is reached; a running CPU profile's timers hold slots of it too)",
            ),
            Missing::Unsignalled(errno) => write!(
                f,
                "the stack-capture signal could not be sent (tgkill: {})",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Missing::NoAnswer => f.write_str("the thread did not answer in time"),
            Missing::Late => f.write_str("the thread's answer came too late"),
            Missing::NoSlot => write!(
                f,
                "more than {} threads: no capture slot left",
                super::MAX_CAPTURED
            ),
            Missing::Foreign { signal, handler } => write!(
                f,
                "{} has another owner's handler (at {handler:#x}): no thread was signalled (SignalOptions: take_foreign, or another capture signal)",
                signal::signal_name(*signal)
            ),
            Missing::Unsupported => f.write_str(&signal::unsupported()),
            Missing::NoHandler(errno) => write!(
                f,
                "the stack-capture handler could not be installed (sigaction: {})",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// What sending the stack-capture signal to one thread did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    Queued,
    /// `ESRCH`: the thread exited since it was listed.
    Gone,
    /// Refused with this errno (`EAGAIN` may pass once earlier signals are delivered: retry).
    Refused(i32),
}

/// Sends the stack-capture signal to thread `tid` of process `pid`.
pub(super) fn send(pid: i32, tid: i32) -> Sent {
    if !signal::SUPPORTED {
        return Sent::Refused(libc::ENOSYS);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: tgkill on a thread of our own process with a signal whose handler is installed.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal::stacks_signal()) };
    #[cfg(not(target_os = "linux"))]
    let rc = i64::from(pid + tid) * 0 - 1;
    if rc == 0 {
        return Sent::Queued;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ESRCH) => Sent::Gone,
        Some(errno) => Sent::Refused(errno),
        None => Sent::Refused(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_says_what_happened() {
        let text = Missing::Unsignalled(libc::EAGAIN).to_string();
        assert!(text.contains("RLIMIT_SIGPENDING"), "{text}");
        assert!(Missing::Unsignalled(libc::EPERM)
            .to_string()
            .contains("tgkill: "));
        assert!(Missing::NoSlot.to_string().contains("1024"));
    }

    #[test]
    fn a_thread_that_is_gone_is_told_from_a_refusal() {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        // No thread has tid i32::MAX.
        assert_eq!(send(pid, i32::MAX), Sent::Gone);
    }
}
