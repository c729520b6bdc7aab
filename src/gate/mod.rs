//! The profiling gate: whether nl6 profiles, and where it pushes.
//!
//! - [`state`]: the state machine as plain values (request + state + startup → state + actions + log line).
//! - [`control`]: the thread-safe [`control::Gate`] that runs those actions through a [`port::Pusher`],
//!   publishes a snapshot for `GET` and keeps the revert timer.
//! - [`duration`]: Go's duration syntax; [`address`]: push-address rules and normalisation.
//! - [`port`]: the narrow interface the push implements.
//!
//! The gate never does network I/O itself: only the push behind [`port::Pusher`] talks to the network.
#![forbid(unsafe_code)]

pub mod address;
pub mod control;
pub mod duration;
pub mod port;
pub mod state;

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a time as RFC 3339 in UTC with milliseconds, e.g. `2027-01-15T08:00:00.300Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
