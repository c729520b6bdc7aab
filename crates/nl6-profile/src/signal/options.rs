//! Which signals the engine may take, and the typed refusal when it may not.
//!
//! What it provides: [`SignalOptions`] (take a handler another owner installed, or refuse; which realtime
//! signal the all-thread stack capture uses), set once for the process with [`set_signal_options`] before
//! the first profile; [`SignalError`], the refusal naming the signal and the handler that owns it; and the
//! crate-private readers the installer consults.
//!
//! A signal is *free* when its disposition is the default or "ignore"; it is *foreign* when a handler
//! that is not one of the engine's own is installed. The engine's own handlers are never foreign, so a
//! second start, or `install_signal_handlers` then a profile, finds them and installs nothing.
//!
//! Never: installs a handler (the parent module does); runs in a signal handler.
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

/// The stack capture's signal unless configured otherwise: 38, free under glibc (first free 34) and musl
/// (first free 35), and what Debian's `kill -RTMIN+4` sends (see the parent module).
pub(crate) const DEFAULT_CAPTURE_SIGNAL: c_int = 38;

/// How the engine treats the process's profiling signals. Set with [`set_signal_options`].
///
/// ```
/// let options = nl6_profile::SignalOptions::default().capture_signal(40);
/// nl6_profile::set_signal_options(&options).expect("40 is a free realtime signal");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignalOptions {
    /// Replace a SIGPROF or capture-signal handler another owner installed (default: refuse with
    /// [`SignalError::Foreign`]). The replaced handler no longer receives that signal.
    pub take_foreign: bool,
    /// The realtime signal the all-thread stack capture sends with `tgkill` (default 38). It must lie in
    /// `SIGRTMIN()..=SIGRTMAX()` of the libc the program is built with.
    pub capture_signal: c_int,
}

impl Default for SignalOptions {
    fn default() -> SignalOptions {
        SignalOptions {
            take_foreign: false,
            capture_signal: DEFAULT_CAPTURE_SIGNAL,
        }
    }
}

impl SignalOptions {
    /// These options with `take_foreign` set to `take`.
    pub fn take_foreign(mut self, take: bool) -> SignalOptions {
        self.take_foreign = take;
        self
    }

    /// These options with the stack capture on `signo`.
    pub fn capture_signal(mut self, signo: c_int) -> SignalOptions {
        self.capture_signal = signo;
        self
    }
}

/// Why the engine did not take a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalError {
    /// Another owner's handler is installed for `signal`; the engine leaves it in place.
    Foreign {
        /// The signal number.
        signal: c_int,
        /// The installed handler's address.
        handler: u64,
        /// The handler's symbol, when the process's symbol tables name it.
        symbol: Option<String>,
    },
    /// The asked capture signal is not one of the libc's free realtime signals.
    NotRealtime {
        /// The signal asked for.
        signal: c_int,
        /// `SIGRTMIN()` of this build's libc.
        min: c_int,
        /// `SIGRTMAX()`.
        max: c_int,
    },
    /// The capture signal cannot change: the engine's handlers are installed already.
    TooLate {
        /// The capture signal in use.
        current: c_int,
        /// The one asked for.
        asked: c_int,
    },
    /// Not Linux on x86_64 or aarch64: the engine takes no signal here.
    Unsupported,
    /// `sigaction` failed.
    Os {
        /// The signal number.
        signal: c_int,
        /// The errno `sigaction` set.
        errno: i32,
    },
}

/// `SIGPROF`, `SIGRTMIN+4`-style name of a signal, for messages.
pub(crate) fn signal_name(signo: c_int) -> String {
    if signo == libc::SIGPROF {
        "SIGPROF".to_string()
    } else if (super::realtime_range().0..=super::realtime_range().1).contains(&signo) {
        format!(
            "signal {signo} (SIGRTMIN+{})",
            signo - super::realtime_range().0
        )
    } else {
        format!("signal {signo}")
    }
}

impl std::fmt::Display for SignalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignalError::Foreign {
                signal,
                handler,
                symbol,
            } => {
                let owner = match symbol {
                    Some(s) => format!("{handler:#x} {s}"),
                    None => format!("{handler:#x}"),
                };
                write!(
                    f,
                    "{}: another handler is installed (at {owner}): the profiler does not replace it; stop its owner first, or allow it with SignalOptions::take_foreign(true)",
                    signal_name(*signal)
                )
            }
            SignalError::NotRealtime { signal, min, max } => write!(
                f,
                "capture signal {signal}: not a free realtime signal of this libc: choose one in {min}..={max}"
            ),
            SignalError::TooLate { current, asked } => write!(
                f,
                "capture signal {asked}: the profiler's handlers are installed already, with capture signal {current}: set the signal options before install_signal_handlers and the first profile"
            ),
            SignalError::Unsupported => f.write_str(&super::unsupported()),
            SignalError::Os { signal, errno } => write!(
                f,
                "sigaction({}): {}",
                signal_name(*signal),
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

impl std::error::Error for SignalError {}

impl SignalError {
    /// The same error with the foreign handler's symbol filled in by `name` (the callers above the
    /// symbol tables pass `symbols::symbolize`).
    pub(crate) fn named(self, name: impl Fn(u64) -> Option<String>) -> SignalError {
        match self {
            SignalError::Foreign {
                signal,
                handler,
                symbol: None,
            } => SignalError::Foreign {
                signal,
                handler,
                symbol: name(handler),
            },
            other => other,
        }
    }
}

static TAKE_FOREIGN: AtomicBool = AtomicBool::new(false);
static CAPTURE_SIGNAL: AtomicI32 = AtomicI32::new(DEFAULT_CAPTURE_SIGNAL);
/// Set once any of the engine's handlers is installed: the capture signal is fixed from then on (the
/// handlers' masks name it).
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Serialises [`set_signal_options`].
static SETTING: Mutex<()> = Mutex::new(());

/// Sets the process's signal options. Call it before [`crate::install_signal_handlers`] and the first
/// profile to choose the capture signal; `take_foreign` may change at any time. Refuses a capture signal
/// outside the libc's realtime range, one another owner's handler holds (unless `take_foreign`), and a
/// new capture signal once the engine's handlers are installed.
pub fn set_signal_options(options: &SignalOptions) -> Result<(), SignalError> {
    let _serial = SETTING.lock().unwrap_or_else(|e| e.into_inner());
    let asked = options.capture_signal;
    super::supported()?;
    let (min, max) = super::realtime_range();
    if !(min..=max).contains(&asked) {
        return Err(SignalError::NotRealtime {
            signal: asked,
            min,
            max,
        });
    }
    let current = CAPTURE_SIGNAL.load(Ordering::Acquire);
    if asked != current && INSTALLED.load(Ordering::Acquire) {
        return Err(SignalError::TooLate { current, asked });
    }
    if asked != current && !options.take_foreign {
        if let super::Disposition::Handler(handler) = super::disposition(asked)? {
            return Err(SignalError::Foreign {
                signal: asked,
                handler,
                symbol: None,
            });
        }
    }
    TAKE_FOREIGN.store(options.take_foreign, Ordering::Release);
    CAPTURE_SIGNAL.store(asked, Ordering::Release);
    Ok(())
}

/// The options in force.
pub fn signal_options() -> SignalOptions {
    SignalOptions {
        take_foreign: take_foreign(),
        capture_signal: capture_signal(),
    }
}

/// True when the caller allowed replacing another owner's handler.
pub(crate) fn take_foreign() -> bool {
    TAKE_FOREIGN.load(Ordering::Acquire)
}

/// The capture signal in force.
pub(crate) fn capture_signal() -> c_int {
    CAPTURE_SIGNAL.load(Ordering::Acquire)
}

/// Called by the installer before its first `sigaction`: the capture signal is fixed from now on.
pub(crate) fn mark_installed() {
    INSTALLED.store(true, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_outside_the_realtime_range_is_refused_with_the_range() {
        for bad in [libc::SIGUSR1, libc::SIGRTMIN() - 1, libc::SIGRTMAX() + 1, 0] {
            let err =
                set_signal_options(&SignalOptions::default().capture_signal(bad)).unwrap_err();
            assert!(matches!(err, SignalError::NotRealtime { signal, .. } if signal == bad));
            let text = err.to_string();
            assert!(
                text.contains(&format!("{}..={}", libc::SIGRTMIN(), libc::SIGRTMAX())),
                "{text}"
            );
        }
        assert_eq!(capture_signal(), DEFAULT_CAPTURE_SIGNAL, "unchanged");
    }

    #[test]
    fn the_refusal_names_the_signal_the_owner_and_the_remedy() {
        let err = SignalError::Foreign {
            signal: libc::SIGPROF,
            handler: 0x1234,
            symbol: None,
        }
        .named(|a| (a == 0x1234).then(|| "their::on_prof".to_string()));
        let text = err.to_string();
        assert!(text.starts_with("SIGPROF: another handler"), "{text}");
        assert!(text.contains("0x1234 their::on_prof"), "{text}");
        assert!(text.contains("take_foreign(true)"), "{text}");
    }
}
