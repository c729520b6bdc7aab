use super::*;

#[test]
fn go_durations_parse_zero_and_positive() {
    let ok = [
        ("0", Duration::ZERO),
        ("10s", Duration::from_secs(10)),
        ("1m30s", Duration::from_secs(90)),
        ("1.5h", Duration::from_secs(5400)),
        ("168h", Duration::from_secs(168 * 3600)),
        ("250ms", Duration::from_millis(250)),
        ("3us", Duration::from_micros(3)),
        ("3\u{b5}s", Duration::from_micros(3)),
        (".5m", Duration::from_secs(30)),
        ("+3s", Duration::from_secs(3)),
        ("2562047h47m16.854775807s", Duration::from_nanos(MAX_NANOS)),
    ];
    for (t, d) in ok {
        assert_eq!(parse_go_duration(t), Ok(d), "{t}");
    }
}

#[test]
fn go_durations_refused_with_the_reason() {
    for (bad, why) in [
        ("", "use Go syntax"),
        ("10", "use Go syntax"),
        ("10d", "unknown unit"),
        ("-1s", "must not be negative"),
        ("1..2s", "use Go syntax"),
        ("2562047h47m16.854775808s", "maximum"),
    ] {
        let e = parse_go_duration(bad).unwrap_err().to_string();
        assert!(
            e.contains(why) && e.contains("invalid duration"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn go_durations_format_like_go() {
    for (d, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(7), "7ns"),
        (Duration::from_micros(3), "3\u{b5}s"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(168 * 3600), "168h0m0s"),
        (Duration::from_secs(3600 + 5), "1h0m5s"),
    ] {
        assert_eq!(format_go_duration(d), text);
        if !d.is_zero() {
            assert_eq!(parse_go_duration(text), Ok(d), "{text} round trip");
        }
    }
}

#[test]
fn rfc3339_round_trips_and_civil_dates_agree() {
    let t = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
    assert_eq!(rfc3339_millis(t), "2000-02-29T00:00:00.123Z");
    assert_eq!(parse_rfc3339("2000-02-29T00:00:00.123Z"), Ok(t));
    assert_eq!(rfc3339_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        parse_rfc3339("2000-02-29T01:00:00.123+01:00"),
        Ok(t),
        "offsets are applied"
    );
    for days in [-1000i64, 0, 10_957, 20_000, 100_000] {
        let (y, m, d) = civil_from_days(days);
        assert_eq!(days_from_civil(y, m, d), days);
    }
    assert!(parse_rfc3339("2024-13-01T00:00:00Z").is_err());
    assert!(parse_rfc3339("yesterday").is_err());
}

/// Go's `time.Parse(time.RFC3339, …)` refuses these, so nl6 does too rather than move them silently.
#[test]
fn rfc3339_refuses_what_go_refuses() {
    for (text, needle) in [
        ("2027-02-30T00:00:00Z", "day 30 is out of range"),
        ("2027-11-31T00:00:00Z", "day 31 is out of range"),
        ("2027-02-29T00:00:00Z", "day 29 is out of range"),
        ("2027-01-01T00:00:00+99:99", "offset"),
        ("2027-01-01T00:00:00+24:00", "offset"),
        ("2027-01-01T00:00:00-01:60", "offset"),
        ("2027-01-01T00:00:60Z", "second 60 is out of range"),
        ("2027-01-01T24:00:00Z", "hour 24 is out of range"),
        ("2027-01-01T00:60:00Z", "minute 60 is out of range"),
        ("2027-01-01t00:00:00Z", "invalid RFC 3339 time"),
        ("2027-01-01 00:00:00Z", "invalid RFC 3339 time"),
        ("2027-01-01T00:00:00z", "invalid RFC 3339 time"),
    ] {
        let err = parse_rfc3339(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text}: {err}");
        assert!(
            err.contains(text),
            "{text}: the error names the input: {err}"
        );
    }
    assert!(parse_rfc3339("2028-02-29T23:59:59+23:59").is_ok());
    assert!(parse_rfc3339("2027-12-31T00:00:00-00:00").is_ok());
}

fn ok_positive(s: &str) -> u64 {
    parse_positive_go_duration(s)
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
        assert_eq!(ok_positive(s), n, "{s}");
    }
}

#[test]
fn refuses_what_go_refuses_and_non_positive() {
    for s in [
        "", "30", "m", ".s", "1x", "1h30", "1.2.3s", " 1s", "1s ", "abc", "-", "1e3s",
    ] {
        assert!(parse_positive_go_duration(s).is_err(), "{s:?} accepted");
    }
    assert!(matches!(
        parse_positive_go_duration("5d"),
        Err(DurationError::UnknownUnit { .. })
    ));
    assert!(matches!(
        parse_positive_go_duration("0"),
        Err(DurationError::NotPositive(_))
    ));
    assert!(matches!(
        parse_positive_go_duration("0s"),
        Err(DurationError::NotPositive(_))
    ));
    assert!(matches!(
        parse_positive_go_duration("-1s"),
        Err(DurationError::NotPositive(_))
    ));
    for s in [
        "2562047h47m16.854775808s",
        "2562048h",
        "9223372036854775808ns",
        "99999999999999999999999h",
    ] {
        assert!(
            matches!(
                parse_positive_go_duration(s),
                Err(DurationError::Overflow(_))
            ),
            "{s}"
        );
    }
    assert!(parse_positive_go_duration("5d")
        .unwrap_err()
        .to_string()
        .contains("\"5d\""));
}
