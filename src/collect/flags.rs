//! `nl6 collect` flags: one table ([`FLAGS`]) that the parser and `-help` both use, Go-style single-dash
//! long flags (`-targets`) accepted as well as `--targets`, and parsing into validated low-level
//! arguments without I/O ([`parse_args`]); reading the targets file happens in [`super::Config`].
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::timefmt::parse_go_duration;

/// A flag: name (without dashes), value name (empty for a switch), default, and what it does.
pub struct Flag {
    pub name: &'static str,
    pub value: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// Every `nl6 collect` flag.
pub const FLAGS: &[Flag] = &[
    Flag {
        name: "targets",
        value: "FILE",
        default: "",
        doc: "targets file: `program_name http://host:port` per line, # comments (required)",
    },
    Flag {
        name: "out",
        value: "DIR",
        default: "",
        doc: "archive root: <out>/<program>/<yyyy>/<mm>/<dd>/<hh:mm:ss>/<fqdn>/<port>/ (required)",
    },
    Flag {
        name: "interval",
        value: "DURATION",
        default: "1h",
        doc: "time between cycle starts (Go duration: 90s, 1h)",
    },
    Flag {
        name: "cpu-seconds",
        value: "N",
        default: "10",
        doc: "length of each CPU profile in seconds",
    },
    Flag {
        name: "retain",
        value: "DURATION",
        default: "168h",
        doc: "delete dated directories older than this (by the date in their path)",
    },
    Flag {
        name: "concurrency",
        value: "N",
        default: "8",
        doc: "targets collected at once",
    },
    Flag {
        name: "timeout",
        value: "DURATION",
        default: "30s",
        doc: "per-request bound: heap fetch, and CPU fetch beyond its -cpu-seconds",
    },
    Flag {
        name: "baseline",
        value: "DIR",
        default: "",
        doc: "write cpu.diff.txt against the newest cpu.pb.gz for the same target under DIR (normalised as pprof -normalize when the windows differ)",
    },
    Flag {
        name: "once",
        value: "",
        default: "",
        doc: "run one cycle and exit (-once=false: keep cycling)",
    },
    Flag {
        name: "help",
        value: "",
        default: "",
        doc: "print this help",
    },
];

/// The `-help` text, generated from [`FLAGS`].
pub fn usage() -> String {
    let mut s = String::from("usage: nl6 collect -targets FILE -out DIR [flags]\n\nflags:\n");
    for f in FLAGS {
        let head = if f.value.is_empty() {
            format!("-{}", f.name)
        } else {
            format!("-{} {}", f.name, f.value)
        };
        let default = if f.default.is_empty() {
            String::new()
        } else {
            format!(" (default {})", f.default)
        };
        s.push_str(&format!("  {head:<22} {}{default}\n", f.doc));
    }
    s
}

/// Rewrites Go-style `-flag` / `-flag=value` (a single dash before a multi-letter name) to `--flag…`
/// so lexopt reads them as long options. Arguments after `--`, lone `-`, and single-letter `-h` are
/// left as they are.
pub fn go_style_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = false;
    for a in args {
        if rest {
            out.push(a);
            continue;
        }
        match a.to_str() {
            Some("--") => {
                rest = true;
                out.push(a);
            }
            Some(s) if s.starts_with('-') && !s.starts_with("--") => {
                let name = s[1..].split('=').next().unwrap_or("");
                if name.chars().count() > 1 {
                    out.push(OsString::from(format!("-{s}")));
                } else {
                    out.push(a);
                }
            }
            _ => out.push(a),
        }
    }
    out
}

/// Validated flags, before any I/O.
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
    pub once: bool,
    pub help: bool,
}

/// Parses `nl6 collect` arguments. Errors name the flag and what was wrong.
pub fn parse_args(args: Vec<OsString>) -> Result<CollectArgs, String> {
    use lexopt::prelude::*;
    let typed = args.clone();
    let mut p = lexopt::Parser::from_args(go_style_args(args));
    let mut targets = None;
    let mut out = None;
    let mut a = CollectArgs {
        targets: PathBuf::new(),
        out: PathBuf::new(),
        interval: Duration::from_secs(3600),
        cpu_seconds: 10,
        retain: Duration::from_secs(168 * 3600),
        concurrency: 8,
        timeout: Duration::from_secs(30),
        baseline: None,
        once: false,
        help: false,
    };
    let text = |p: &mut lexopt::Parser, flag: &str| -> Result<String, String> {
        p.value()
            .map_err(|e| format!("-{flag}: {e}"))?
            .into_string()
            .map_err(|v| format!("-{flag}: not UTF-8: {v:?}"))
    };
    let duration =
        |v: String, flag: &str| parse_go_duration(&v).map_err(|e| format!("-{flag}: {e}"));
    let positive = |v: String, flag: &str| match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("-{flag}: want a positive whole number, got {v:?}")),
    };
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("targets") => targets = Some(PathBuf::from(text(&mut p, "targets")?)),
            Long("out") => out = Some(PathBuf::from(text(&mut p, "out")?)),
            Long("interval") => a.interval = duration(text(&mut p, "interval")?, "interval")?,
            Long("cpu-seconds") => {
                a.cpu_seconds = positive(text(&mut p, "cpu-seconds")?, "cpu-seconds")?
            }
            Long("retain") => a.retain = duration(text(&mut p, "retain")?, "retain")?,
            Long("concurrency") => {
                a.concurrency = positive(text(&mut p, "concurrency")?, "concurrency")? as usize
            }
            Long("timeout") => a.timeout = duration(text(&mut p, "timeout")?, "timeout")?,
            Long("baseline") => a.baseline = Some(PathBuf::from(text(&mut p, "baseline")?)),
            // A Go bool: bare `-once` is true, `-once=false` is read by strconv.ParseBool's rules.
            Long("once") => {
                a.once = match p.optional_value() {
                    Some(v) => crate::goflag::parse_bool(&v.to_string_lossy())
                        .map_err(|e| format!("-once: {e}"))?,
                    None => true,
                }
            }
            Short('h') | Long("help") => a.help = true,
            Value(v) => return Err(format!("unexpected argument {v:?}")),
            Long(name) => {
                let known = FLAGS.iter().map(|f| f.name);
                return Err(crate::goflag::unknown_flag(&typed, name, known));
            }
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    if a.help {
        return Ok(a);
    }
    a.targets = targets.ok_or("missing -targets FILE")?;
    a.out = out.ok_or("missing -out DIR")?;
    if a.interval < Duration::from_secs(1) {
        return Err("-interval: must be at least 1s".into());
    }
    if a.retain.is_zero() {
        return Err("-retain: must be more than 0 (it would delete every snapshot)".into());
    }
    if a.timeout.is_zero() {
        return Err("-timeout: must be more than 0".into());
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn go_style_rewrite() {
        let got = go_style_args(os(&[
            "-targets", "t", "-once", "-h", "--out", "o", "-x=1", "-", "--", "-keep",
        ]));
        assert_eq!(
            got,
            os(&[
                "--targets",
                "t",
                "--once",
                "-h",
                "--out",
                "o",
                "-x=1",
                "-",
                "--",
                "-keep"
            ])
        );
        assert_eq!(go_style_args(os(&["-retain=2h"])), os(&["--retain=2h"]));
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
            let e = parse_args(os(args)).unwrap_err();
            assert!(e.contains(msg), "{args:?}: {e}");
        }
    }

    #[test]
    fn help_lists_every_flag_once() {
        let u = usage();
        for f in FLAGS {
            assert_eq!(
                u.matches(&format!("  -{} ", f.name)).count(),
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
}
