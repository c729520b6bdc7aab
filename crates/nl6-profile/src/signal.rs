//! Signal-handler installation for the samplers, and the contract every handler here keeps.
//!
//! Two signals are ours: `SIGPROF` (the CPU sampler, sent by per-thread CPU-time timers) and
//! [`stacks_signal`] (the all-thread stack capture, sent with `tgkill`; 38 unless
//! [`SignalOptions::capture_signal`] chooses another realtime signal). Each handler is installed once per
//! process, when it is first needed, and **stays installed for the life of the process**: after a profile
//! stops, a SIGPROF still pending in some thread is delivered to our handler, which sees no active session
//! and returns. The default action of SIGPROF terminates the process (pyroscope-rs#399), so we never
//! restore it. Serve mode installs both at startup ([`super::install_signal_handlers`]), so a stray one
//! sent before the first profile is ignored as well.
//!
//! # Good manners
//! A signal whose disposition is the default or "ignore" is free and taken. A handler of another owner
//! (another profiler, the embedding program's own) is never replaced silently: [`install`] refuses with
//! [`SignalError::Foreign`] (its address, and its symbol once a caller above the symbol tables names it)
//! unless [`SignalOptions::take_foreign`] says to take it. The check runs at every start against the
//! live disposition, so a handler installed after ours (replacing it) is refused at the next start as
//! well, never re-taken behind its owner's back; our own handler found installed costs one `sigaction`
//! query and nothing more. Options live in `signal/options.rs`.
//!
//! # The handler contract
//! A handler may touch only: atomics, slots preallocated before the signal can arrive (statics), the
//! `const`-initialised, destructor-free thread-locals (the subsystem label, the cached stack bounds), the
//! interrupted `ucontext`, memory inside the interrupted thread's stack bounds `[RSP, high)` once `RSP` is
//! checked against both bounds (frame records, and the stack slots a CFI rule names), the unwinder's
//! published tables (code ranges and `pc → rule` rows, in anonymous mappings, read after an Acquire load;
//! no code byte is read), and exactly these libc items: [`HANDLER_LIBC`] — `__errno_location`
//! (save/restore `errno`), `syscall(SYS_gettid)`, and the `ucontext`/`siginfo` types and register indices.
//! No other libc function: not `pthread_getattr_np` (a lock and /proc on glibc, an `mremap` probe loop on
//! musl), not `malloc`, not stdio. Stack bounds are learnt outside handlers (see `unwind`).
//! `handler_code_calls_only_the_listed_libc_items` enforces the list: it follows the handlers' call graph
//! through the sources of the profiling modules and fails on any other `libc::` item, and on allocation,
//! locking or formatting tokens.
//! It must never: allocate or free, take a lock (a normal path could hold it), panic (no unchecked
//! indexing: `get` and wrapping arithmetic only), initialise anything lazily, format, or wait for another
//! thread. A full buffer drops the sample and counts it rather than waits.
//! Every handler saves `errno` on entry and restores it on exit ([`ErrnoGuard`]), since the interrupted
//! code may be between a failing call and its read of `errno`.
//!
//! # Flags
//! `SA_SIGINFO` (we need the `ucontext` and, for timers, `si_overrun`), `SA_RESTART` (most interrupted
//! syscalls restart; the ones signal(7) lists as never restarted — socket calls with timeouts, `poll`,
//! `nanosleep` — return `EINTR`, which every blocking loop in nl6 retries), and `SA_ONSTACK` (a thread that
//! set up an alternate signal stack, as every Rust-spawned thread does, runs our handler there: sampling a
//! thread that is close to its guard page cannot overflow it; the unwinder walks the interrupted context,
//! not the handler's stack, so results are the same). `sa_mask` blocks both of our signals while either
//! handler runs, so handlers never nest on one thread and never interleave writes into one slot.
//!
//! Which realtime signal by default: glibc reserves 32–33 and musl 32–34 for internal use (cancellation,
//! timers, `setxid` broadcast); `SIGRTMIN()` is the first one free (34 on glibc, 35 on musl). We take the
//! fixed number 38 on both builds: free under either libc, clear of the low realtime numbers
//! other libraries tend to pick first, and the number Debian's tools mean by `RTMIN+4` (`kill -RTMIN+4`
//! counts from glibc's 34). `SIGRTMIN() + 4` would be 39 on the static musl build, so a `kill -RTMIN+4`
//! from a shell would hit a signal nobody handles there and kill the process.
mod altstack;
mod options;

pub(crate) use altstack::{install_alt_stack, AltStack};

pub(crate) use options::signal_name;
pub use options::{set_signal_options, signal_options, SignalError, SignalOptions};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::Mutex;

/// The only `libc` items code reachable from a signal handler may name (functions, types, constants).
/// Read by the contract test only; the list is the written contract.
#[allow(dead_code)]
pub(crate) const HANDLER_LIBC: &[&str] = &[
    "__errno_location",
    "syscall",
    "SYS_gettid",
    "c_int",
    "c_void",
    "siginfo_t",
    "ucontext_t",
    "REG_RIP",
    "REG_RBP",
    "REG_RSP",
];

/// The CPU sampler's signal.
pub(crate) const CPU_SIGNAL: c_int = libc::SIGPROF;

/// The all-thread stack capture's signal in force ([`SignalOptions::capture_signal`], 38 by default).
pub(crate) fn stacks_signal() -> c_int {
    options::capture_signal()
}

/// An `SA_SIGINFO` handler.
pub(crate) type Handler = unsafe extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

/// Serialises installs (outside handlers only).
static INSTALLING: Mutex<()> = Mutex::new(());

/// Who holds a signal now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// The default action or "ignore": free to take.
    Free,
    /// A handler at this address (one of ours or another owner's).
    Handler(u64),
}

impl Disposition {
    /// Another owner's handler: installed, and not `ours`.
    fn foreign(self, ours: Handler) -> Option<u64> {
        match self {
            Disposition::Handler(at) if at != ours as usize as u64 => Some(at),
            _ => None,
        }
    }
}

/// The live disposition of `signo`.
pub(crate) fn disposition(signo: c_int) -> Result<Disposition, SignalError> {
    // SAFETY: querying the current action into a zeroed struct we own.
    let at = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signo, std::ptr::null(), &mut old) != 0 {
            return Err(os_error(signo));
        }
        old.sa_sigaction
    };
    Ok(match at {
        libc::SIG_DFL | libc::SIG_IGN => Disposition::Free,
        at => Disposition::Handler(at as u64),
    })
}

fn os_error(signo: c_int) -> SignalError {
    SignalError::Os {
        signal: signo,
        errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
    }
}

/// [`SignalError::Unsupported`] off the supported platforms, before any `sigaction`.
pub(crate) fn supported() -> Result<(), SignalError> {
    if SUPPORTED {
        Ok(())
    } else {
        Err(SignalError::Unsupported)
    }
}

/// Installs `handler` for `signo` unless it is the installed handler already, and leaves it installed.
/// A free signal (default or ignored, as another profiler leaves SIGPROF when it stops) is taken; one
/// another owner's handler holds is refused with [`SignalError::Foreign`] unless
/// [`SignalOptions::take_foreign`] allows it. The error's symbol is left for the caller to fill in
/// ([`SignalError::named`]; this module sits below the symbol tables).
pub(crate) fn install(signo: c_int, handler: Handler) -> Result<(), SignalError> {
    supported()?;
    let _serial = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let now = disposition(signo)?;
    if now == Disposition::Handler(handler as usize as u64) {
        return Ok(());
    }
    if let Some(at) = now.foreign(handler) {
        if !options::take_foreign() {
            return Err(SignalError::Foreign {
                signal: signo,
                handler: at,
                symbol: None,
            });
        }
    }
    options::mark_installed();
    // SAFETY: an all-zero sigaction is a valid value to fill in; sigemptyset/sigaddset only write the
    // mask we own, and sigaction copies the struct.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaddset(&mut action.sa_mask, CPU_SIGNAL);
        libc::sigaddset(&mut action.sa_mask, stacks_signal());
        if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
            return Err(os_error(signo));
        }
    }
    Ok(())
}

/// True when our handler is the one installed for `signo` right now (tests and diagnostics).
pub(crate) fn is_ours(signo: c_int, handler: Handler) -> bool {
    disposition(signo).is_ok_and(|d| d == Disposition::Handler(handler as usize as u64))
}

/// Saves `errno` when created and restores it when dropped (first and last thing in every handler).
pub(crate) struct ErrnoGuard(c_int);

impl ErrnoGuard {
    #[inline(always)]
    pub(crate) fn save() -> ErrnoGuard {
        #[cfg(target_os = "linux")]
        // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
        let saved = unsafe { *libc::__errno_location() };
        #[cfg(not(target_os = "linux"))]
        let saved = 0;
        ErrnoGuard(saved)
    }
}

impl Drop for ErrnoGuard {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: as in `save`.
        unsafe {
            *libc::__errno_location() = self.0
        }
    }
}

/// True where the samplers run: Linux on x86_64 or aarch64 (glibc or musl). Elsewhere the crate compiles
/// and every entry point answers [`unsupported`].
pub(crate) const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// What every entry point says on a platform the samplers do not support.
pub(crate) fn unsupported() -> String {
    format!(
        "unsupported platform: nl6-profile samples Linux on x86_64 or aarch64 only (this build: {} {})",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The libc's free realtime signals, `SIGRTMIN()..=SIGRTMAX()` (empty off Linux).
pub(crate) fn realtime_range() -> (c_int, c_int) {
    #[cfg(target_os = "linux")]
    {
        (libc::SIGRTMIN(), libc::SIGRTMAX())
    }
    #[cfg(not(target_os = "linux"))]
    {
        (1, 0)
    }
}

/// The calling thread's kernel thread id. Async-signal-safe (one syscall). 0 off Linux.
#[inline]
pub(crate) fn gettid() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) as i32 };
    #[cfg(not(target_os = "linux"))]
    let tid = 0;
    tid
}

/// The fields of a timer's `siginfo_t` we read (the kernel's `_timer` layout on 64-bit Linux: three ints,
/// padding to 16 bytes, then timer id and overrun count).
#[repr(C)]
struct TimerSiginfo {
    signo: c_int,
    errno: c_int,
    code: c_int,
    _pad: c_int,
    timer_id: c_int,
    overrun: c_int,
}

/// `si_code` of a signal sent by a POSIX timer.
pub(crate) const SI_TIMER: c_int = -2;

/// For a timer signal: how many extra periods elapsed before this signal was delivered (`si_overrun`),
/// else 0.
///
/// # Safety
/// `info` must be the `siginfo_t` the kernel passed to an `SA_SIGINFO` handler (or null).
#[inline]
pub(crate) unsafe fn timer_overrun(info: *const libc::siginfo_t) -> u32 {
    if info.is_null() {
        return 0;
    }
    // SAFETY: siginfo_t is 128 bytes, larger than TimerSiginfo; the caller passes the kernel's struct.
    let t = unsafe { &*(info as *const TimerSiginfo) };
    if t.code == SI_TIMER && t.overrun > 0 {
        t.overrun as u32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_siginfo_layout_matches_libc() {
        // The overrun sits at byte 20 of the kernel's siginfo on 64-bit: a wrong layout would read garbage.
        assert_eq!(std::mem::offset_of!(TimerSiginfo, overrun), 20);
        assert!(std::mem::size_of::<libc::siginfo_t>() >= std::mem::size_of::<TimerSiginfo>());
        // SAFETY: zeroed siginfo_t is valid; we write through a byte view.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_signo = libc::SIGPROF;
        info.si_code = SI_TIMER;
        // SAFETY: offset 20 is inside the 128-byte struct.
        unsafe { *((&mut info as *mut libc::siginfo_t as *mut u8).add(20) as *mut c_int) = 3 };
        // SAFETY: a valid siginfo_t.
        assert_eq!(unsafe { timer_overrun(&info) }, 3);
        info.si_code = 0;
        // SAFETY: a valid siginfo_t.
        assert_eq!(unsafe { timer_overrun(&info) }, 0);
    }

    #[test]
    fn stacks_signal_is_a_free_realtime_signal_of_one_number_on_both_libcs() {
        let s = options::DEFAULT_CAPTURE_SIGNAL;
        // musl's first free realtime signal is 35, glibc's 34: 38 is free under both.
        assert!(
            s >= libc::SIGRTMIN() && s >= 35 && s <= libc::SIGRTMAX(),
            "{s}"
        );
        assert_eq!(s, 38, "the number Debian's `kill -RTMIN+4` sends");
    }

    /// Sources of every module a handler's code lives in (test-only, for the contract check).
    const HANDLER_SOURCES: &[(&str, &str)] = &[
        ("signal.rs", include_str!("signal.rs")),
        ("cpu/mod.rs", include_str!("cpu/mod.rs")),
        ("cpu/ring.rs", include_str!("cpu/ring.rs")),
        ("threads.rs", include_str!("threads.rs")),
        ("labels.rs", include_str!("labels.rs")),
        ("unwind.rs", include_str!("unwind.rs")),
        ("unwind/arch.rs", include_str!("unwind/arch.rs")),
        ("unwind/bounds.rs", include_str!("unwind/bounds.rs")),
        ("unwind/code.rs", include_str!("unwind/code.rs")),
        ("unwind/step.rs", include_str!("unwind/step.rs")),
        ("unwind/rules.rs", include_str!("unwind/rules.rs")),
        ("unwind/stop.rs", include_str!("unwind/stop.rs")),
        ("unwind/foreign.rs", include_str!("unwind/foreign.rs")),
    ];

    /// `name → bodies` of every non-test `fn` in `src` (brace matching from the first `{`).
    fn functions(src: &str) -> Vec<(String, String)> {
        let src = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
        let mut out = Vec::new();
        let mut rest = src;
        while let Some(at) = rest.find("fn ") {
            let after = &rest[at + 3..];
            let preceded_ok = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = after;
            let (Some(open), true) = (after.find('{'), preceded_ok && !name.is_empty()) else {
                continue;
            };
            if after[..open].contains(';') {
                continue; // a declaration without a body
            }
            let mut depth = 0;
            let body_end = after[open..]
                .char_indices()
                .find_map(|(i, c)| {
                    depth += i32::from(c == '{') - i32::from(c == '}');
                    (depth == 0).then_some(open + i + 1)
                })
                .unwrap_or(after.len());
            out.push((name, after[open..body_end].to_string()));
        }
        out
    }

    /// Identifiers immediately followed by `(` or `::<` (calls and method calls).
    fn called(body: &str) -> Vec<String> {
        let b = body.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_alphabetic() || b[i] == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if body[i..].starts_with('(') || body[i..].starts_with("::<") {
                    out.push(body[start..i].to_string());
                }
            } else {
                i += 1;
            }
        }
        out
    }

    /// The handlers' call graph, followed through the profiling sources: every reachable function may
    /// name only [`HANDLER_LIBC`] items and must not allocate, lock or format.
    #[test]
    fn handler_code_calls_only_the_listed_libc_items() {
        let defs: Vec<(String, String, &str)> = HANDLER_SOURCES
            .iter()
            .flat_map(|(file, src)| functions(src).into_iter().map(move |(n, b)| (n, b, *file)))
            .collect();
        // Names shared with std methods the handlers call on std types (not our functions).
        let std_names = [
            "new", "get", "with", "from", "map", "load", "store", "set", "min", "max",
        ];
        let mut reached: Vec<&str> = vec!["on_sigprof", "on_stacks_signal"];
        let mut i = 0;
        while let Some(name) = reached.get(i).copied() {
            i += 1;
            for (_, body, _) in defs.iter().filter(|(n, _, _)| n == name) {
                for callee in called(body) {
                    if std_names.contains(&callee.as_str()) || reached.contains(&callee.as_str()) {
                        continue;
                    }
                    if let Some((n, _, _)) = defs.iter().find(|(n, _, _)| *n == callee) {
                        reached.push(n);
                    }
                }
            }
        }
        for must in [
            "unwind_interrupted",
            "bounds_in_handler",
            "walk_rules",
            "lookup",
            "foreign_bounds",
            "regs_from_ucontext",
            "load_word",
            "thread_pointer",
        ] {
            assert!(
                reached.contains(&must),
                "the call graph misses {must}: {reached:?}"
            );
        }
        let forbidden = [
            "pthread_",
            "Box::",
            "Vec::",
            "vec!",
            "format!",
            ".lock()",
            "String",
            "to_vec",
            "std::fs",
            "to_string",
            "println!",
            "eprintln!",
        ];
        let mut broken = Vec::new();
        for (name, body, file) in defs
            .iter()
            .filter(|(n, _, _)| reached.contains(&n.as_str()))
        {
            for (at, _) in body.match_indices("libc::") {
                let item: String = body[at + 6..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !HANDLER_LIBC.contains(&item.as_str()) {
                    broken.push(format!("{file}: {name} names libc::{item}"));
                }
            }
            for f in forbidden.iter().filter(|f| body.contains(*f)) {
                broken.push(format!("{file}: {name} contains `{f}`"));
            }
        }
        assert!(
            broken.is_empty(),
            "handler contract broken:\n{}",
            broken.join("\n")
        );
    }
}
