//! Where threads are born: [`spawn_recorded`] (the `threadcreate` record, stack bounds and the CPU timer
//! at birth) and the labelled spawners built on it; [`on_thread_start`] / [`on_thread_stop`] for the
//! threads a pool spawns (its start and stop hooks); [`learn_own_stack`] for other threads.
use super::{unwind, MAX_DEPTH, MAX_THREADCREATE};
use crate::labels::{self, LabelSet};
use crate::signal;
use crate::Stack;
use std::sync::Mutex;

static THREADCREATE: Mutex<Vec<Stack>> = Mutex::new(Vec::new());

/// Stacks of the places that spawned threads through [`spawn_recorded`] (the `threadcreate` profile).
pub fn threadcreate_stacks() -> Vec<Stack> {
    THREADCREATE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Learns the calling thread's stack bounds for the samplers' handlers (which never ask libc). Threads
/// spawned through [`spawn_recorded`] do it at birth; the binary's `main` calls it for the main thread.
/// Other threads get their bounds from the CPU collector after their first sample.
pub fn learn_own_stack() {
    unwind::init_thread_bounds();
    // Without it the thread keeps the alt stack it had (std's); the samplers work there too, closer
    // to its end.
    let _ = signal::install_alt_stack();
}

/// Registers the calling thread with the profiler, from the start hook of a thread pool the engine did
/// not spawn (tokio's `on_thread_start`, rayon's `start_handler`, any pool's): the thread learns its own
/// stack bounds from libc now (exact, from inside the thread, kept in its own thread-local, so they die
/// with it and a later thread reusing its tid never sees them), and arms its CPU timer if a profile
/// runs. Its first sample then carries its whole stack, down to the thread's root, and its first
/// instructions are sampled; without it, a pool's worker is armed by the collector's next rescan (up to
/// 100 ms later) and its first sample is its leaf only. It also gets the engine's alternate signal stack
/// (the kernel's `AT_MINSIGSTKSZ` + 16 KiB and a guard page, unmapped at its exit) in place of std's
/// 8 KiB, which a debug build's handlers and an AVX-512 machine's signal frame can overflow; a thread that
/// never calls this keeps its own. Cheap to call again; never fails (a thread whose bounds libc cannot
/// give keeps the collector's way; one whose alt stack cannot be mapped keeps the one it had).
///
/// ```
/// // Any pool's start and stop hooks; here, threads spawned by hand.
/// let worker = std::thread::spawn(|| {
///     nl6_profile::threads::on_thread_start();
///     let sum: u64 = (0..1_000u64).sum();
///     nl6_profile::threads::on_thread_stop();
///     sum
/// });
/// assert_eq!(worker.join().unwrap(), 499_500);
/// ```
pub fn on_thread_start() {
    unwind::init_thread_bounds();
    // As in `learn_own_stack`: a thread whose alt stack cannot be mapped keeps its own.
    let _ = signal::install_alt_stack();
    crate::cpu::arm_current_thread();
}

/// The counterpart of [`on_thread_start`], from the pool's stop hook (tokio's `on_thread_stop`): deletes
/// the calling thread's CPU timer now and counts it out, instead of at the collector's next rescan.
/// Optional (a thread that ends without it is found gone by the rescan); call it last on the thread.
pub fn on_thread_stop() {
    crate::cpu::disarm_current_thread();
}

/// Deletes a spawned thread's CPU timer when its closure ends (returns or unwinds).
struct DisarmAtEnd;

impl Drop for DisarmAtEnd {
    fn drop(&mut self) {
        crate::cpu::disarm_current_thread();
    }
}

/// Spawns a named thread, recording the spawning stack for `threadcreate`; the thread learns its stack
/// bounds, gets the engine's alternate signal stack (see [`on_thread_start`]; the error is the spawn's
/// when it cannot be mapped), arms its CPU timer at birth (if a profile runs) and deletes it at its end.
pub fn spawn_recorded<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mut frames = [0u64; MAX_DEPTH];
    let n = unwind::current_stack(0, &mut frames);
    {
        let mut created = THREADCREATE.lock().unwrap_or_else(|e| e.into_inner());
        if created.len() < MAX_THREADCREATE {
            created.push(frames[..n].to_vec());
        }
    }
    // Mapped here, so a process out of address space gets the spawn's error, not a thread without it.
    let alt_stack = signal::AltStack::map()?;
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            // Refused only on the alt stack itself, which a thread's first instruction is not.
            let _ = alt_stack.install();
            unwind::init_thread_bounds();
            crate::cpu::arm_current_thread();
            let _disarm = DisarmAtEnd;
            f()
        })
}

/// Spawns a named OS thread that carries `label` from its first instruction (the birth label), through
/// [`spawn_recorded`] so the `threadcreate` profile sees where it was created.
pub fn spawn_labelled<F, T>(
    label: impl Into<LabelSet>,
    name: &str,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let label = label.into();
    spawn_recorded(name, move || {
        labels::set_thread(label);
        f()
    })
}

/// Spawns a thread that inherits the calling thread's current label (a scheduled scenario start spawned
/// under `scenario` keeps `scenario`).
pub fn spawn_inheriting<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let inherited = labels::current_index();
    spawn_recorded(name, move || {
        labels::store_label(inherited);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_sets_birth_label_and_inherit_copies_it() {
        let (birth, scoped) = (
            LabelSet::new([("t", "birth")]),
            LabelSet::new([("t", "scoped")]),
        );
        let h = spawn_labelled(birth, "t-birth", labels::current).unwrap();
        assert_eq!(h.join().unwrap(), birth);
        let h = std::thread::spawn(move || {
            labels::with(scoped, || {
                spawn_inheriting("t-inherit", labels::current)
                    .unwrap()
                    .join()
                    .unwrap()
            })
        });
        assert_eq!(h.join().unwrap(), scoped);
    }
}
