//! SIGTERM and SIGINT as a value: [`block_termination`] masks them in the calling thread (and so in every
//! thread it spawns afterwards); [`wait_termination`] waits for one with `sigwait`. No handler runs, so
//! shutdown work happens in ordinary code.
//!
//! The only `unsafe` of the CLI: the sigset is a local value owned for each call.
#![allow(unsafe_code)]

use std::io;

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before any other use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset for each call.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
    }
    set
}

/// Blocks SIGTERM and SIGINT in this thread; call before spawning any thread so all inherit the mask.
pub fn block_termination() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Waits for SIGTERM or SIGINT (blocked beforehand) and returns its name.
pub fn wait_termination() -> io::Result<&'static str> {
    let set = termination_set();
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is initialised and `sig` is a valid out-pointer for the call.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        match rc {
            0 if sig == libc::SIGTERM => return Ok("SIGTERM"),
            0 if sig == libc::SIGINT => return Ok("SIGINT"),
            0 => continue,
            libc::EINTR => continue,
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}
