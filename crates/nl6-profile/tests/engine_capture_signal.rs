//! The stack capture's signal is configurable and validated: not a realtime signal, or one another owner's
//! handler holds, is refused with a clear error; a chosen free one carries every capture; it is fixed once
//! installed; and a foreign handler that replaces it later makes the dump say why stacks are missing.
//!
//! One process-wide option, so one test, in steps, in its own test binary.
use nl6_profile::threads::{self, Missing};
use nl6_profile::{set_signal_options, signal_options, SignalError, SignalOptions};
use std::os::raw::c_int;
use std::sync::mpsc;
use std::time::Duration;

extern "C" fn theirs(_sig: c_int) {}

fn install_theirs(signo: c_int) {
    // SAFETY: a zeroed sigaction with a plain handler; sigaction copies it.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = theirs as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(signo, &action, std::ptr::null_mut()), 0);
    }
}

fn handler_of(signo: c_int) -> usize {
    // SAFETY: querying into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(signo, std::ptr::null(), &mut old), 0);
        old.sa_sigaction
    }
}

#[test]
fn the_capture_signal_is_chosen_validated_and_fixed_once_installed() {
    let (rtmin, rtmax) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let (taken, chosen, later) = (rtmin + 7, rtmin + 6, rtmin + 8);
    assert_eq!(signal_options().capture_signal, 38, "the default");

    let err =
        set_signal_options(&SignalOptions::default().capture_signal(libc::SIGUSR1)).unwrap_err();
    assert!(matches!(err, SignalError::NotRealtime { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("{rtmin}..={rtmax}")),
        "{err}"
    );

    install_theirs(taken);
    let err = set_signal_options(&SignalOptions::default().capture_signal(taken)).unwrap_err();
    match &err {
        SignalError::Foreign {
            signal, handler, ..
        } => {
            assert_eq!(
                (*signal, *handler),
                (taken, theirs as *const () as usize as u64),
                "{err}"
            );
        }
        other => panic!("not a foreign refusal: {other:?}"),
    }
    assert_eq!(
        signal_options().capture_signal,
        38,
        "a refusal changes nothing"
    );

    set_signal_options(&SignalOptions::default().capture_signal(chosen)).unwrap();
    // A parked thread's stack comes back through the chosen signal; 38 stays untouched.
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let parked = std::thread::spawn(move || park_rx.recv());
    std::thread::sleep(Duration::from_millis(50));
    let stacks = threads::capture_all(Duration::from_secs(2));
    let with_stack = stacks.iter().filter(|t| !t.stack.is_empty()).count();
    assert!(with_stack >= 2, "{stacks:?}");
    assert_ne!(
        handler_of(chosen),
        0,
        "the capture handler is on the chosen signal"
    );
    assert_eq!(handler_of(38), 0, "38 stays the default");

    let err = set_signal_options(&SignalOptions::default().capture_signal(later)).unwrap_err();
    assert!(
        matches!(err, SignalError::TooLate { current, asked } if current == chosen && asked == later),
        "{err}"
    );

    // Another owner replaces the capture handler: the dump lists every thread and says why.
    install_theirs(chosen);
    let stacks = threads::capture_all(Duration::from_millis(500));
    let foreign: Vec<_> = stacks
        .iter()
        .filter(|t| matches!(t.missing, Some(Missing::Foreign { signal, .. }) if signal == chosen))
        .collect();
    assert!(!foreign.is_empty(), "{stacks:?}");
    let why = foreign[0].missing.unwrap().to_string();
    assert!(why.contains("another owner's handler"), "{why}");
    assert_eq!(
        handler_of(chosen),
        theirs as *const () as usize,
        "not re-taken"
    );
    park_tx.send(()).unwrap();
    parked.join().unwrap().unwrap();
}
