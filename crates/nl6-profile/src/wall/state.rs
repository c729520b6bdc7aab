//! A sampled thread's state, as the kernel and the interrupted instruction tell it: the state letter of
//! `/proc/self/task/<tid>/stat` and its `wchan` in Go's goroutine wait reasons (the words of the
//! `debug=2` dump: `running`, `semacquire`, `IO wait`, `sleep`, `syscall`…), refined by the instruction the
//! thread was stopped at: a thread the kernel lists as running whose interrupted instruction follows a
//! `syscall` instruction was in the kernel (entering or leaving a call), and reads `syscall`.
//!
//! Opening a thread's two `/proc` files was most of a tick's cost (path walk, open, close: two thirds of
//! the state reading at 2 000 threads), so [`Kernel`] keeps them open for up to [`FD_BUDGET`] threads
//! and reads them again in place (`pread`); threads beyond the budget are read by opening the files each
//! time. A kept file of a thread that ended reads as an error and is closed then.
//!
//! Reads `/proc` and this process's own code through `/proc/self/mem` (no `unsafe`); never runs in a
//! signal handler.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Threads whose `stat` and `wchan` stay open across ticks (two descriptors each).
pub(crate) const FD_BUDGET: usize = 64;

/// x86_64's `syscall` instruction (`0f 05`).
const SYSCALL: [u8; 2] = [0x0f, 0x05];

/// Reads the bytes before an interrupted instruction (one open file per profile).
pub(super) struct Code(Option<File>);

impl Code {
    /// This process's memory, or nothing when `/proc/self/mem` cannot be opened (states then come from
    /// the kernel alone).
    pub(crate) fn open() -> Code {
        Code(File::open("/proc/self/mem").ok())
    }

    /// Whether the instruction before `pc` is `syscall`: the thread stopped right after entering the
    /// kernel (the kernel's saved user `rip` points past the instruction).
    pub(crate) fn follows_syscall(&self, pc: u64) -> bool {
        let (Some(mem), Some(at)) = (&self.0, pc.checked_sub(2)) else {
            return false;
        };
        let mut bytes = [0u8; 2];
        mem.read_exact_at(&mut bytes, at).is_ok() && bytes == SYSCALL
    }
}

/// The kernel's view of the sampled threads, with their `/proc` files kept open within [`FD_BUDGET`].
pub(super) struct Kernel {
    open: HashMap<i32, (File, File)>,
    budget: usize,
    buf: Vec<u8>,
}

impl Kernel {
    /// Nothing open yet; at most `budget` threads' files kept.
    pub(crate) fn new(budget: usize) -> Kernel {
        Kernel {
            open: HashMap::new(),
            budget,
            buf: vec![0; 1024],
        }
    }

    /// What the kernel says of `tid` now, in Go's words (read before the thread is signalled: the signal
    /// wakes it to answer, and after that it reads as running). A thread that is gone reads as
    /// `running`, as in [`crate::encode::thread_state::thread_state`].
    pub(crate) fn state(&mut self, tid: i32) -> &'static str {
        if !self.open.contains_key(&tid) {
            if self.open.len() >= self.budget {
                return crate::encode::thread_state::thread_state(tid).0;
            }
            let task = format!("/proc/self/task/{tid}");
            match (
                File::open(format!("{task}/stat")),
                File::open(format!("{task}/wchan")),
            ) {
                (Ok(stat), Ok(wchan)) => self.open.insert(tid, (stat, wchan)),
                _ => return "running",
            };
        }
        match self
            .open
            .get(&tid)
            .map(|(s, w)| read_both(s, w, &mut self.buf))
        {
            Some(Some(word)) => word,
            _ => {
                self.open.remove(&tid);
                "running"
            }
        }
    }

    /// Closes the files of threads no longer in `tids` (sorted), so ended threads free the budget.
    pub(crate) fn keep_only(&mut self, tids: &[i32]) {
        if self.open.keys().any(|t| tids.binary_search(t).is_err()) {
            self.open.retain(|t, _| tids.binary_search(t).is_ok());
        }
    }

    /// How many threads' files are open now.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.open.len()
    }
}

/// Reads `stat` then `wchan` from the start (`pread`) into `buf` and names the state; `None` when
/// either read fails (the thread ended).
fn read_both(stat: &File, wchan: &File, buf: &mut [u8]) -> Option<&'static str> {
    let half = buf.len() / 2;
    let (a, b) = buf.split_at_mut(half);
    let n = stat.read_at(a, 0).ok().filter(|n| *n > 0)?;
    let m = wchan.read_at(b, 0).ok()?;
    let stat = std::str::from_utf8(a.get(..n)?).ok()?;
    let wchan = std::str::from_utf8(b.get(..m)?).unwrap_or("");
    Some(crate::encode::thread_state::word_of(stat, wchan))
}

/// The state a sample carries: the kernel's word, with a running thread stopped just past a `syscall`
/// instruction read as `syscall`.
pub(super) fn refine(kernel: &'static str, leaf_pc: Option<u64>, code: &Code) -> &'static str {
    match (kernel, leaf_pc) {
        ("running", Some(pc)) if code.follows_syscall(pc) => "syscall",
        _ => kernel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_before_a_pc_is_read_from_this_process() {
        let code = Code::open();
        // A buffer we own holding `0f 05` then a byte: the "pc" after it follows a syscall.
        let buf: Box<[u8; 3]> = Box::new([0x0f, 0x05, 0x90]);
        let at = buf.as_ptr() as u64;
        assert!(code.follows_syscall(at + 2));
        assert!(!code.follows_syscall(at + 3));
        assert!(
            !code.follows_syscall(1),
            "an unmapped address reads as no syscall"
        );
        assert_eq!(refine("running", Some(at + 2), &code), "syscall");
        assert_eq!(refine("sleep", Some(at + 2), &code), "sleep");
        assert_eq!(refine("running", Some(at + 3), &code), "running");
        assert_eq!(refine("running", None, &code), "running");
    }

    #[test]
    fn kept_files_read_the_state_again_and_an_ended_thread_frees_its_place() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tid_tx.send(crate::signal::gettid()).unwrap();
            let _ = rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let mut kernel = Kernel::new(1);
        let mut seen = "";
        for _ in 0..200 {
            seen = kernel.state(tid);
            if seen == "semacquire" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(
            seen, "semacquire",
            "a parked thread, read through its kept files"
        );
        assert_eq!(kernel.kept(), 1);
        // Over the budget: read by opening, nothing more kept.
        let me = crate::signal::gettid();
        assert_eq!(kernel.state(me), "running");
        assert_eq!(kernel.kept(), 1);
        tx.send(()).unwrap();
        waiter.join().unwrap();
        // Its kept files now read as an error: the thread reads as gone (running) and its place is free.
        let mut gone = "";
        for _ in 0..200 {
            gone = kernel.state(tid);
            if kernel.kept() == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!((gone, kernel.kept()), ("running", 0));
        kernel.state(me);
        assert_eq!(kernel.kept(), 1);
        kernel.keep_only(&[]);
        assert_eq!(kernel.kept(), 0);
    }
}
