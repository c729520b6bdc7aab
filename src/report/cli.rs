//! `nl6 report`: prints the top table of a profile, or the diff of two, and can write a flame graph.
//!
//! ```text
//! nl6 report [-sample-index N|NAME] [-svg OUT.svg] FILE.pb.gz
//! nl6 report -diff-base OLD.pb.gz [-sample-index N|NAME] [-svg OUT.svg] NEW.pb.gz
//! ```
//! A FILE given as `s3://BUCKET/KEY` or `gs://BUCKET/KEY` is read through the opener the composition
//! root passes ([`main_with`]), within the same limits as a file.
//!
//! Exit status: 0 on success, 1 when a file cannot be read, decoded or written or is beyond
//! [`super::limits::LIMITS`] (one line on stderr names the limit), 2 on a usage error.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use crate::fsutil::write_atomically;
use crate::goflag::{Bound, Flag, FlagError, Positional};
use nl6_profile::proto::Profile;

use super::limits::ReadError;
use super::top::{DiffError, TooLargeToDraw};

const USAGE: &str =
    "usage: nl6 report [-sample-index N|NAME] [-svg OUT.svg] [-diff-base OLD.pb.gz] FILE.pb.gz";

/// Parsed `nl6 report` arguments.
#[derive(Debug, Default, PartialEq, Eq)]
struct ReportArgs {
    file: PathBuf,
    diff_base: Option<PathBuf>,
    svg: Option<PathBuf>,
    sample_index: Option<String>,
    help: bool,
}

/// Every `nl6 report` flag (Go pprof's `-diff_base` and `-sample_index` spellings are accepted too).
const FLAGS: &[Flag<ReportArgs>] = &[
    Flag::<ReportArgs>::value(
        "diff-base",
        "OLD.pb.gz",
        "",
        "print the difference from OLD.pb.gz to the profile",
        |a, v| {
            a.diff_base = Some(PathBuf::from(v));
            Ok(())
        },
    )
    .alias("diff_base"),
    Flag::value(
        "svg",
        "OUT.svg",
        "",
        "also write a flame graph to OUT.svg",
        |a, v| {
            a.svg = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    Flag::<ReportArgs>::value(
        "sample-index",
        "N|NAME",
        "",
        "the sample type to show, by index or name (default: the profile's default)",
        |a, v| {
            a.sample_index = Some(v.to_string());
            Ok(())
        },
    )
    .alias("sample_index"),
    Flag::stop("help", "print this help"),
];

/// Why `nl6 report`'s command line was refused (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
enum UsageError {
    Flag(FlagError),
    MissingFile,
    /// A second operand.
    Extra(OsString),
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::Flag(e) => write!(f, "{e}"),
            UsageError::MissingFile => f.write_str("missing profile file"),
            UsageError::Extra(word) => write!(f, "unexpected extra argument {word:?}"),
        }
    }
}

fn parse(args: Vec<OsString>) -> Result<ReportArgs, UsageError> {
    let mut out = ReportArgs::default();
    let mut files = Vec::new();
    let parsed = crate::goflag::parse(
        &args,
        &mut [&mut Bound(FLAGS, &mut out)],
        Positional::Collect(&mut files),
    )
    .map_err(UsageError::Flag)?;
    if parsed.stopped_at == Some("help") {
        out.help = true;
        return Ok(out);
    }
    let mut files = files.into_iter();
    out.file = files.next().ok_or(UsageError::MissingFile)?.into();
    if let Some(extra) = files.next() {
        return Err(UsageError::Extra(extra));
    }
    Ok(out)
}

/// `-help`: the usage line and the flags, from [`FLAGS`].
fn help_text() -> String {
    format!("{USAGE}\n\nflags:\n{}", crate::goflag::help_rows(FLAGS))
}

/// Reads a path this module does not (`s3://…`): `None` when it is not the opener's, else the bytes (at
/// most the limit given, plus one to show it was passed) or why not.
pub type Opener<'a> = &'a dyn Fn(&str, u64) -> Option<Result<Vec<u8>, OpenError>>;

/// Why an [`Opener`] could not read a path: the opener's own error.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

/// Why a report was not made: what it was about, and the exit status ([`ReportError::status`]).
#[derive(Debug)]
enum ReportError {
    Read(PathBuf, std::io::Error),
    Open(PathBuf, OpenError),
    /// Larger than nl6's limit for a profile (MiB).
    FileTooLarge(PathBuf, u64),
    /// Neither gzip nor a Profile message.
    NotPprof(PathBuf),
    /// Gzip, but no Profile message inside: the decoder's words.
    NotPprofInside(PathBuf, String),
    Decode(PathBuf, ReadError),
    /// `-sample-index` names no sample type of the file.
    NoSuchSampleType(String, PathBuf),
    NoSampleTypes(PathBuf),
    Diff(DiffError),
    /// The flame graph of the file (its title) would be too large.
    Flame(String, TooLargeToDraw),
    Write(PathBuf, std::io::Error),
}

impl ReportError {
    /// 2 for what the command line asked wrongly, 1 for the rest.
    fn status(&self) -> i32 {
        match self {
            ReportError::NoSuchSampleType(..) => 2,
            _ => 1,
        }
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Read(p, e) | ReportError::Write(p, e) => {
                write!(f, "{}: {e}", p.display())
            }
            ReportError::Open(p, e) => write!(f, "{}: {e}", p.display()),
            ReportError::FileTooLarge(p, mib) => write!(
                f,
                "{}: profile refused: the file is larger than {mib} MiB (nl6's limit for a profile)",
                p.display()
            ),
            ReportError::NotPprof(p) => write!(
                f,
                "{}: not a pprof profile (expected gzip or protobuf)",
                p.display()
            ),
            ReportError::NotPprofInside(p, m) => write!(
                f,
                "{}: not a pprof profile (gzip, but not a pprof protobuf inside: {m})",
                p.display()
            ),
            ReportError::Decode(p, e) => write!(f, "{}: {e}", p.display()),
            ReportError::NoSuchSampleType(spec, p) => write!(
                f,
                "-sample-index {spec:?}: no such sample type in {}",
                p.display()
            ),
            ReportError::NoSampleTypes(p) => write!(f, "{}: no sample types", p.display()),
            ReportError::Diff(e) => write!(f, "{e}"),
            ReportError::Flame(title, e) => write!(f, "{title}: {e}"),
        }
    }
}

/// A charge past [`REPORT_MEMORY`].
#[derive(Debug)]
struct OverMemory;

impl std::fmt::Display for OverMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "with the other profile it would take more than {} MiB (nl6 report's limit)",
            REPORT_MEMORY >> 20
        )
    }
}

impl std::error::Error for OverMemory {}

/// Runs `nl6 report` with `args` (without the program name and subcommand); returns the exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    main_with(args, &|_, _| None)
}

/// [`main`], with remote paths read by `open`.
pub fn main_with(args: Vec<OsString>, open: Opener) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nl6 report: {e}\n{USAGE}");
            return 2;
        }
    };
    if args.help {
        print!("{}", help_text());
        return 0;
    }
    match run(&args, open) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            // The error may quote the profile's own strings (sample types, units): inert on a terminal.
            eprintln!(
                "nl6 report: {}",
                nl6_text::logtext::terminal(&e.to_string())
            );
            e.status()
        }
    }
}

/// Memory `nl6 report` lets its profiles take together (inflated bytes as they arrive plus each decoded
/// estimate, see [`super::limits`]): one profile at every limit fits; a diff's two share it.
const REPORT_MEMORY: u64 = 160 << 20;

/// What the profiles loaded so far have charged against [`REPORT_MEMORY`].
#[derive(Default)]
struct Charged(u64);

fn load(path: &PathBuf, charged: &mut Charged, open: Opener) -> Result<Profile, ReportError> {
    use std::io::Read;
    // A compressed profile is never larger than what it inflates to (plus a few header bytes), so a file
    // beyond the inflated limit is refused without reading all of it.
    let cap = super::limits::LIMITS.inflated_bytes;
    let mut bytes = Vec::new();
    match open(&path.to_string_lossy(), cap + 1024 + 1) {
        Some(got) => bytes = got.map_err(|e| ReportError::Open(path.clone(), e))?,
        None => {
            std::fs::File::open(path)
                .and_then(|f| f.take(cap + 1024 + 1).read_to_end(&mut bytes))
                .map_err(|e| ReportError::Read(path.clone(), e))?;
        }
    }
    if bytes.len() as u64 > cap + 1024 {
        return Err(ReportError::FileTooLarge(path.clone(), cap >> 20));
    }
    let mut charge = |n: u64| -> Result<(), super::limits::Refusal> {
        charged.0 += n;
        if charged.0 > REPORT_MEMORY {
            return Err(OverMemory.into());
        }
        Ok(())
    };
    super::limits::decode_within(&bytes, &super::limits::LIMITS, &mut charge).map_err(|e| {
        // A file that is not gzip and not a Profile message (meta.json, a .txt table) is named as such;
        // the decoder's wire-type detail would only puzzle.
        match e {
            ReadError::Malformed(_) if !bytes.starts_with(&[0x1f, 0x8b]) => {
                ReportError::NotPprof(path.clone())
            }
            ReadError::Malformed(m) => ReportError::NotPprofInside(path.clone(), m),
            e => ReportError::Decode(path.clone(), e),
        }
    })
}

fn run(args: &ReportArgs, open: Opener) -> Result<String, ReportError> {
    let mut charged = Charged::default();
    let new = load(&args.file, &mut charged, open)?;
    let index = match &args.sample_index {
        Some(spec) => super::sample_index_by_name(&new, spec)
            .ok_or_else(|| ReportError::NoSuchSampleType(spec.clone(), args.file.clone()))?,
        None => super::default_sample_index(&new)
            .ok_or_else(|| ReportError::NoSampleTypes(args.file.clone()))?,
    };
    let title = args.file.display().to_string();
    let (text, svg) = match &args.diff_base {
        Some(base_path) => {
            let base = load(base_path, &mut charged, open)?;
            let text = super::diff_table(&base, &new, index).map_err(ReportError::Diff)?;
            let svg = match &args.svg {
                Some(_) => {
                    let t = format!("{} → {}", base_path.display(), title);
                    Some(
                        super::diff_flamegraph_svg(&base, &new, index, &t)
                            .map_err(ReportError::Diff)?,
                    )
                }
                None => None,
            };
            (text, svg)
        }
        None => (
            super::top_table(&new, index),
            match &args.svg {
                Some(_) => Some(
                    super::flamegraph_svg_for(&new, index, &title)
                        .map_err(|e| ReportError::Flame(title.clone(), e))?,
                ),
                None => None,
            },
        ),
    };
    if let (Some(path), Some(svg)) = (&args.svg, svg) {
        write_atomically(path, &svg).map_err(|e| ReportError::Write(path.clone(), e))?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn go_style_and_gnu_style_flags_parse_alike() {
        let a = parse(os(&["-diff-base", "old.pb.gz", "-svg=d.svg", "new.pb.gz"])).unwrap();
        let b = parse(os(&[
            "--diff-base",
            "old.pb.gz",
            "--svg",
            "d.svg",
            "new.pb.gz",
        ]))
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.diff_base, Some(PathBuf::from("old.pb.gz")));
        assert_eq!(a.file, PathBuf::from("new.pb.gz"));
    }

    #[test]
    fn a_value_starting_with_a_dash_is_taken_as_typed_as_nl6_and_go_take_it() {
        // Go's flag package and `nl6 -profiling-pyroscope-tenant -x` keep such a value as it is, so
        // `nl6 report` must not read it as a flag (`--d.svg`).
        let a = parse(os(&[
            "-svg",
            "-d.svg",
            "-diff-base",
            "-old.pb.gz",
            "new.pb.gz",
        ]))
        .unwrap();
        assert_eq!(a.svg, Some(PathBuf::from("-d.svg")));
        assert_eq!(a.diff_base, Some(PathBuf::from("-old.pb.gz")));
        let b = parse(os(&["-diff_base=o.pb.gz", "-sample_index", "1", "n.pb.gz"])).unwrap();
        assert_eq!(b.diff_base, Some(PathBuf::from("o.pb.gz")));
        assert_eq!(b.sample_index.as_deref(), Some("1"));
        assert!(help_text().contains("-svg OUT.svg"), "{}", help_text());
    }

    #[test]
    fn usage_errors_exit_2() {
        let err = |args: &[&str]| parse(os(args)).unwrap_err().to_string();
        assert!(err(&[]).contains("missing profile file"));
        assert!(err(&["a", "b"]).contains("extra argument"));
        assert_eq!(
            err(&["-bogus", "a"]),
            "flag provided but not defined: -bogus"
        );
        assert_eq!(
            err(&["-sample-indx", "1", "a"]),
            "flag provided but not defined: -sample-indx (did you mean -sample-index?)"
        );
        assert_eq!(main(os(&["-nope"])), 2);
    }

    #[test]
    fn a_file_that_is_not_a_profile_is_named_as_such() {
        let dir = std::env::temp_dir().join(format!("nl6-report-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = dir.join("meta.json");
        std::fs::write(&meta, br#"{"target":"http://h:1","profiles":{}}"#).unwrap();
        let args = parse(os(&[meta.to_str().unwrap()])).unwrap();
        let e = run(&args, &|_, _| None).unwrap_err();
        assert_eq!(e.status(), 1);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: not a pprof profile (expected gzip or protobuf)",
                meta.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unreadable_file_exits_1() {
        assert_eq!(main(os(&["/nonexistent/nl6/x.pb.gz"])), 1);
    }
}
