//! Time text the lab needs: Go-style durations (`300ms`, `1m30s`, `1.5h`), RFC 3339 timestamps (parse for a
//! scenario's `start_at`, format for syslog) and civil-date arithmetic.
//!
//! A private parser for now: the gate has its own Go-duration parser; the two are to be merged into one.
//! Plain functions over values; no clocks are read here.
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses a Go duration: a sequence of decimal numbers with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`
/// (`1h2m3.5s`). A bare `0` is zero. Negative durations are rejected: the lab has no use for them.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration {text:?}: {why} (e.g. 500ms, 10s, 1m30s)");
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad("empty"));
    }
    if s.starts_with('-') {
        return Err(bad("negative"));
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total_ns: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(bad("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| bad("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[unit_len..];
        total_ns += number * unit;
    }
    if total_ns > u64::MAX as f64 {
        return Err(bad("too large"));
    }
    Ok(Duration::from_nanos(total_ns.round() as u64))
}

/// Formats a duration the way Go prints it for whole units we use (`10s`, `1m30s`, `250ms`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if h > 0 || m > 0 {
        out += &format!("{m}m");
    }
    if frac > 0 {
        out += &format!("{s}.{frac:03}s");
    } else {
        out += &format!("{s}s");
    }
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

/// Parses an RFC 3339 timestamp (`2024-05-01T12:00:00Z`, fractions and `±hh:mm` offsets allowed).
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, String> {
    let bad = || format!("invalid RFC 3339 time {text:?} (e.g. 2024-05-01T12:00:00Z)");
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<u32, String> {
        let s = text.get(r).ok_or_else(bad)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (y, mo, d, h, mi, s) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &text[start..i];
        if digits.is_empty() {
            return Err(bad());
        }
        let padded: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        nanos = padded.parse().map_err(|_| bad())?;
    }
    let offset_secs: i64 = match &text[i..] {
        "Z" | "z" => 0,
        tz if tz.len() == 6
            && (tz.starts_with('+') || tz.starts_with('-'))
            && tz.as_bytes()[3] == b':' =>
        {
            let oh = num(i + 1..i + 3)? as i64;
            let om = num(i + 4..i + 6)? as i64;
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    let secs =
        days_from_civil(y as i64, mo, d) * 86_400 + (h * 3600 + mi * 60 + s) as i64 - offset_secs;
    if secs < 0 {
        return Err(bad());
    }
    Ok(UNIX_EPOCH + Duration::from_secs(secs as u64) + Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let ok = [
            ("10s", Duration::from_secs(10)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
            ("250ms", Duration::from_millis(250)),
            ("2h45m", Duration::from_secs(9900)),
            ("3us", Duration::from_micros(3)),
            ("3µs", Duration::from_micros(3)),
            ("0", Duration::ZERO),
        ];
        for (t, d) in ok {
            assert_eq!(parse_duration(t), Ok(d), "{t}");
        }
        for bad in ["", "10", "s", "10x", "-1s", "1..2s", "1s2"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("invalid duration"), "{bad}: {e}");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in [-1000, 0, 11_017, 19_000, 20_000, 100_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn rfc3339_parses_and_formats() {
        let t = parse_rfc3339("2003-10-11T22:14:15.003Z").unwrap();
        let mut s = String::new();
        Timestamp::utc_millis(t).write_to(&mut s).unwrap();
        assert_eq!(s, "2003-10-11T22:14:15.003Z");
        let a = parse_rfc3339("2003-08-24T05:14:15.000003-07:00").unwrap();
        let b = parse_rfc3339("2003-08-24T12:14:15.000003Z").unwrap();
        assert_eq!(a, b);
        for bad in [
            "2003-13-01T00:00:00Z",
            "yesterday",
            "2003-10-11 22:14:15",
            "2003-10-11T22:14:15+0700",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }
}
