//! The gate's durations (`duration` in `POST /api/v1/profiling`): Go syntax through [`crate::timefmt`],
//! and only positive values up to Go's maximum, `2562047h47m16.854775807s`, so nothing the gate schedules
//! overflows and a revert always happens after the POST that asked for it.
#![forbid(unsafe_code)]

pub use crate::timefmt::{DurationError, MAX_NANOS};
use std::time::Duration;

/// Parses a Go duration that must be positive and at most [`MAX_NANOS`].
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    match crate::timefmt::parse_go_duration(input) {
        Ok(d) if d.is_zero() => Err(DurationError::NotPositive(input.to_string())),
        Err(DurationError::Negative(_)) => Err(DurationError::NotPositive(input.to_string())),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> u64 {
        parse_go_duration(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .as_nanos() as u64
    }

    #[test]
    fn accepts_go_syntax() {
        let cases: &[(&str, u64)] = &[
            ("30m", 30 * 60 * 1_000_000_000),
            ("1h30m", 90 * 60 * 1_000_000_000),
            ("90s", 90_000_000_000),
            ("500ms", 500_000_000),
            ("1.5h", 5400 * 1_000_000_000),
            ("300ms", 300_000_000),
            ("1us", 1_000),
            ("1\u{b5}s", 1_000),
            ("1\u{3bc}s", 1_000),
            ("7ns", 7),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("+2s", 2_000_000_000),
            ("1h0m0.000000001s", 3_600_000_000_001),
            ("2562047h47m16.854775807s", MAX_NANOS),
            ("9223372036854775807ns", MAX_NANOS),
        ];
        for &(s, n) in cases {
            assert_eq!(ok(s), n, "{s}");
        }
    }

    #[test]
    fn refuses_what_go_refuses_and_non_positive() {
        for s in [
            "", "30", "m", ".s", "1x", "1h30", "1.2.3s", " 1s", "1s ", "abc", "-", "1e3s",
        ] {
            assert!(parse_go_duration(s).is_err(), "{s:?} accepted");
        }
        assert!(matches!(
            parse_go_duration("5d"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("0"),
            Err(DurationError::NotPositive(_))
        ));
        assert!(matches!(
            parse_go_duration("0s"),
            Err(DurationError::NotPositive(_))
        ));
        assert!(matches!(
            parse_go_duration("-1s"),
            Err(DurationError::NotPositive(_))
        ));
        for s in [
            "2562047h47m16.854775808s",
            "2562048h",
            "9223372036854775808ns",
            "99999999999999999999999h",
        ] {
            assert!(
                matches!(parse_go_duration(s), Err(DurationError::Overflow(_))),
                "{s}"
            );
        }
        assert!(parse_go_duration("5d")
            .unwrap_err()
            .to_string()
            .contains("\"5d\""));
    }
}
