//! The archive layout `<out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/` as plain values:
//! UTC stamps from Unix seconds and back, snapshot paths, the hidden name a snapshot is built under,
//! which dated directories retention expires (the date is read from the path, never from file times),
//! and which archived profile is the newest baseline for a target.
//!
//! Everything here takes values (including `now`) and returns values; [`super::retention`] does the I/O.
#![forbid(unsafe_code)]

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::targets::Target;
use crate::timefmt::{civil_from_days, days_from_civil};

/// A UTC calendar time to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl Stamp {
    /// The UTC time `unix_secs` seconds after the epoch.
    pub fn from_unix(unix_secs: i64) -> Stamp {
        let (year, month, day) = civil_from_days(unix_secs.div_euclid(86_400));
        let sod = unix_secs.rem_euclid(86_400) as u32;
        Stamp {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: (sod % 3600) / 60,
            second: sod % 60,
        }
    }

    /// Seconds since the epoch.
    pub fn to_unix(self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * 86_400
            + i64::from(self.hour * 3600 + self.minute * 60 + self.second)
    }

    /// The four dated path components: `yyyy`, `mm`, `dd`, `hh:mm:ss`.
    pub fn components(self) -> [String; 4] {
        [
            format!("{:04}", self.year),
            format!("{:02}", self.month),
            format!("{:02}", self.day),
            format!("{:02}:{:02}:{:02}", self.hour, self.minute, self.second),
        ]
    }

    /// RFC 3339 (`2026-11-29T23:15:00Z`), for meta.json and logs.
    pub fn rfc3339(self) -> String {
        let mut out = String::new();
        let _ = crate::timefmt::Timestamp {
            year: self.year,
            month: self.month,
            day: self.day,
            hour: self.hour,
            minute: self.minute,
            second: self.second,
            fraction: 0,
            frac_digits: 0,
            offset_minutes: 0,
        }
        .write_to(&mut out);
        out
    }

    /// Reads the four dated components back; `None` unless they are exactly `yyyy`, `mm`, `dd`,
    /// `hh:mm:ss` naming a real date and time.
    pub fn parse_components(yyyy: &str, mm: &str, dd: &str, hms: &str) -> Option<Stamp> {
        fn num(s: &str, len: usize) -> Option<u32> {
            (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        }
        let year = i64::from(num(yyyy, 4)?);
        let (month, day) = (num(mm, 2)?, num(dd, 2)?);
        let mut parts = hms.split(':');
        let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (hour, minute, second) = (num(h, 2)?, num(m, 2)?, num(s, 2)?);
        let stamp = Stamp {
            year,
            month,
            day,
            hour,
            minute,
            second,
        };
        // Round-tripping rejects 2026-02-30, 25:00:00 and the like.
        (hour < 24
            && minute < 60
            && second < 60
            && (1..=12).contains(&month)
            && Stamp::from_unix(stamp.to_unix()) == stamp)
            .then_some(stamp)
    }
}

/// `<out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>`: where a target's snapshot of the
/// cycle started at `cycle_start` lives.
pub fn snapshot_dir(out: &Path, target: &Target, cycle_start: Stamp) -> PathBuf {
    let mut p = dated_dir(out, &target.program, cycle_start);
    p.push(&target.fqdn);
    p.push(target.port.to_string());
    p
}

/// `<out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>`.
pub fn dated_dir(out: &Path, program: &str, stamp: Stamp) -> PathBuf {
    let mut p = out.join(program);
    for c in stamp.components() {
        p.push(c);
    }
    p
}

/// The hidden sibling a snapshot is assembled in (`.<port>.partial-<pid>`) before it is renamed into
/// place: a crash leaves only this, which never looks like a finished snapshot.
pub fn partial_name(port: u16, pid: u32) -> String {
    format!(".{port}.partial-{pid}")
}

/// A dated directory found in the archive: its path relative to `-out`
/// (`<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>`) and the time its path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatedDir {
    pub relative: PathBuf,
    pub stamp: Stamp,
}

/// Recognises `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>` (relative to `-out`) and reads its date.
pub fn parse_dated_relative(relative: &Path) -> Option<DatedDir> {
    let parts: Vec<&str> = relative
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let [_program, y, m, d, hms] = parts[..] else {
        return None;
    };
    Some(DatedDir {
        relative: relative.to_path_buf(),
        stamp: Stamp::parse_components(y, m, d, hms)?,
    })
}

/// The dated directories retention deletes: those whose path date is strictly older than
/// `now - retain`. Pure: the caller lists the archive and passes the clock in.
pub fn select_expired(dirs: &[DatedDir], now_unix: i64, retain: Duration) -> Vec<DatedDir> {
    let cutoff = now_unix.saturating_sub(i64::try_from(retain.as_secs()).unwrap_or(i64::MAX));
    let mut out: Vec<DatedDir> = dirs
        .iter()
        .filter(|d| d.stamp.to_unix() < cutoff)
        .cloned()
        .collect();
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    out
}

/// Among `candidates` (paths to archived profiles), the newest one archived for `target`: a path
/// ending `<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/<file>` with the target's program, fqdn
/// and port, newest by the date in its path.
pub fn newest_for_target<'a>(
    candidates: &'a [PathBuf],
    target: &Target,
    file: &str,
) -> Option<&'a PathBuf> {
    let port = target.port.to_string();
    candidates
        .iter()
        .filter_map(|path| {
            let parts: Vec<&str> = path
                .components()
                .filter_map(|c| c.as_os_str().to_str())
                .collect();
            let n = parts.len();
            if n < 8 {
                return None;
            }
            let [program, y, m, d, hms, fqdn, p, f] = parts[n - 8..] else {
                return None;
            };
            if program != target.program || fqdn != target.fqdn || p != port || f != file {
                return None;
            }
            Some((Stamp::parse_components(y, m, d, hms)?, path))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::targets::parse_targets;

    fn target(line: &str) -> Target {
        parse_targets(line).unwrap().remove(0)
    }

    #[test]
    fn stamps_round_trip_and_format() {
        // 2026-11-29 23:15:07 UTC
        let s = Stamp::from_unix(1_795_994_107);
        assert_eq!(s.components(), ["2026", "11", "29", "23:15:07"]);
        assert_eq!(s.rfc3339(), "2026-11-29T23:15:07Z");
        assert_eq!(s.to_unix(), 1_795_994_107);
        assert_eq!(
            Stamp::from_unix(0).components(),
            ["1970", "01", "01", "00:00:00"]
        );
        assert_eq!(
            Stamp::parse_components("2026", "11", "29", "23:15:07"),
            Some(s)
        );
        for bad in [
            ("2026", "02", "30", "00:00:00"),
            ("2026", "13", "01", "00:00:00"),
            ("2026", "1", "01", "00:00:00"),
            ("2026", "01", "01", "24:00:00"),
            ("2026", "01", "01", "00:00"),
            ("20x6", "01", "01", "00:00:00"),
            ("2026", "01", "01", "00:00:00:00"),
        ] {
            assert_eq!(
                Stamp::parse_components(bad.0, bad.1, bad.2, bad.3),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn snapshot_path_is_the_documented_layout() {
        let t = target("gitaly http://gitaly-01.example.com:9236");
        let p = snapshot_dir(Path::new("/archive"), &t, Stamp::from_unix(1_795_994_107));
        assert_eq!(
            p,
            PathBuf::from("/archive/gitaly/2026/11/29/23:15:07/gitaly-01.example.com/9236")
        );
        let t = target("pages https://pages.example.com/");
        let p = snapshot_dir(Path::new("out"), &t, Stamp::from_unix(0));
        assert_eq!(
            p,
            PathBuf::from("out/pages/1970/01/01/00:00:00/pages.example.com/443")
        );
        assert_eq!(partial_name(9236, 42), ".9236.partial-42");
    }

    #[test]
    fn retention_selects_by_path_date_only() {
        let now = Stamp {
            year: 2026,
            month: 11,
            day: 29,
            hour: 12,
            minute: 0,
            second: 0,
        }
        .to_unix();
        let dirs: Vec<DatedDir> = [
            "svc/2026/11/22/11:59:59", // 7 days and 1 second old: expired
            "svc/2026/11/22/12:00:00", // exactly 7 days: kept
            "svc/2026/11/29/11:00:00",
            "other/2025/01/01/00:00:00",
            "svc/2027/01/01/00:00:00", // in the future: kept
        ]
        .iter()
        .map(|p| parse_dated_relative(Path::new(p)).unwrap())
        .collect();
        let expired = select_expired(&dirs, now, Duration::from_secs(168 * 3600));
        let names: Vec<_> = expired
            .iter()
            .map(|d| d.relative.to_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["other/2025/01/01/00:00:00", "svc/2026/11/22/11:59:59"]
        );
        assert!(select_expired(&dirs, now, Duration::from_secs(100 * 365 * 86_400)).is_empty());
        for not_dated in [
            "svc/2026/11/22",
            "svc/2026/11/22/12:00:00/host",
            "svc/2026/11/xx/12:00:00",
            "../2026/11/22/12:00:00",
        ] {
            assert_eq!(
                parse_dated_relative(Path::new(not_dated)),
                None,
                "{not_dated}"
            );
        }
    }

    #[test]
    fn baseline_is_the_newest_for_the_same_target() {
        let t = target("svc http://h:80");
        let c: Vec<PathBuf> = [
            "/b/svc/2026/11/20/10:00:00/h/80/cpu.pb.gz",
            "/b/svc/2026/11/21/09:00:00/h/80/cpu.pb.gz",
            "/b/svc/2026/11/22/09:00:00/h/81/cpu.pb.gz", // other port
            "/b/svc/2026/11/23/09:00:00/other/80/cpu.pb.gz", // other host
            "/b/web/2026/11/24/09:00:00/h/80/cpu.pb.gz", // other program
            "/b/svc/2026/11/25/09:00:00/h/80/heap.pb.gz", // other file
            "/b/svc/2026/11/26/bad/h/80/cpu.pb.gz",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(newest_for_target(&c, &t, "cpu.pb.gz"), Some(&c[1]));
        assert_eq!(newest_for_target(&c[2..], &t, "cpu.pb.gz"), None);
    }
}
