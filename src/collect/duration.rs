//! Go-style durations (`90s`, `1h`, `168h`, `1h30m`, `1.5s`, `250ms`) as `time.ParseDuration` reads
//! them, for the collector's flags. Negative durations are refused: nothing here needs them.
//!
//! The collector's own small parser; the gate has one too and the lead may merge them later.
#![forbid(unsafe_code)]

use std::time::Duration;

/// Nanoseconds per unit, longest spelling first where one is a prefix of another (`ms` before `m`).
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration string. Errors say what was wrong with which part.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.strip_prefix('+').unwrap_or(text);
    if s.starts_with('-') {
        return Err(format!("invalid duration {text:?}: negative"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(format!("invalid duration {text:?}: empty"));
    }
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!(
                "invalid duration {text:?}: expected a number at {rest:?}"
            ));
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, after) = tail.split_at(unit_len);
        let Some(&(_, per_unit)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!("invalid duration {text:?}: missing unit (ns, us, ms, s, m, h)")
            } else {
                format!("invalid duration {text:?}: unknown unit {unit:?}")
            });
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| format!("invalid duration {text:?}: overflow"))?
        };
        let mut nanos = int
            .checked_mul(per_unit)
            .ok_or_else(|| format!("invalid duration {text:?}: overflow"))?;
        let mut scale = per_unit;
        for d in frac_part.chars().take(30) {
            scale /= 10;
            nanos += u128::from(d.to_digit(10).unwrap_or(0)) * scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| format!("invalid duration {text:?}: overflow"))?;
        rest = after;
    }
    if total_nanos > u128::from(u64::MAX) * 1_000_000_000 {
        return Err(format!("invalid duration {text:?}: overflow"));
    }
    Ok(Duration::new(
        (total_nanos / 1_000_000_000) as u64,
        (total_nanos % 1_000_000_000) as u32,
    ))
}

/// `d` written back the way Go prints it for whole units (`1h0m0s` is written `1h`): used in messages.
pub fn format_go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return format!("{d:?}");
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("90s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("168h", Duration::from_secs(168 * 3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5s", Duration::from_millis(1500)),
            ("250ms", Duration::from_millis(250)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            (".5m", Duration::from_secs(30)),
            ("+3s", Duration::from_secs(3)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn refuses_bad_durations_with_a_reason() {
        for (text, reason) in [
            ("", "empty"),
            ("10", "missing unit"),
            ("10d", "unknown unit"),
            ("-1s", "negative"),
            ("1..2s", "expected a number"),
            ("h", "expected a number"),
        ] {
            let e = parse_go_duration(text).unwrap_err();
            assert!(e.contains(reason), "{text}: {e}");
        }
    }

    #[test]
    fn formats_whole_units_like_go() {
        assert_eq!(format_go_duration(Duration::from_secs(168 * 3600)), "168h");
        assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
