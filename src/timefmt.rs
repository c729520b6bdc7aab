//! Time as text, one place for all of nl6: Go's duration syntax (`time.ParseDuration` and
//! `Duration.String`), RFC 3339 timestamps (parsed for a scenario's `start_at`, written for syslog and the
//! REST API), and civil-date arithmetic (archive paths, pprof's `Time:` line).
//!
//! Plain functions over values: no clock is read here.
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// Zero or negative where a positive duration is needed (the gate's revert).
    NotPositive(String),
    /// Negative.
    Negative(String),
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
            DurationError::Negative(s) => {
                write!(f, "invalid duration {s:?}: must not be negative")
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

/// A Go duration that must be positive (and at most [`MAX_NANOS`]): the gate's revert and every interval
/// a flag sets. Zero and negative values are [`DurationError::NotPositive`].
pub fn parse_positive_go_duration(input: &str) -> Result<Duration, DurationError> {
    match parse_go_duration(input) {
        Ok(d) if d.is_zero() => Err(DurationError::NotPositive(input.to_string())),
        Err(DurationError::Negative(_)) => Err(DurationError::NotPositive(input.to_string())),
        other => other,
    }
}

/// Parses a Go duration: zero or positive, at most [`MAX_NANOS`]. Negative durations are refused
/// ([`DurationError::Negative`]): nothing in nl6 schedules into the past.
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
        return if negative {
            Err(DurationError::Negative(input.to_string()))
        } else {
            Ok(Duration::ZERO)
        };
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
    if negative && total > 0 {
        return Err(DurationError::Negative(input.to_string()));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// `d` as Go's `Duration.String()` writes it: `250ms`, `1.5s`, `1m30s`, `168h0m0s`.
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    // Below a second Go picks the largest unit that keeps an integer part: ns, µs or ms.
    let fraction = |value: u128, per: u128, unit: &str| {
        let (whole, rest) = (value / per, value % per);
        let digits = per.to_string().len() - 1;
        let mut frac = format!("{rest:0digits$}");
        while frac.ends_with('0') {
            frac.pop();
        }
        if frac.is_empty() {
            format!("{whole}{unit}")
        } else {
            format!("{whole}.{frac}{unit}")
        }
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return fraction(nanos, 1_000, "µs");
    }
    if nanos < 1_000_000_000 {
        return fraction(nanos, 1_000_000, "ms");
    }
    let secs = nanos / 1_000_000_000;
    let (h, m) = (secs / 3600, secs / 60 % 60);
    let s = fraction(nanos % 60_000_000_000, 1_000_000_000, "s");
    match (h, m) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

/// `t` as RFC 3339 in UTC with milliseconds, e.g. `2027-01-15T08:00:00.300Z`.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let mut out = String::new();
    let _ = Timestamp::utc_millis(t).write_to(&mut out);
    out
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days in month `m` (1-12) of year `y`, leap years by the Gregorian rule.
pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The date of a day count since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + if m <= 2 { 1 } else { 0 }, m, d)
}

/// A wall-clock instant broken into RFC 3339 fields, with its UTC offset and how many fraction digits to
/// print (syslog timestamps carry up to six).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// The fraction as an integer of `frac_digits` digits.
    pub fraction: u32,
    pub frac_digits: u8,
    /// Minutes east of UTC; 0 prints as `Z`.
    pub offset_minutes: i32,
}

impl Timestamp {
    /// `t` in UTC with millisecond precision.
    pub fn utc_millis(t: SystemTime) -> Timestamp {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs() as i64;
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400) as u32;
        Timestamp {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: sod / 60 % 60,
            second: sod % 60,
            fraction: d.subsec_millis(),
            frac_digits: 3,
            offset_minutes: 0,
        }
    }

    /// Writes the RFC 3339 text.
    pub fn write_to(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )?;
        if self.frac_digits > 0 {
            write!(
                out,
                ".{:0width$}",
                self.fraction,
                width = self.frac_digits as usize
            )?;
        }
        if self.offset_minutes == 0 {
            out.write_char('Z')
        } else {
            let sign = if self.offset_minutes < 0 { '-' } else { '+' };
            let m = self.offset_minutes.unsigned_abs();
            write!(out, "{sign}{:02}:{:02}", m / 60, m % 60)
        }
    }
}

/// Why [`parse_rfc3339`] refused a timestamp (each variant holds the text as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rfc3339Error {
    /// Not of the form `2024-05-01T12:00:00Z` (with an optional fraction and `±hh:mm`).
    Shape(String),
    /// A field outside its range, and its value as given (`day`, `30`; `UTC offset`, `+24:00`).
    OutOfRange(String, &'static str, String),
}

impl std::fmt::Display for Rfc3339Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rfc3339Error::Shape(t) => {
                write!(f, "invalid RFC 3339 time {t:?} (e.g. 2024-05-01T12:00:00Z)")
            }
            Rfc3339Error::OutOfRange(t, field, value) => {
                write!(
                    f,
                    "invalid RFC 3339 time {t:?}: {field} {value} is out of range"
                )
            }
        }
    }
}

impl std::error::Error for Rfc3339Error {}

/// Parses an RFC 3339 timestamp (`2024-05-01T12:00:00Z`, fractions and `±hh:mm` offsets allowed).
/// Refuses what Go refuses: `time.Parse(time.RFC3339, …)` a day the month does not have, second 60,
/// hour 24, a lower-case `t` or `z`, a space for `T`; Go's strict form (`time.Time`'s
/// `UnmarshalJSON`, Go 1.20 on) an offset beyond `±23:59`. Errors name the input and the field.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, Rfc3339Error> {
    let shape = || Rfc3339Error::Shape(text.to_string());
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(shape());
    }
    let num = |r| digits(text, r).ok_or_else(shape);
    let (y, mo, d, h, mi, s) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    // Go's time.Parse(time.RFC3339, …) refuses each of these rather than normalising (Feb 30 is not
    // Mar 2, and a leap second 60 is not accepted either).
    let fields = [
        ("month", mo, (1..=12).contains(&mo)),
        ("day", d, (1..=days_in_month(y as i64, mo)).contains(&d)),
        ("hour", h, h <= 23),
        ("minute", mi, mi <= 59),
        ("second", s, s <= 59),
    ];
    if let Some((field, value, _)) = fields.iter().find(|(_, _, ok)| !ok) {
        return Err(Rfc3339Error::OutOfRange(
            text.into(),
            field,
            value.to_string(),
        ));
    }
    let (nanos, i) = fraction(text, 19).ok_or_else(shape)?;
    let offset_secs = utc_offset(text, &text[i..])?;
    let secs =
        days_from_civil(y as i64, mo, d) * 86_400 + (h * 3600 + mi * 60 + s) as i64 - offset_secs;
    if secs < 0 {
        return Err(shape());
    }
    Ok(UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_nanos(nanos))
}

/// The number written at `r` in `text`, when every byte there is a decimal digit.
fn digits(text: &str, r: std::ops::Range<usize>) -> Option<u32> {
    let s = text.get(r)?;
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The fraction of a second at `i` (`.123`, or none) in nanoseconds, and where it ends; `None` for a
/// `.` without digits.
fn fraction(text: &str, i: usize) -> Option<(u64, usize)> {
    if text.as_bytes().get(i) != Some(&b'.') {
        return Some((0, i));
    }
    let rest = &text[i + 1..];
    let len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 {
        return None;
    }
    let padded: String = rest[..len]
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    Some((padded.parse().ok()?, i + 1 + len))
}

/// `text`'s zone `tz`, `Z` or `±hh:mm` up to `±23:59`, in seconds east of UTC.
fn utc_offset(text: &str, tz: &str) -> Result<i64, Rfc3339Error> {
    if tz == "Z" {
        return Ok(0);
    }
    let b = tz.as_bytes();
    let signed = b.len() == 6 && (b[0] == b'+' || b[0] == b'-') && b[3] == b':';
    let (true, Some(oh), Some(om)) = (signed, digits(tz, 1..3), digits(tz, 4..6)) else {
        return Err(Rfc3339Error::Shape(text.into()));
    };
    if oh > 23 || om > 59 {
        return Err(Rfc3339Error::OutOfRange(
            text.into(),
            "UTC offset",
            tz.into(),
        ));
    }
    let sign = if b[0] == b'-' { -1 } else { 1 };
    Ok(sign * (i64::from(oh) * 3600 + i64::from(om) * 60))
}

#[cfg(test)]
#[path = "timefmt_tests.rs"]
mod tests;
