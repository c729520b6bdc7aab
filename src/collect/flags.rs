//! `nl6 collect` flags: one table ([`FLAGS`], [`crate::goflag::Flag`] rows) that the parser and `-help`
//! both use, and parsing into validated low-level arguments without I/O ([`parse_args`]); reading the
//! targets file happens in [`super::Config`].
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::baseline::DateError;
use super::s3url::UrlError;
use crate::goflag::{BoolError, Bound, Flag, FlagError, Positional};
use crate::timefmt::{parse_go_duration, DurationError};

/// Why a flag's value was refused (the flag parser puts the flag's name before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    Duration(DurationError),
    /// Not a whole number above 0 (the value as given).
    NotPositive(String),
    /// `-s3-addressing` is none of its three (as given).
    Addressing(String),
    Date(DateError),
    Bool(BoolError),
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::Duration(e) => write!(f, "{e}"),
            ValueError::NotPositive(v) => write!(f, "want a positive whole number, got {v:?}"),
            ValueError::Addressing(v) => write!(f, "want path, virtual or auto, got {v:?}"),
            ValueError::Date(e) => write!(f, "{e}"),
            ValueError::Bool(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ValueError {}

/// Why `nl6 collect`'s command line was refused (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    Flag(FlagError),
    /// A required flag, as `-help` writes it (`-targets FILE`).
    Missing(&'static str),
    IntervalUnderASecond,
    RetainZero,
    TimeoutZero,
    /// A bucket URL given to the flag.
    Bucket(&'static str, UrlError),
    /// `-s3-endpoint` or `-s3-credentials` with no bucket to use them on.
    S3WithoutBucket,
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::Flag(e) => write!(f, "{e}"),
            ArgsError::Missing(flag) => write!(f, "missing {flag}"),
            ArgsError::IntervalUnderASecond => f.write_str("-interval: must be at least 1s"),
            ArgsError::RetainZero => {
                f.write_str("-retain: must be more than 0 (it would delete every snapshot)")
            }
            ArgsError::TimeoutZero => f.write_str("-timeout: must be more than 0"),
            ArgsError::Bucket(flag, e) => write!(f, "{flag}: {e}"),
            ArgsError::S3WithoutBucket => f.write_str(
                "-s3-endpoint and -s3-credentials need -out or -baseline s3://BUCKET/PREFIX",
            ),
        }
    }
}

impl std::error::Error for ArgsError {}

/// Every `nl6 collect` flag: `-help` and the parser both read this table.
pub const FLAGS: &[Flag<CollectArgs, ValueError>] = &[
    Flag::value(
        "targets",
        "FILE",
        "",
        "targets file: `program_name http://host:port` per line, # comments (required)",
        |a, v| {
            a.targets = PathBuf::from(v);
            Ok(())
        },
    ),
    Flag::value(
        "out",
        "DIR",
        "",
        "archive root, a directory or s3://BUCKET/PREFIX or gs://BUCKET/PREFIX: <out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/ (required)",
        |a, v| {
            a.out = PathBuf::from(v);
            Ok(())
        },
    ),
    Flag::value(
        "interval",
        "DURATION",
        "1h",
        "time between cycle starts (Go duration: 90s, 1h)",
        |a, v| {
            a.interval = duration(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "cpu-seconds",
        "N",
        "10",
        "length of each CPU profile in seconds",
        |a, v| {
            a.cpu_seconds = positive(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "retain",
        "DURATION",
        "168h",
        "delete dated directories older than this (by the date in their path)",
        |a, v| {
            a.retain = duration(v)?;
            Ok(())
        },
    ),
    Flag::value("concurrency", "N", "8", "targets collected at once", |a, v| {
        a.concurrency = positive(v)? as usize;
        Ok(())
    }),
    Flag::value(
        "timeout",
        "DURATION",
        "30s",
        "per-request bound: heap fetch, and CPU fetch beyond its -cpu-seconds",
        |a, v| {
            a.timeout = duration(v)?;
            Ok(())
        },
    ),
    Flag::value(
        "baseline",
        "DIR",
        "",
        "write cpu.diff.txt against the newest cpu.pb.gz for the same target under DIR or s3://BUCKET/PREFIX (normalised as pprof -normalize when the windows differ)",
        |a, v| {
            a.baseline = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    Flag::value(
        "baseline-date",
        "YYYY-MM-DD",
        "",
        "diff against the newest snapshot of that day for the same target (under -baseline, else under -out)",
        |a, v| {
            a.baseline_date = Some(super::baseline::parse_date(v).map_err(ValueError::Date)?);
            Ok(())
        },
    ),
    Flag::value(
        "s3-endpoint",
        "URL",
        "",
        "the bucket's S3 endpoint (MinIO, SeaweedFS, Ceph; default AWS's for the region, https://storage.googleapis.com for gs://)",
        |a, v| {
            a.s3_endpoint = Some(v.to_string());
            Ok(())
        },
    ),
    Flag::value(
        "s3-region",
        "REGION",
        "",
        "the bucket's region for signing (default $AWS_REGION, else us-east-1; auto for gs://)",
        |a, v| {
            a.s3_region = Some(v.to_string());
            Ok(())
        },
    ),
    Flag::value(
        "s3-addressing",
        "STYLE",
        "auto",
        "path (https://endpoint/bucket/key), virtual (https://bucket.endpoint/key), or auto: virtual on AWS, path with -s3-endpoint or gs://",
        |a, v| match v {
            "auto" | "path" | "virtual" => {
                a.s3_addressing = v.to_string();
                Ok(())
            }
            _ => Err(ValueError::Addressing(v.to_string())),
        },
    ),
    Flag::value(
        "s3-credentials",
        "FILE",
        "",
        "an AWS shared credentials file ([default] or $AWS_PROFILE); default: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN",
        |a, v| {
            a.s3_credentials = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    Flag::value(
        "spool",
        "DIR",
        "/var/tmp/nl6-collect-spool",
        "with a bucket: where snapshots wait when the store refuses or cannot be reached (uploaded next cycle)",
        |a, v| {
            a.spool = PathBuf::from(v);
            Ok(())
        },
    ),
    Flag::value(
        "spool-bytes",
        "N",
        "1073741824",
        "the spool's bound in bytes; past it the oldest snapshots are dropped (and counted)",
        |a, v| {
            a.spool_bytes = positive(v)?;
            Ok(())
        },
    ),
    Flag::boolean(
        "once",
        "false",
        "run one cycle and exit (-once=false: keep cycling)",
        |a, v| {
            a.once = crate::goflag::parse_bool(v).map_err(ValueError::Bool)?;
            Ok(())
        },
    ),
    Flag::stop("help", "print this help"),
];

fn duration(v: &str) -> Result<Duration, ValueError> {
    parse_go_duration(v).map_err(ValueError::Duration)
}

fn positive(v: &str) -> Result<u64, ValueError> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ValueError::NotPositive(v.to_string())),
    }
}

/// The `-help` text, generated from [`FLAGS`].
pub fn usage() -> String {
    let mut s = String::from("usage: nl6 collect -targets FILE -out DIR [flags]\n\nflags:\n");
    s.push_str(&crate::goflag::help_rows(FLAGS));
    s
}

/// Validated flags, before any I/O. [`Default`] holds the defaults [`FLAGS`] documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectArgs {
    pub targets: PathBuf,
    pub out: PathBuf,
    pub interval: Duration,
    pub cpu_seconds: u64,
    pub retain: Duration,
    pub concurrency: usize,
    pub timeout: Duration,
    pub baseline: Option<PathBuf>,
    pub baseline_date: Option<[String; 3]>,
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    pub s3_addressing: String,
    pub s3_credentials: Option<PathBuf>,
    pub spool: PathBuf,
    pub spool_bytes: u64,
    pub once: bool,
    pub help: bool,
}

impl Default for CollectArgs {
    fn default() -> CollectArgs {
        CollectArgs {
            targets: PathBuf::new(),
            out: PathBuf::new(),
            interval: Duration::from_secs(3600),
            cpu_seconds: 10,
            retain: Duration::from_secs(168 * 3600),
            concurrency: 8,
            timeout: Duration::from_secs(30),
            baseline: None,
            baseline_date: None,
            s3_endpoint: None,
            s3_region: None,
            s3_addressing: "auto".to_string(),
            s3_credentials: None,
            spool: PathBuf::from("/var/tmp/nl6-collect-spool"),
            spool_bytes: 1 << 30,
            once: false,
            help: false,
        }
    }
}

/// Parses `nl6 collect` arguments. Errors name the flag and what was wrong.
pub fn parse_args(args: Vec<OsString>) -> Result<CollectArgs, ArgsError> {
    let mut a = CollectArgs::default();
    let refuse = |word: &str| format!("unexpected argument {word:?}");
    let parsed = crate::goflag::parse(
        &args,
        &mut [&mut Bound(FLAGS, &mut a)],
        Positional::Refuse(&refuse),
    )
    .map_err(ArgsError::Flag)?;
    if parsed.stopped_at == Some("help") {
        a.help = true;
        return Ok(a);
    }
    if a.targets.as_os_str().is_empty() {
        return Err(ArgsError::Missing("-targets FILE"));
    }
    if a.out.as_os_str().is_empty() {
        return Err(ArgsError::Missing("-out DIR"));
    }
    if a.interval < Duration::from_secs(1) {
        return Err(ArgsError::IntervalUnderASecond);
    }
    if a.retain.is_zero() {
        return Err(ArgsError::RetainZero);
    }
    if a.timeout.is_zero() {
        return Err(ArgsError::TimeoutZero);
    }
    let out = a.out.to_string_lossy();
    if super::s3url::is_bucket(&out) {
        super::s3url::parse(&out).map_err(|e| ArgsError::Bucket("-out", e))?;
    }
    let baseline_in_bucket = a
        .baseline
        .as_ref()
        .is_some_and(|b| super::s3url::is_bucket(&b.to_string_lossy()));
    if let Some(b) = a.baseline.as_ref().filter(|_| baseline_in_bucket) {
        super::s3url::parse(&b.to_string_lossy()).map_err(|e| ArgsError::Bucket("-baseline", e))?;
    }
    if !super::s3url::is_bucket(&out)
        && !baseline_in_bucket
        && (a.s3_endpoint.is_some() || a.s3_credentials.is_some())
    {
        return Err(ArgsError::S3WithoutBucket);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goflag::Takes;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn defaults_and_both_dash_styles() {
        let a = parse_args(os(&["-targets", "t.txt", "-out", "/arch"])).unwrap();
        assert_eq!(a.interval, Duration::from_secs(3600));
        assert_eq!((a.cpu_seconds, a.concurrency, a.once), (10, 8, false));
        assert_eq!(a.retain, Duration::from_secs(168 * 3600));
        assert_eq!(a.timeout, Duration::from_secs(30));
        let b = parse_args(os(&[
            "--targets=t.txt",
            "-out=/arch",
            "-interval",
            "90s",
            "-cpu-seconds",
            "2",
            "--retain",
            "1h",
            "-concurrency",
            "3",
            "-once",
            "-baseline",
            "/good",
            "-timeout",
            "5s",
        ]))
        .unwrap();
        assert_eq!(b.targets, PathBuf::from("t.txt"));
        assert_eq!(b.interval, Duration::from_secs(90));
        assert_eq!((b.cpu_seconds, b.concurrency, b.once), (2, 3, true));
        assert_eq!(b.baseline, Some(PathBuf::from("/good")));
        assert_eq!(b.timeout, Duration::from_secs(5));
        for (once, want) in [
            ("-once=false", false),
            ("-once=T", true),
            ("--once=0", false),
        ] {
            let c = parse_args(os(&["-targets", "t", "-out", "o", once])).unwrap();
            assert_eq!(c.once, want, "{once}");
        }
    }

    #[test]
    fn usage_errors_name_the_flag() {
        for (args, msg) in [
            (&["-out", "o"][..], "missing -targets"),
            (&["-targets", "t"][..], "missing -out"),
            (
                &["-targets", "t", "-out", "o", "-interval", "soon"][..],
                "-interval: invalid duration",
            ),
            (
                &["-targets", "t", "-out", "o", "-cpu-seconds", "0"][..],
                "-cpu-seconds: want a positive",
            ),
            (
                &["-targets", "t", "-out", "o", "-concurrency", "-1"][..],
                "-concurrency",
            ),
            (
                &["-targets", "t", "-out", "o", "-retain", "0"][..],
                "-retain: must be more than 0",
            ),
            (
                &["-targets", "t", "-out", "o", "-bogus"][..],
                "flag provided but not defined: -bogus",
            ),
            (
                &["-targets", "t", "-out", "o", "-interal", "1h"][..],
                "flag provided but not defined: -interal (did you mean -interval?)",
            ),
            (
                &["-targets", "t", "-out", "o", "-once=yes"][..],
                "-once: invalid boolean \"yes\"",
            ),
            (
                &["-targets", "t", "-out", "o", "stray"][..],
                "unexpected argument",
            ),
            (&["-targets"][..], "-targets"),
        ] {
            let e = parse_args(os(args)).unwrap_err().to_string();
            assert!(e.contains(msg), "{args:?}: {e}");
        }
    }

    #[test]
    fn help_lists_every_flag_once() {
        let u = usage();
        for f in FLAGS {
            assert_eq!(
                u.matches(&format!("  {} ", f.usage())).count(),
                1,
                "{}",
                f.name
            );
        }
        let mut names: Vec<_> = FLAGS.iter().map(|f| f.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FLAGS.len(), "duplicate flag in FLAGS");
    }

    #[test]
    fn documented_defaults_are_the_defaults() {
        for f in FLAGS.iter().filter(|f| !f.default.is_empty()) {
            let mut a = CollectArgs::default();
            (f.apply)(&mut a, f.default).unwrap();
            assert_eq!(
                a,
                CollectArgs::default(),
                "-{} default {}",
                f.name,
                f.default
            );
        }
    }

    /// docs/collect.md lists every flag as `-name DEFAULT` (or `-name VALUE` when there is no default):
    /// a flag added, renamed or given a new default here fails until the page says so.
    #[test]
    fn the_collect_page_lists_every_flag_with_its_default() {
        let page = include_str!("../../docs/collect.md");
        let list = page
            .split("`nl6 collect -help` lists them):\n")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .expect("docs/collect.md lists the flags");
        let listed: Vec<&str> = list
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|code| code.starts_with('-'))
            .collect();
        for f in FLAGS.iter().filter(|f| f.name != "help") {
            let want = match f.takes {
                Takes::Value(v) if f.default.is_empty() => format!("-{} {v}", f.name),
                Takes::Value(_) => format!("-{} {}", f.name, f.default),
                _ => format!("-{}", f.name),
            };
            assert!(
                listed.contains(&want.as_str()),
                "docs/collect.md lacks `{want}`: {listed:?}"
            );
        }
        assert_eq!(listed.len(), FLAGS.len() - 1, "{listed:?}");
    }
}
