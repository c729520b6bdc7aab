//! The `nl6` command line: the flag table ([`FLAGS`], from which `--help` is generated), parsing in two
//! phases (argv → validated [`Args`] without I/O in [`parse`]; [`Args`] → [`config::Config`], which reads
//! the credentials file), the [`Mode`] enum that subcommands are variants of, and [`main`].
//!
//! Go-style single-dash long flags (`-profiling-pyroscope URL`, as the seed writes them) are rewritten to
//! the double-dash form before lexopt sees them (lexopt would read `-port` as the short flags p, o, r, t).
//! Every refusal is one line on stderr starting `nl6: ` and exit status 2.
#![deny(unsafe_code)]

pub mod config;
mod run;
pub mod signals;

use crate::gate::address;
use crate::timefmt::parse_positive_go_duration as parse_go_duration;
use std::ffi::OsString;
use std::time::Duration;

/// One flag: its long name (used with one or two dashes), the name of its value (None: a switch), its
/// default as shown by `--help`, and its documentation.
#[derive(Debug)]
pub struct FlagSpec {
    pub name: &'static str,
    pub value: Option<&'static str>,
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

/// Every flag of `nl6` (serve mode). `--help` is generated from this table.
pub const FLAGS: &[FlagSpec] = &[
    FlagSpec { name: "port", value: Some("PORT"), default: Some("8080"), doc: "Listen on all interfaces at PORT." },
    FlagSpec {
        name: "listen",
        value: Some("ADDR"),
        default: None,
        doc: "Listen on ADDR (e.g. 127.0.0.1:8080, or :8080 for all interfaces) instead of -port; port 0 picks a free port.",
    },
    FlagSpec {
        name: "profiling-pyroscope",
        value: Some("URL"),
        default: None,
        doc: "Open the profiling gate at start and push to this Pyroscope (http:// or https://, no user:pass@, no query).",
    },
    FlagSpec {
        name: "profiling-pyroscope-basic-auth",
        value: Some("USER:PASS"),
        default: None,
        doc: "Basic auth for -profiling-pyroscope's address only. Visible in the process arguments: prefer the file form.",
    },
    FlagSpec {
        name: "profiling-pyroscope-basic-auth-file",
        value: Some("PATH"),
        default: None,
        doc: "Read basic auth (one line USER:PASS) from PATH once at startup, keeping the secret out of argv.",
    },
    FlagSpec {
        name: "profiling-pyroscope-tenant",
        value: Some("ID"),
        default: None,
        doc: "X-Scope-OrgID sent to -profiling-pyroscope's address only.",
    },
    FlagSpec {
        name: "profiling-heap-rate",
        value: Some("BYTES"),
        default: Some("524288"),
        doc: "Heap sampling rate: one sample per BYTES allocated on average (0 turns heap sampling off).",
    },
    FlagSpec {
        name: "profiling-upload-interval",
        value: Some("DURATION"),
        default: Some("15s"),
        doc: "How often the push uploads (Go duration syntax, at least 1s).",
    },
    FlagSpec { name: "help", value: None, default: None, doc: "Print this help and exit (also -h)." },
    FlagSpec { name: "version", value: None, default: None, doc: "Print the version and git commit and exit." },
];

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Mode {
    /// Serve (the default): boot the HTTP server and the gate.
    Serve(Box<Args>),
    /// `nl6 collect …`: handed to [`crate::collect::main`].
    Collect(Vec<OsString>),
    /// `nl6 report …`: handed to [`crate::report::main`].
    Report(Vec<OsString>),
    Help,
    Version,
}

/// Serve-mode arguments, validated without I/O. Secrets are hidden from `Debug`.
#[derive(PartialEq, Eq)]
pub struct Args {
    pub listen: String,
    pub pyroscope: Option<String>,
    pub basic_auth: Option<(String, String)>,
    pub basic_auth_file: Option<std::path::PathBuf>,
    pub tenant: Option<String>,
    pub heap_rate: Option<usize>,
    pub upload_interval: Duration,
    /// The lab fleet's settings, from the flags in [`crate::lab::FLAGS`].
    pub fleet: crate::lab::FleetConfig,
}

impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Args")
            .field("listen", &self.listen)
            .field("pyroscope", &self.pyroscope)
            .field("basic_auth", &self.basic_auth.as_ref().map(|_| "<set>"))
            .field("basic_auth_file", &self.basic_auth_file)
            .field("tenant", &self.tenant.as_ref().map(|_| "<set>"))
            .field("heap_rate", &self.heap_rate)
            .field("upload_interval", &self.upload_interval)
            .field("fleet", &self.fleet)
            .finish()
    }
}

/// A refusal: printed as `nl6: <message>`, exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(msg: impl Into<String>) -> Result<T, CliError> {
    Err(CliError(msg.into()))
}

/// The version line: crate version and the git commit recorded at build time.
pub fn version_line() -> String {
    format!(
        "nl6 {} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("NL6_GIT_COMMIT")
    )
}

/// `--help`, generated from [`FLAGS`].
pub fn help_text() -> String {
    let mut out = String::from(
        "nl6: a lab tool that simulates network devices and profiles itself continuously, without eBPF.\n\n\
         Usage:\n  nl6 [flags]            serve the REST API, the profiling gate and /debug/pprof/\n  \
         nl6 collect [args]     scheduled fleet profile collection (nl6 collect -h)\n  \
         nl6 report [args]      reports over a collection archive (nl6 report -h)\n\n\
         Flags (one or two dashes: -port 8080 and --port=8080 are the same):\n",
    );
    let column = |f: &FlagSpec| match f.value {
        Some(v) => format!("-{} {v}", f.name),
        None => format!("-{}", f.name),
    };
    let width = FLAGS.iter().map(|f| column(f).len()).max().unwrap_or(0);
    for f in FLAGS {
        out.push_str(&format!("  {:width$}  {}", column(f), f.doc));
        if let Some(d) = f.default {
            out.push_str(&format!(" (default {d})"));
        }
        out.push('\n');
    }
    // The lab fleet's flags live beside the fleet (crate::lab::FLAGS); listed here the same way.
    out.push_str("\nLab fleet flags (simulated devices):\n");
    let lab_column = |f: &crate::lab::config::FlagDoc| match f.value {
        "BOOL" => format!("-{}[=BOOL]", f.name),
        v => format!("-{} {v}", f.name),
    };
    let lab_width = crate::lab::FLAGS
        .iter()
        .map(|f| lab_column(f).len())
        .max()
        .unwrap_or(0);
    for f in crate::lab::FLAGS {
        out.push_str(&format!("  {:lab_width$}  {}", lab_column(f), f.doc));
        if !f.default.is_empty() {
            out.push_str(&format!(" (default {})", f.default));
        }
        out.push('\n');
    }
    out.push_str(
        "\nThe profiling gate is closed unless -profiling-pyroscope is given; open it at runtime with\n  \
         curl -X POST localhost:8080/api/v1/profiling -d '{\"enabled\":true,\"server_address\":\"\"}'\n\
         See SECURITY.md before exposing the port.\n",
    );
    out
}

/// Rewrites Go-style `-long-flag` to `--long-flag`, skipping the values of flags that take one (so a
/// value starting with `-` is left alone). Short `-h` and anything after `--` are untouched.
pub fn rewrite_go_style(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            out.push(arg);
            out.extend(iter.by_ref());
            break;
        }
        let body = s.strip_prefix("--").or_else(|| {
            s.strip_prefix('-')
                .filter(|b| b.len() > 1 && !b.starts_with('-'))
        });
        let Some(body) = body else {
            out.push(arg);
            continue;
        };
        let (name, has_inline_value) = match body.split_once('=') {
            Some((n, _)) => (n, true),
            None => (body, false),
        };
        if is_bool_flag(name) && !has_inline_value {
            // Go's bare `-trap-inform` means true. nl6 takes no positional argument, so a following
            // ParseBool literal (`-trap-inform false`) cannot be anything but this flag's value.
            let value = match iter.as_slice().first().and_then(|v| v.to_str()) {
                Some(v) if crate::goflag::is_bool_literal(v) => {
                    let v = v.to_string();
                    iter.next();
                    v
                }
                _ => "true".to_string(),
            };
            out.push(OsString::from(format!("--{name}={value}")));
            continue;
        }
        out.push(OsString::from(format!("--{body}")));
        let takes_value = FLAGS.iter().any(|f| f.name == name && f.value.is_some())
            || crate::lab::FLAGS.iter().any(|f| f.name == name);
        if takes_value && !has_inline_value {
            if let Some(v) = iter.next() {
                out.push(v);
            }
        }
    }
    out
}

/// A boolean flag (Go's `flag.Bool`): bare means true, `=VALUE` is read by [`crate::goflag::parse_bool`].
fn is_bool_flag(name: &str) -> bool {
    crate::lab::FLAGS
        .iter()
        .any(|f| f.name == name && f.value == "BOOL")
}

/// The subcommands, for "did you mean" on a near miss.
const SUBCOMMANDS: &[&str] = &["collect", "report"];

/// The refusal for an unknown flag, echoed as typed (`-bogus`), naming the closest real flag if any.
fn unknown_flag(argv: &[OsString], name: &str) -> CliError {
    let known = FLAGS
        .iter()
        .map(|f| f.name)
        .chain(crate::lab::FLAGS.iter().map(|f| f.name));
    CliError(format!(
        "{} (see nl6 -h)",
        crate::goflag::unknown_flag(argv, name, known)
    ))
}

/// The refusal for a stray word: a mistyped subcommand gets "did you mean".
fn unexpected_word(word: &str) -> CliError {
    match crate::goflag::nearest(word, SUBCOMMANDS.iter().copied()) {
        Some(cmd) => CliError(format!(
            "unknown command {word:?}: did you mean {cmd}? (see nl6 -h)"
        )),
        None => CliError(format!("unexpected argument {word:?} (see nl6 -h)")),
    }
}

/// Phase one: argv (without the program name) → [`Mode`]. No I/O and no environment.
pub fn parse(argv: Vec<OsString>) -> Result<Mode, CliError> {
    match argv.first().and_then(|a| a.to_str()) {
        Some("collect") => return Ok(Mode::Collect(argv[1..].to_vec())),
        Some("report") => return Ok(Mode::Report(argv[1..].to_vec())),
        _ => {}
    }
    use lexopt::prelude::*;
    let typed = argv.clone();
    let mut parser = lexopt::Parser::from_args(rewrite_go_style(argv));
    let mut port: u16 = 8080;
    let mut listen = None;
    let mut pyroscope = None;
    let mut basic_auth = None;
    let mut basic_auth_file = None;
    let mut tenant = None;
    let mut heap_rate = None;
    let mut upload_interval = Duration::from_secs(15);
    let mut fleet = crate::lab::FleetConfig::default();
    let err = |e: lexopt::Error| CliError(e.to_string());
    while let Some(arg) = parser.next().map_err(err)? {
        match arg {
            Short('h') | Long("help") => return Ok(Mode::Help),
            Long("version") => return Ok(Mode::Version),
            Long("port") => {
                let v = take_value(&mut parser, "port")?;
                port = v
                    .parse()
                    .map_err(|_| CliError(format!("-port {v:?}: not a port number (0-65535)")))?;
            }
            Long("listen") => {
                let v = take_value(&mut parser, "listen")?;
                listen = Some(check_listen(&v)?);
            }
            Long("profiling-pyroscope") => {
                let v = take_value(&mut parser, "profiling-pyroscope")?;
                address::validate(&v)
                    .map_err(|e| CliError(format!("-profiling-pyroscope: {e}")))?;
                pyroscope = Some(v);
            }
            Long("profiling-pyroscope-basic-auth") => {
                let v = take_value(&mut parser, "profiling-pyroscope-basic-auth")?;
                basic_auth = Some(
                    split_basic_auth(&v)
                        .map_err(|e| CliError(format!("-profiling-pyroscope-basic-auth: {e}")))?,
                );
            }
            Long("profiling-pyroscope-basic-auth-file") => {
                basic_auth_file = Some(std::path::PathBuf::from(take_value(
                    &mut parser,
                    "profiling-pyroscope-basic-auth-file",
                )?));
            }
            Long("profiling-pyroscope-tenant") => {
                let v = take_value(&mut parser, "profiling-pyroscope-tenant")?;
                if v.trim().is_empty() {
                    return refuse("-profiling-pyroscope-tenant: empty tenant ID");
                }
                tenant = Some(v);
            }
            Long("profiling-heap-rate") => {
                let v = take_value(&mut parser, "profiling-heap-rate")?;
                heap_rate = Some(v.parse::<usize>().map_err(|_| {
                    CliError(format!("-profiling-heap-rate {v:?}: not a byte count"))
                })?);
            }
            Long("profiling-upload-interval") => {
                let v = take_value(&mut parser, "profiling-upload-interval")?;
                let d = parse_go_duration(&v)
                    .map_err(|e| CliError(format!("-profiling-upload-interval: {e}")))?;
                if d < Duration::from_secs(1) {
                    return refuse(format!(
                        "-profiling-upload-interval {v}: must be at least 1s"
                    ));
                }
                upload_interval = d;
            }
            Long(name) if crate::lab::FLAGS.iter().any(|f| f.name == name) => {
                let name = name.to_string();
                let v = take_value(&mut parser, &name)?;
                // FleetConfig::set's errors already start with the flag's name.
                fleet.set(&name, &v).map_err(CliError)?;
            }
            Value(v) => return Err(unexpected_word(&v.to_string_lossy())),
            Long(name) => return Err(unknown_flag(&typed, name)),
            other => return refuse(format!("{} (see nl6 -h)", other.unexpected())),
        }
    }
    if pyroscope.is_none() {
        for (set, flag) in [
            (basic_auth.is_some(), "-profiling-pyroscope-basic-auth"),
            (
                basic_auth_file.is_some(),
                "-profiling-pyroscope-basic-auth-file",
            ),
            (tenant.is_some(), "-profiling-pyroscope-tenant"),
        ] {
            if set {
                return refuse(format!(
                    "{flag} requires -profiling-pyroscope (credentials are bound to its address)"
                ));
            }
        }
    }
    if basic_auth.is_some() && basic_auth_file.is_some() {
        return refuse("-profiling-pyroscope-basic-auth and -profiling-pyroscope-basic-auth-file are exclusive: give one");
    }
    let listen = listen.unwrap_or_else(|| format!("0.0.0.0:{port}"));
    Ok(Mode::Serve(Box::new(Args {
        listen,
        pyroscope,
        basic_auth,
        basic_auth_file,
        tenant,
        heap_rate,
        upload_interval,
        fleet,
    })))
}

fn take_value(parser: &mut lexopt::Parser, flag: &str) -> Result<String, CliError> {
    let v = parser
        .value()
        .map_err(|_| CliError(format!("-{flag} needs a value")))?;
    v.into_string()
        .map_err(|_| CliError(format!("-{flag}: value is not valid UTF-8")))
}

/// `user:pass` with both parts non-empty (the password may contain `:`).
pub fn split_basic_auth(v: &str) -> Result<(String, String), String> {
    match v.split_once(':') {
        Some((u, p)) if !u.is_empty() && !p.is_empty() => Ok((u.to_string(), p.to_string())),
        _ => Err("expected USER:PASS with both parts".to_string()),
    }
}

/// `-listen`'s value as the address to bind. As in Go, an empty host (`:8080`) means every interface,
/// which here is `0.0.0.0` (what `-port` binds).
fn check_listen(v: &str) -> Result<String, CliError> {
    if v.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(v.to_string());
    }
    match v.rsplit_once(':') {
        Some(("", port)) if port.parse::<u16>().is_ok() => Ok(format!("0.0.0.0:{port}")),
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(v.to_string()),
        _ => refuse(format!(
            "-listen {v:?}: expected HOST:PORT such as 127.0.0.1:8080 (or :8080 for every interface)"
        )),
    }
}

/// The binary's entry point: parses, dispatches, and returns the exit status.
pub fn main() -> i32 {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mode = match parse(argv) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("nl6: {e}");
            return 2;
        }
    };
    match mode {
        Mode::Help => {
            print!("{}", help_text());
            0
        }
        Mode::Version => {
            println!("{}", version_line());
            0
        }
        Mode::Collect(args) => crate::collect::main(args),
        Mode::Report(args) => crate::report::main(args),
        Mode::Serve(args) => run::serve(*args),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
