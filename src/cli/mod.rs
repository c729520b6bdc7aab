//! The `nl6` command line: the flag tables ([`FLAGS`] and the lab's, from which `--help` is generated), parsing in two
//! phases (argv → validated [`Args`] without I/O in [`parse`]; [`Args`] → [`config::Config`], which reads
//! the credentials file), the [`Mode`] enum that subcommands are variants of, and [`main`].
//!
//! The flags are [`crate::goflag::Flag`] rows read by the one loop [`crate::goflag::parse`], which takes
//! Go-style `-profiling-pyroscope URL` and `--profiling-pyroscope=URL` alike. Every refusal is one line
//! on stderr starting `nl6: ` and exit status 2.
#![deny(unsafe_code)]

pub mod config;
mod malloc;
mod run;
pub mod signals;

use crate::api::browser::{self, AllowedHost, HostError, OriginError};
use crate::gate::address::{self, AddressError};
use crate::goflag::{BoolError, Bound, Flag, FlagError, Positional};
use crate::timefmt::parse_positive_go_duration as parse_go_duration;
use crate::timefmt::DurationError;
use std::ffi::OsString;
use std::time::Duration;

/// Why a serve-mode flag's value was refused (the flag parser puts the flag's name before it).
#[derive(Debug)]
pub enum ValueError {
    /// Not a port number (the value as given).
    Port(String),
    /// Not `HOST:PORT` (as given).
    Listen(String),
    Hosts(HostError),
    Origins(OriginError),
    Address(AddressError),
    BasicAuth(BasicAuthError),
    EmptyTenant,
    /// Not a byte count (as given).
    ByteCount(String),
    Duration(DurationError),
    /// An upload interval under a second (as given).
    UploadInterval(String),
    Bool(BoolError),
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::Port(v) => write!(f, "{v:?} is not a port number (0-65535)"),
            ValueError::Listen(v) => write!(
                f,
                "{v:?} is not HOST:PORT such as 127.0.0.1:8080 (or :8080 for every interface)"
            ),
            ValueError::Hosts(e) => write!(f, "{e}"),
            ValueError::Origins(e) => write!(f, "{e}"),
            ValueError::Address(e) => write!(f, "{e}"),
            ValueError::BasicAuth(e) => write!(f, "{e}"),
            ValueError::EmptyTenant => f.write_str("empty tenant ID"),
            ValueError::ByteCount(v) => write!(f, "{v:?} is not a byte count"),
            ValueError::Duration(e) => write!(f, "{e}"),
            ValueError::UploadInterval(v) => write!(f, "{v} must be at least 1s"),
            ValueError::Bool(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ValueError {}

/// A basic-auth value that is not `USER:PASS` with both parts (never quoted: it holds a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuthError;

impl std::fmt::Display for BasicAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("expected USER:PASS with both parts")
    }
}

impl std::error::Error for BasicAuthError {}

/// Serve mode's own settings as its flags fill them, before the cross-flag checks of [`parse`].
#[derive(Default)]
pub struct ServeFlags {
    port: Option<u16>,
    listen: Option<String>,
    pyroscope: Option<String>,
    basic_auth: Option<(String, String)>,
    basic_auth_file: Option<std::path::PathBuf>,
    tenant: Option<String>,
    heap_rate: Option<usize>,
    upload_interval: Option<Duration>,
    wall: bool,
    allowed_hosts: Vec<AllowedHost>,
    allowed_origins: Vec<String>,
}

/// The default of `-profiling-upload-interval`.
const UPLOAD_INTERVAL: Duration = Duration::from_secs(15);

/// Every flag of `nl6` (serve mode) but the lab fleet's ([`crate::lab::FLAGS`], parsed alongside).
/// `--help` is generated from these tables and the README's flag table is tested against them.
pub const FLAGS: &[Flag<ServeFlags, ValueError>] = &[
    Flag::value("port", "PORT", "8080", "Listen on all interfaces at PORT.", |s, v| {
        s.port = Some(v.parse().map_err(|_| ValueError::Port(v.to_string()))?);
        Ok(())
    }),
    Flag::value(
        "listen",
        "ADDR",
        "",
        "Listen on ADDR (e.g. 127.0.0.1:8080, or :8080 for all interfaces) instead of -port; port 0 picks a free port.",
        |s, v| {
            s.listen = Some(check_listen(v)?);
            Ok(())
        },
    ),
    Flag::value(
        "allowed-hosts",
        "LIST",
        "",
        "Also answer requests whose Host is one of these comma-separated names (NAME or NAME:PORT): a DNS name or a reverse proxy in front. Others get 421 (DNS rebinding).",
        |s, v| {
            s.allowed_hosts = browser::parse_hosts(v).map_err(ValueError::Hosts)?;
            Ok(())
        },
    ),
    Flag::value(
        "allowed-origins",
        "LIST",
        "",
        "Also accept browser requests from these comma-separated origins (https://NAME[:PORT]). Others get 403 (cross-site requests).",
        |s, v| {
            s.allowed_origins = browser::parse_origins(v).map_err(ValueError::Origins)?;
            Ok(())
        },
    ),
    Flag::value(
        "profiling-pyroscope",
        "URL",
        "",
        "Open the profiling gate at start and push to this Pyroscope (http:// or https://, no user:pass@, no query).",
        |s, v| {
            address::validate(v).map_err(ValueError::Address)?;
            s.pyroscope = Some(v.to_string());
            Ok(())
        },
    ),
    Flag::value(
        "profiling-pyroscope-basic-auth",
        "USER:PASS",
        "",
        "Basic auth for -profiling-pyroscope's address only. Visible in the process arguments: prefer the file form.",
        |s, v| {
            s.basic_auth = Some(split_basic_auth(v).map_err(ValueError::BasicAuth)?);
            Ok(())
        },
    ),
    Flag::value(
        "profiling-pyroscope-basic-auth-file",
        "PATH",
        "",
        "Read basic auth (one line USER:PASS) from PATH once at startup, keeping the secret out of argv.",
        |s, v| {
            s.basic_auth_file = Some(v.into());
            Ok(())
        },
    ),
    Flag::value(
        "profiling-pyroscope-tenant",
        "ID",
        "",
        "X-Scope-OrgID sent to -profiling-pyroscope's address only.",
        |s, v| {
            if v.trim().is_empty() {
                return Err(ValueError::EmptyTenant);
            }
            s.tenant = Some(v.to_string());
            Ok(())
        },
    ),
    Flag::value(
        "profiling-heap-rate",
        "BYTES",
        "524288",
        "Heap sampling rate: one sample per BYTES allocated on average (0 turns heap sampling off).",
        |s, v| {
            s.heap_rate = Some(v.parse().map_err(|_| ValueError::ByteCount(v.to_string()))?);
            Ok(())
        },
    ),
    Flag::value(
        "profiling-upload-interval",
        "DURATION",
        "15s",
        "How often the push uploads (Go duration syntax, at least 1s).",
        |s, v| {
            let d = parse_go_duration(v).map_err(ValueError::Duration)?;
            if d < Duration::from_secs(1) {
                return Err(ValueError::UploadInterval(v.to_string()));
            }
            s.upload_interval = Some(d);
            Ok(())
        },
    ),
    Flag::boolean(
        "profiling-wall",
        "false",
        "Also push a wall-clock profile (every thread, running or waiting; fgprof's shape) each interval, as the fgprof series.",
        |s, v| {
            s.wall = crate::goflag::parse_bool(v).map_err(ValueError::Bool)?;
            Ok(())
        },
    ),
    Flag::stop("help", "Print this help and exit (also -h)."),
    Flag::stop("version", "Print the version and git commit and exit."),
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
    /// `-profiling-wall`: pushes also upload a wall-clock window.
    pub wall: bool,
    /// `-allowed-hosts`: names served beside the built-in ones (see [`crate::api::browser`]).
    pub allowed_hosts: Vec<AllowedHost>,
    /// `-allowed-origins`: browser origins accepted beside nl6's own.
    pub allowed_origins: Vec<String>,
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
            .field("wall", &self.wall)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
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
    out.push_str(&crate::goflag::help_rows(FLAGS));
    out.push_str("\nLab fleet flags (simulated devices):\n");
    out.push_str(&crate::goflag::help_rows(crate::lab::FLAGS));
    out.push_str(
        "\nThe profiling gate is closed unless -profiling-pyroscope is given; open it at runtime with\n  \
         curl -X POST localhost:8080/api/v1/profiling -H 'Content-Type: application/json' -d '{\"enabled\":true,\"server_address\":\"\"}'\n\
         See SECURITY.md before exposing the port.\n",
    );
    out
}

/// The subcommands, for "did you mean" on a near miss.
const SUBCOMMANDS: &[&str] = &["collect", "report"];

/// The refusal for a stray word: a mistyped subcommand gets "did you mean".
fn unexpected_word(word: &str) -> String {
    let command_like = !word.starts_with('-');
    match crate::goflag::nearest(word, SUBCOMMANDS.iter().copied()).filter(|_| command_like) {
        Some(cmd) => format!("unknown command {word:?}: did you mean {cmd}? (see nl6 -h)"),
        None => format!("unexpected argument {word:?} (see nl6 -h)"),
    }
}

/// Phase one: argv (without the program name) → [`Mode`]. No I/O and no environment.
pub fn parse(argv: Vec<OsString>) -> Result<Mode, CliError> {
    match argv.first().and_then(|a| a.to_str()) {
        Some("collect") => return Ok(Mode::Collect(argv[1..].to_vec())),
        Some("report") => return Ok(Mode::Report(argv[1..].to_vec())),
        _ => {}
    }
    let mut flags = ServeFlags::default();
    let mut fleet = crate::lab::FleetConfig::default();
    let parsed = crate::goflag::parse(
        &argv,
        &mut [
            &mut Bound(FLAGS, &mut flags),
            &mut Bound(crate::lab::FLAGS, &mut fleet),
        ],
        Positional::Refuse(&unexpected_word),
    )
    .map_err(|e| match e {
        FlagError::Unknown(m) => CliError(format!("{m} (see nl6 -h)")),
        e => CliError(e.to_string()),
    })?;
    match parsed.stopped_at {
        Some("help") => return Ok(Mode::Help),
        Some(_) => return Ok(Mode::Version),
        None => {}
    }
    check_credentials_need_the_address(&flags)?;
    let port = flags.port.unwrap_or(8080);
    Ok(Mode::Serve(Box::new(Args {
        listen: flags.listen.unwrap_or_else(|| format!("0.0.0.0:{port}")),
        pyroscope: flags.pyroscope,
        basic_auth: flags.basic_auth,
        basic_auth_file: flags.basic_auth_file,
        tenant: flags.tenant,
        heap_rate: flags.heap_rate,
        upload_interval: flags.upload_interval.unwrap_or(UPLOAD_INTERVAL),
        wall: flags.wall,
        allowed_hosts: flags.allowed_hosts,
        allowed_origins: flags.allowed_origins,
        fleet,
    })))
}

/// Credentials and the tenant are bound to `-profiling-pyroscope`'s address, so they need it; the two
/// forms of basic auth are exclusive.
fn check_credentials_need_the_address(flags: &ServeFlags) -> Result<(), CliError> {
    if flags.pyroscope.is_none() {
        for (set, flag) in [
            (
                flags.basic_auth.is_some(),
                "-profiling-pyroscope-basic-auth",
            ),
            (
                flags.basic_auth_file.is_some(),
                "-profiling-pyroscope-basic-auth-file",
            ),
            (flags.tenant.is_some(), "-profiling-pyroscope-tenant"),
        ] {
            if set {
                return refuse(format!(
                    "{flag} requires -profiling-pyroscope (credentials are bound to its address)"
                ));
            }
        }
    }
    if flags.basic_auth.is_some() && flags.basic_auth_file.is_some() {
        return refuse("-profiling-pyroscope-basic-auth and -profiling-pyroscope-basic-auth-file are exclusive: give one");
    }
    Ok(())
}

/// `user:pass` with both parts non-empty (the password may contain `:`).
pub fn split_basic_auth(v: &str) -> Result<(String, String), BasicAuthError> {
    match v.split_once(':') {
        Some((u, p)) if !u.is_empty() && !p.is_empty() => Ok((u.to_string(), p.to_string())),
        _ => Err(BasicAuthError),
    }
}

/// `-listen`'s value as the address to bind. As in Go, an empty host (`:8080`) means every interface,
/// which here is `0.0.0.0` (what `-port` binds).
fn check_listen(v: &str) -> Result<String, ValueError> {
    if v.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(v.to_string());
    }
    match v.rsplit_once(':') {
        Some(("", port)) if port.parse::<u16>().is_ok() => Ok(format!("0.0.0.0:{port}")),
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(v.to_string()),
        _ => Err(ValueError::Listen(v.to_string())),
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
        Mode::Collect(args) => collect_with_signals(args),
        Mode::Report(args) => crate::report::main_with(args, &crate::collect::remote::open),
        Mode::Serve(args) => {
            // Before serve mode starts its first thread.
            malloc::tune();
            run::serve(*args)
        }
    }
}

/// `nl6 collect` with SIGTERM, SIGINT and SIGHUP taken by a thread of their own (masked before the
/// collector starts any thread) and handed to the collector's [`crate::collect::stop::Stop`].
fn collect_with_signals(args: Vec<OsString>) -> i32 {
    let stop = crate::collect::stop::Stop::new();
    if signals::block_termination().is_ok() {
        let s = stop.clone();
        let _ = std::thread::Builder::new()
            .name("collect-signals".into())
            .spawn(move || {
                while let Ok(name) = signals::wait_termination() {
                    s.request(name);
                }
            });
    }
    crate::collect::main_until(args, &stop)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
