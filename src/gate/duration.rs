//! Go's duration syntax (`time.ParseDuration`): `"30m"`, `"1h30m"`, `"90s"`, `"500ms"`, `"1.5h"`, with
//! units `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`. The gate accepts only positive durations up to Go's
//! maximum, `2562047h47m16.854775807s` (`i64::MAX` nanoseconds), so nothing the gate schedules overflows.
//!
//! A plain function over a string: no clock, no I/O.
#![forbid(unsafe_code)]

use std::time::Duration;

/// The longest duration Go can represent, and so the longest the gate accepts.
pub const MAX_NANOS: u64 = i64::MAX as u64;

/// Why a duration string was refused. `Display` names the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not Go duration syntax (empty, a number without a unit, stray characters).
    Invalid(String),
    /// A unit Go does not know.
    UnknownUnit { input: String, unit: String },
    /// Larger than Go's maximum duration.
    Overflow(String),
    /// Zero or negative: a revert has to happen after the POST.
    NotPositive(String),
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DurationError::Invalid(s) => write!(
                f,
                "invalid duration {s:?}: use Go syntax such as \"30m\", \"1h30m\", \"90s\""
            ),
            DurationError::UnknownUnit { input, unit } => {
                write!(
                    f,
                    "invalid duration {input:?}: unknown unit {unit:?} (use ns, us, ms, s, m, h)"
                )
            }
            DurationError::Overflow(s) => {
                write!(
                    f,
                    "invalid duration {s:?}: longer than the maximum 2562047h47m16.854775807s"
                )
            }
            DurationError::NotPositive(s) => {
                write!(f, "invalid duration {s:?}: must be greater than zero")
            }
        }
    }
}

impl std::error::Error for DurationError {}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3600 * 1_000_000_000,
        _ => return None,
    })
}

/// Parses a Go duration that must be positive and at most [`MAX_NANOS`].
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    let overflow = || DurationError::Overflow(input.to_string());
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Err(DurationError::NotPositive(input.to_string()));
    }
    if s.is_empty() {
        return Err(invalid());
    }
    // Accumulated in u128 so the overflow check is a comparison, not a wrapped multiplication.
    let mut total: u128 = 0;
    while !s.is_empty() {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, rest) = s.split_at(digits);
        s = rest;
        let mut value: u128 = 0;
        for d in whole.bytes() {
            value = value * 10 + u128::from(d - b'0');
            if value > u128::from(MAX_NANOS) {
                return Err(overflow());
            }
        }
        // Fraction: kept as digits over a power of ten; digits beyond what matters are ignored (as Go).
        let mut frac: u128 = 0;
        let mut scale: u128 = 1;
        let mut frac_digits = 0;
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            frac_digits = s.bytes().take_while(u8::is_ascii_digit).count();
            for d in s[..frac_digits].bytes() {
                if scale < 10u128.pow(20) {
                    frac = frac * 10 + u128::from(d - b'0');
                    scale *= 10;
                }
            }
            s = &s[frac_digits..];
        }
        if digits == 0 && frac_digits == 0 {
            return Err(invalid());
        }
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        if unit.is_empty() {
            return Err(invalid());
        }
        let per = u128::from(unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            input: input.to_string(),
            unit: unit.to_string(),
        })?);
        total += value * per + frac * per / scale;
        if total > u128::from(MAX_NANOS) {
            return Err(overflow());
        }
    }
    if negative || total == 0 {
        return Err(DurationError::NotPositive(input.to_string()));
    }
    Ok(Duration::from_nanos(total as u64))
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
