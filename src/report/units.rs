//! Value and percentage formatting exactly as `go tool pprof` prints them: unit families (time, memory),
//! auto-scaling to the most natural unit, `%.2f` with a trailing `.00` trimmed, and pprof's percentage
//! rule (two decimals from 1% up, two significant digits below).
//!
//! Pure functions over numbers and unit names; no I/O, no clock (the `Time:` label takes the timestamp in).
#![forbid(unsafe_code)]

/// One unit of a family: the name printed, the names it is recognised by, and its size in base units.
struct Unit {
    canonical: &'static str,
    aliases: &'static [&'static str],
    factor: f64,
}

/// A unit family (memory or time) with the unit used when a value cannot be scaled.
struct Family {
    units: &'static [Unit],
    default: &'static Unit,
}

const MEMORY_UNITS: &[Unit] = &[
    Unit {
        canonical: "B",
        aliases: &["b", "byte"],
        factor: 1.0,
    },
    Unit {
        canonical: "kB",
        aliases: &["kb", "kbyte", "kilobyte"],
        factor: 1024.0,
    },
    Unit {
        canonical: "MB",
        aliases: &["mb", "mbyte", "megabyte"],
        factor: 1048576.0,
    },
    Unit {
        canonical: "GB",
        aliases: &["gb", "gbyte", "gigabyte"],
        factor: 1073741824.0,
    },
    Unit {
        canonical: "TB",
        aliases: &["tb", "tbyte", "terabyte"],
        factor: 1099511627776.0,
    },
    Unit {
        canonical: "PB",
        aliases: &["pb", "pbyte", "petabyte"],
        factor: 1125899906842624.0,
    },
];

const TIME_UNITS: &[Unit] = &[
    Unit {
        canonical: "ns",
        aliases: &["ns", "nanosecond"],
        factor: 1.0,
    },
    Unit {
        canonical: "us",
        aliases: &["μs", "us", "microsecond"],
        factor: 1e3,
    },
    Unit {
        canonical: "ms",
        aliases: &["ms", "millisecond"],
        factor: 1e6,
    },
    Unit {
        canonical: "s",
        aliases: &["s", "sec", "second"],
        factor: 1e9,
    },
    Unit {
        canonical: "hrs",
        aliases: &["hour", "hr"],
        factor: 3.6e12,
    },
];

const TIME_DEFAULT: Unit = Unit {
    canonical: "s",
    aliases: &[],
    factor: 1e9,
};

const FAMILIES: &[Family] = &[
    Family {
        units: MEMORY_UNITS,
        default: &MEMORY_UNITS[0],
    },
    Family {
        units: TIME_UNITS,
        default: &TIME_DEFAULT,
    },
];

impl Family {
    /// The unit `name` stands for in this family: lower-cased, a plural `s` dropped (as pprof does).
    fn sniff(&self, name: &str) -> Option<&'static Unit> {
        let lower = name.to_lowercase();
        let name = if lower.chars().count() > 2 {
            lower.strip_suffix('s').unwrap_or(&lower)
        } else {
            &lower
        };
        self.units.iter().find(|u| u.aliases.contains(&name))
    }

    /// The largest unit in which `value` (in base units) is at least 1.
    fn auto_scale(&self, value: f64) -> Option<(f64, &'static str)> {
        let mut best: Option<&Unit> = None;
        for u in self.units {
            if best.is_none_or(|b| u.factor >= b.factor) && value / u.factor >= 1.0 {
                best = Some(u);
            }
        }
        best.map(|u| (value / u.factor, u.canonical))
    }

    fn convert(&self, value: i64, from: &str, to: &str) -> Option<(f64, &'static str)> {
        let from = self.sniff(from)?;
        let v = value as f64 * from.factor;
        if to == "minimum" || to == "auto" {
            return Some(
                self.auto_scale(v)
                    .unwrap_or((v / self.default.factor, self.default.canonical)),
            );
        }
        let to = self.sniff(to).unwrap_or(self.default);
        Some((v / to.factor, to.canonical))
    }
}

/// Converts `value` from unit `from` to unit `to` (`"minimum"`/`"auto"` pick the most natural unit).
/// Returns the scaled value and the unit to print (empty for plain counts).
pub fn scale(value: i64, from: &str, to: &str) -> (f64, String) {
    if value < 0 && value != i64::MIN {
        let (v, u) = scale(-value, from, to);
        return (-v, u);
    }
    for family in FAMILIES {
        if let Some((v, u)) = family.convert(value, from, to) {
            return (v, u.to_string());
        }
    }
    match to {
        "count" | "sample" | "unit" | "minimum" | "auto" => (value as f64, String::new()),
        _ => (value as f64, to.to_string()),
    }
}

/// `value` (in `from` units) printed in `to` units: `1.20s`, `10ms`, `259.04MB`, `0`, `42`.
pub fn scaled_label(value: i64, from: &str, to: &str) -> String {
    let (v, unit) = scale(value, from, to);
    let text = format!("{v:.2}");
    let text = text.strip_suffix(".00").unwrap_or(&text);
    if text == "0" || text == "-0" {
        return "0".to_string();
    }
    format!("{text}{unit}")
}

/// `value` as a share of `total`, padded like pprof: `62.07%`, `  100%`, `  0.5%`, `    0%`.
pub fn percentage(value: i64, total: i64) -> String {
    let ratio = if total != 0 {
        (value as f64 / total as f64).abs() * 100.0
    } else {
        0.0
    };
    if (99.95..=100.05).contains(&ratio) {
        "  100%".to_string()
    } else if ratio >= 1.0 {
        format!("{ratio:5.2}%")
    } else {
        format!("{:>5}%", go_g2(ratio))
    }
}

/// Go's `%.2g` for a non-negative number below 1 (after rounding it may reach 1): two significant
/// digits, trailing zeros dropped, exponent form below 1e-4.
fn go_g2(x: f64) -> String {
    if x == 0.0 {
        return "0".to_string();
    }
    // Rust's `{:.1e}` rounds to two significant digits and tells us the decimal exponent.
    let e_form = format!("{x:.1e}");
    let (mantissa, exp) = e_form.split_once('e').unwrap_or((&e_form, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    if !(-4..2).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let decimals = (1 - exp).max(0) as usize;
    let fixed = format!("{x:.decimals$}");
    if fixed.contains('.') {
        fixed
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        fixed
    }
}

/// The unit pprof picks for a whole report (`selectOutputUnit`): the unit natural for the smallest node
/// value, one step larger when that is under 1% of the total.
pub fn select_output_unit(min_node_value: i64, total: i64, sample_unit: &str) -> String {
    let max_value = total;
    let min_value = if min_node_value == 0 {
        max_value
    } else {
        min_node_value
    };
    let (_, min_unit) = scale(min_value, sample_unit, "minimum");
    let (_, max_unit) = scale(max_value, sample_unit, "minimum");
    let mut unit = min_unit.clone();
    if min_unit != max_unit && min_value.saturating_mul(100) < max_value {
        unit = scale(min_value.saturating_mul(100), sample_unit, "minimum").1;
    }
    if unit.is_empty() {
        sample_unit.to_string()
    } else {
        unit
    }
}

/// pprof's `Time:` value (`Jan 2, 2006 at 3:04pm (MST)`), rendered in UTC.
pub fn time_label(unix_nanos: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let (y, m, d) = crate::timefmt::civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let (h, min) = (sod / 3600, (sod % 3600) / 60);
    let (h12, ampm) = match h {
        0 => (12, "am"),
        1..=11 => (h, "am"),
        12 => (12, "pm"),
        _ => (h - 12, "pm"),
    };
    format!(
        "{} {d}, {y} at {h12}:{min:02}{ampm} (UTC)",
        MONTHS[(m - 1) as usize]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_label_is_pprofs_in_utc() {
        assert_eq!(
            time_label(1_795_993_200_000_000_000),
            "Nov 29, 2026 at 11:00pm (UTC)"
        );
        assert_eq!(time_label(0), "Jan 1, 1970 at 12:00am (UTC)");
    }

    #[test]
    fn labels_follow_pprof() {
        let cases: &[(i64, &str, &str, &str)] = &[
            (1_260_000_000, "nanoseconds", "s", "1.26s"),
            (10_000_000, "nanoseconds", "ms", "10ms"),
            (10_000_000, "nanoseconds", "s", "0.01s"),
            (0, "nanoseconds", "s", "0"),
            (-500_000_000, "nanoseconds", "s", "-0.50s"),
            (271_622_144, "bytes", "MB", "259.04MB"),
            (1536, "bytes", "kB", "1.50kB"),
            (42, "count", "count", "42"),
            (7, "objects", "objects", "7objects"),
            (2_110_000_000, "nanoseconds", "auto", "2.11s"),
        ];
        for &(v, from, to, want) in cases {
            assert_eq!(scaled_label(v, from, to), want, "{v} {from}->{to}");
        }
    }

    #[test]
    fn percentages_follow_pprof() {
        assert_eq!(percentage(1260, 2030), "62.07%");
        assert_eq!(percentage(5, 5), "  100%");
        assert_eq!(percentage(0, 5), "    0%");
        assert_eq!(percentage(0, 0), "    0%");
        assert_eq!(percentage(5, 1000), "  0.5%");
        assert_eq!(percentage(63, 10000), " 0.63%");
        assert_eq!(percentage(123, 1_000_000), "0.012%");
        assert_eq!(percentage(1, 10_000_000), "1e-05%");
        assert_eq!(percentage(-999, 100_000), "    1%");
    }

    #[test]
    fn output_unit_selection() {
        // Smallest node 10ms, total 2.03s: min*100 > total, so the unit of the smallest value.
        assert_eq!(
            select_output_unit(20_000_000, 2_030_000_000, "nanoseconds"),
            "s"
        );
        assert_eq!(
            select_output_unit(10_000, 2_030_000_000, "nanoseconds"),
            "ms"
        );
        assert_eq!(select_output_unit(5, 100, "count"), "count");
        assert_eq!(select_output_unit(1_740_000, 274_400_000, "bytes"), "MB");
    }
}
