//! Good manners with SIGPROF: a program that installed its own SIGPROF handler first gets a clear refusal
//! naming that handler (address and symbol), its handler stays in place, and nothing is re-taken behind
//! its back; with `SignalOptions::take_foreign(true)` the engine takes the signal and profiles.
//!
//! One process-wide disposition, so one test, in steps (its own test binary, so no other test of the
//! engine installs handlers in this process first).
mod support;

use nl6_profile::cpu::{self, CpuError};
use nl6_profile::{set_signal_options, SignalError, SignalOptions};
use std::hint::black_box;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static THEIRS: AtomicU64 = AtomicU64::new(0);

/// The embedding program's own SIGPROF handler.
extern "C" fn their_sigprof_handler(_sig: c_int) {
    THEIRS.fetch_add(1, Ordering::Relaxed);
}

fn install_theirs() {
    // SAFETY: a zeroed sigaction with a plain handler; sigaction copies it.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = their_sigprof_handler as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()),
            0
        );
    }
}

/// The SIGPROF handler installed now, read from the kernel.
fn installed_now() -> usize {
    // SAFETY: querying into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(
            libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old),
            0
        );
        old.sa_sigaction
    }
}

fn assert_refused(err: CpuError, when: &str) {
    let theirs = their_sigprof_handler as *const () as usize as u64;
    match &err {
        CpuError::Signal(SignalError::Foreign {
            signal,
            handler,
            symbol,
        }) => {
            assert_eq!(*signal, libc::SIGPROF, "{when}: {err}");
            assert_eq!(*handler, theirs, "{when}: the handler's address: {err}");
            let symbol = symbol.as_deref().unwrap_or("");
            assert!(
                symbol.ends_with("their_sigprof_handler"),
                "{when}: the owner's symbol: {err}"
            );
        }
        other => panic!("{when}: not a foreign-handler refusal: {other:?}"),
    }
    let text = err.to_string();
    for part in ["SIGPROF", "their_sigprof_handler", "take_foreign(true)"] {
        assert!(text.contains(part), "{when}: {part} missing from: {text}");
    }
    assert_eq!(
        installed_now(),
        their_sigprof_handler as *const () as usize,
        "{when}: their handler must stay installed"
    );
}

#[inline(never)]
fn spin_for(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

#[test]
fn a_foreign_sigprof_handler_is_refused_by_name_until_the_caller_says_take_it() {
    install_theirs();
    assert_refused(cpu::start(100).expect_err("refused"), "first start");
    let whole = nl6_profile::install_signal_handlers().expect_err("refused as well");
    assert!(matches!(whole, SignalError::Foreign { .. }), "{whole}");
    assert_refused(cpu::start(100).expect_err("refused"), "second start");

    // Told to take it: the engine profiles, and their handler no longer receives SIGPROF.
    set_signal_options(&SignalOptions::default().take_foreign(true)).unwrap();
    let before = THEIRS.load(Ordering::Relaxed);
    let session = cpu::start(250).expect("taken");
    assert!(cpu::handler_installed());
    let cpu_before = support::thread_cpu();
    black_box(spin_for(Duration::from_millis(400)));
    let used = support::thread_cpu() - cpu_before;
    let profile = session.stop();
    let sampled = profile.cpu_time();
    // Against the kernel's count of this thread's CPU (other threads barely run): within a third.
    assert!(
        sampled.as_secs_f64() > used.as_secs_f64() * 0.66,
        "sampled {sampled:?} of {used:?} on the spinning thread"
    );
    assert_eq!(
        THEIRS.load(Ordering::Relaxed),
        before,
        "signals went to the old handler"
    );

    // The owner takes SIGPROF back; with take_foreign off again the next start refuses instead of
    // silently re-taking it.
    set_signal_options(&SignalOptions::default()).unwrap();
    install_theirs();
    assert_refused(
        cpu::start(100).expect_err("refused"),
        "after they took it back",
    );
}
