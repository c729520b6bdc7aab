//! The `debug=2` thread header's state word: what the kernel reports for a thread of this process
//! (`/proc/self/task/<tid>/stat` and `wchan`), in Go's goroutine wait reasons where one fits.
#![forbid(unsafe_code)]

/// The state the kernel reports for thread `tid` of this process, in Go's words where one fits, and the
/// kernel function it waits in (`wchan`) when it waits. A thread that is gone by now reads as `running`
/// (it answered the capture).
pub(crate) fn thread_state(tid: i32) -> (&'static str, Option<String>) {
    let task = format!("/proc/self/task/{tid}");
    let Ok(stat) = std::fs::read_to_string(format!("{task}/stat")) else {
        return ("running", None);
    };
    let state = state_letter(&stat);
    let wchan = std::fs::read_to_string(format!("{task}/wchan"))
        .ok()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "0");
    let word = go_state_word(state, wchan.as_deref().unwrap_or(""));
    (word, wchan.filter(|_| state != 'R'))
}

/// The state letter of a `stat` line: the first field after the parenthesised name (which may itself
/// hold ") "); `R` when the line is cut short.
pub(crate) fn state_letter(stat: &str) -> char {
    stat.rfind(") ")
        .and_then(|i| stat[i + 2..].chars().next())
        .unwrap_or('R')
}

/// [`thread_state`]'s word from a `stat` line and a `wchan` already read (the wall-clock sampler keeps
/// both files open and reads them again at each tick).
pub(crate) fn word_of(stat: &str, wchan: &str) -> &'static str {
    go_state_word(state_letter(stat), wchan.trim())
}

/// Go's goroutine wait reasons for what a thread's kernel state means: blocked on a futex (a mutex,
/// condvar or park) is `semacquire`, on a socket, pipe, poll or an io_uring's completions is `IO wait`,
/// in nanosleep is `sleep`, elsewhere in the kernel is `syscall`.
fn go_state_word(state: char, wchan: &str) -> &'static str {
    const IO: &[&str] = &[
        "poll",
        "select",
        "epoll",
        // io_uring: waiting for the ring's completions (an io_uring server's read).
        "io_cqring_wait",
        "skb_wait",
        "sk_wait",
        "wait_woken",
        "inet_csk_accept",
        "unix_",
        "pipe_",
        "tcp_",
        "udp_",
        "n_tty_read",
        "wait_for_more",
    ];
    match state {
        'R' => "running",
        'T' | 't' => "stopped",
        'Z' | 'X' | 'x' => "dead",
        _ if wchan.contains("futex") => "semacquire",
        _ if wchan.contains("nanosleep") => "sleep",
        _ if IO.iter().any(|w| wchan.contains(w)) => "IO wait",
        _ => "syscall",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_states_in_gos_words() {
        for (state, wchan, want) in [
            ('R', "", "running"),
            ('S', "futex_do_wait", "semacquire"),
            ('S', "futex_wait_queue", "semacquire"),
            ('S', "__skb_wait_for_more_packets", "IO wait"),
            ('S', "do_sys_poll", "IO wait"),
            ('S', "do_epoll_wait", "IO wait"),
            ('S', "io_cqring_wait", "IO wait"),
            ('S', "inet_csk_accept", "IO wait"),
            ('S', "hrtimer_nanosleep", "sleep"),
            ('S', "do_sigtimedwait", "syscall"),
            ('D', "io_schedule", "syscall"),
            ('T', "do_signal_stop", "stopped"),
        ] {
            assert_eq!(go_state_word(state, wchan), want, "{state} {wchan}");
        }
        // This thread is running as it asks; a thread parked on a condvar waits on a futex.
        let me = thread_self_tid();
        assert_eq!(thread_state(me).0, "running");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tid_tx.send(thread_self_tid()).unwrap();
            let _ = rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let mut seen = ("", None);
        for _ in 0..200 {
            seen = thread_state(tid);
            if seen.0 == "semacquire" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(seen.0, "semacquire", "{seen:?}");
        assert!(seen.1.unwrap_or_default().contains("futex"));
        tx.send(()).unwrap();
        waiter.join().unwrap();
    }

    /// The calling thread's kernel id, from `/proc/thread-self` (no unsafe in this module).
    fn thread_self_tid() -> i32 {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        link.file_name().unwrap().to_str().unwrap().parse().unwrap()
    }
}
