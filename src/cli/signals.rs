//! The process signals of serve mode, as values: [`block_termination`] masks them in the calling thread
//! (and so in every thread it spawns afterwards); [`wait_termination`] waits for them with `sigwait`. No
//! handler runs, so shutdown work happens in ordinary code.
//!
//! - SIGTERM, SIGINT and **SIGHUP** (what a dropped ssh session sends) end nl6 the same way: the gate
//!   closes (the push's bounded flush), then exit 0. An ending signal that nl6 inherited as ignored
//!   (`nohup nl6 …` ignores SIGHUP; a shell's `nl6 &` ignores SIGINT) stays ignored: a blocked signal is
//!   queued even when ignored, so waiting for it would undo the user's choice.
//! - SIGUSR1, SIGUSR2 and SIGALRM are ignored with one log line each: their default action would end the
//!   process at once, with no gate close and no flush.
//! - SIGPROF and the stack-capture signal belong to the profiler (`nl6_profile::install_signal_handlers`); their
//!   handlers are installed at startup, so a stray one is ignored too.
//!
//! One of the CLI's two `unsafe` files (with `malloc`): the sigset is a local value owned for each call.
#![allow(unsafe_code)]

use std::io;

/// Signals that end serve mode, with their names.
const ENDING: [(libc::c_int, &str); 3] = [
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGHUP, "SIGHUP"),
];

/// Signals taken and ignored (logged), with their names.
const IGNORED: [(libc::c_int, &str); 3] = [
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGUSR2, "SIGUSR2"),
    (libc::SIGALRM, "SIGALRM"),
];

/// True when `sig`'s disposition is "ignore" (inherited through exec, e.g. from `nohup`). nl6 installs no
/// handler for the ending signals, so this reads the same before and after [`block_termination`].
fn ignored_from_birth(sig: libc::c_int) -> bool {
    // SAFETY: sigaction is plain data; a null new action only reads the current one into `old`.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a valid, writable sigaction; a null `act` changes nothing.
    let rc = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
    rc == 0 && old.sa_sigaction == libc::SIG_IGN
}

fn waited_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before any other use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset for each call.
    unsafe {
        libc::sigemptyset(&mut set);
        for (sig, _) in ENDING.iter().filter(|(sig, _)| !ignored_from_birth(*sig)) {
            libc::sigaddset(&mut set, *sig);
        }
        for (sig, _) in &IGNORED {
            libc::sigaddset(&mut set, *sig);
        }
    }
    set
}

/// Blocks the ending and ignored signals in this thread; call before spawning any thread so all inherit
/// the mask (a signal blocked everywhere waits for [`wait_termination`] instead of killing the process).
pub fn block_termination() -> io::Result<()> {
    let set = waited_set();
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Waits for SIGTERM, SIGINT or SIGHUP (blocked beforehand) and returns its name; SIGUSR1, SIGUSR2 and
/// SIGALRM arriving meanwhile are logged as ignored.
pub fn wait_termination() -> io::Result<&'static str> {
    let set = waited_set();
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is initialised and `sig` is a valid out-pointer for the call.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        match rc {
            0 => {
                if let Some((_, name)) = ENDING.iter().find(|(s, _)| *s == sig) {
                    return Ok(name);
                }
                if let Some((_, name)) = IGNORED.iter().find(|(s, _)| *s == sig) {
                    eprintln!("nl6: {name} received: ignored (SIGTERM, SIGINT or SIGHUP stop nl6)");
                }
            }
            libc::EINTR => continue,
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}
