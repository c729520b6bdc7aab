//! The profiling gate: whether nl6 profiles, and where it pushes.
//!
//! - [`state`]: the state machine as plain values (request + state + startup → state + actions + log line).
//! - [`control`]: the thread-safe [`control::Gate`] that runs those actions through a [`port::Pusher`],
//!   publishes a snapshot for `GET` and keeps the revert timer.
//! - [`duration`]: Go's duration syntax; [`address`]: push-address rules and normalisation.
//! - [`port`]: the narrow interface the push implements.
//! - [`turn`]: the first-come-first-served transition lock with a bounded wait (POSTs answer 409 rather
//!   than wait behind a long flush).
//!
//! The gate never does network I/O itself: only the push behind [`port::Pusher`] talks to the network.
#![forbid(unsafe_code)]

pub mod address;
pub mod control;
pub mod duration;
pub mod port;
pub mod state;
pub mod turn;

use std::time::SystemTime;

/// Formats a time as RFC 3339 in UTC with milliseconds, e.g. `2027-01-15T08:00:00.300Z`.
pub fn rfc3339(t: SystemTime) -> String {
    crate::timefmt::rfc3339_millis(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_800_000_000)),
            "2027-01-15T08:00:00.000Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
            "2099-12-31T23:59:59.000Z"
        );
    }
}
