//! A sampled thread's state, as the kernel and the interrupted instruction tell it: the state letter of
//! `/proc/self/task/<tid>/stat` and its `wchan` in Go's goroutine wait reasons (the words of the
//! `debug=2` dump: `running`, `semacquire`, `IO wait`, `sleep`, `syscall`…), refined by the instruction the
//! thread was stopped at: a thread the kernel lists as running whose interrupted instruction follows a
//! `syscall` instruction was in the kernel (entering or leaving a call), and reads `syscall`.
//!
//! Reads `/proc` and this process's own code through `/proc/self/mem` (no `unsafe`); never runs in a
//! signal handler.
#![forbid(unsafe_code)]

use std::fs::File;
use std::os::unix::fs::FileExt;

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

/// What the kernel says of `tid` now, in Go's words (read before the thread is signalled: the signal
/// wakes it to answer, and after that it reads as running).
pub(super) fn kernel_state(tid: i32) -> &'static str {
    crate::encode::thread_state::thread_state(tid).0
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
}
