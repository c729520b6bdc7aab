//! Per-thread CPU-time timers for the CPU sampler: creating, arming and deleting them, and keeping one per
//! live thread of the process.
//!
//! What it provides: [`Timers`], the set of one session's timers by tid, whose [`Timers::sync`] compares it
//! with `/proc/self/task` — arming a timer for each new thread, deleting those of threads that exited
//! (timers belong to the process: they would leak otherwise) — and whose [`Timers::rescan`], the
//! collector's tick, calls `sync` only when the thread count says something changed (see [`tasks`]). Each timer is created with raw syscalls on
//! the thread's CPU clock (`((!tid) << 3) | 6`, Linux's `CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD`, as Go does)
//! and notifies with `SIGEV_THREAD_ID`, so SIGPROF goes to that thread only: each thread is charged
//! exactly its own CPU time, which a process-wide `setitimer` does not do (golang/go#35057). The kernel's
//! `sigevent` is spelled out here because musl's struct does not expose the target-tid member.
//!
//! A thread whose timer the kernel refuses (`EAGAIN` at the pending-signal limit, most often) is kept in
//! `unarmed` with the errno, retried at every listing and at least once a second, and reported by the
//! collector (`coverage`); a thread that exits leaves that list.
//!
//! Deleting a thread's timer also forgets the stack top the collector learnt for it (`unwind`'s foreign
//! table), at rescan and at session end alike.
//!
//! Never: runs in a signal handler; keeps a timer for a thread it saw exit.
use super::coverage::UnarmedThread;
use super::tasks;
#[cfg(target_os = "linux")]
use crate::signal;
use crate::unwind;
use std::collections::{BTreeMap, HashMap};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Linux's clock id for a thread's CPU time (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
#[cfg(target_os = "linux")]
pub(crate) fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    ((!tid) << 3) | 6
}

const SIGEV_THREAD_ID: c_int = 4;

/// The kernel's `struct sigevent` (64 bytes) with the `_tid` member of its union.
#[repr(C)]
struct KernelSigevent {
    value: u64,
    signo: c_int,
    notify: c_int,
    tid: c_int,
    _pad: [c_int; 11],
}

/// Off Linux there are no per-thread CPU-clock timers (the samplers refuse to start before this).
#[cfg(not(target_os = "linux"))]
fn arm_timer(_tid: i32, _period_ns: u64) -> Result<c_int, std::io::Error> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Creates and arms a SIGPROF timer on `tid`'s CPU clock; returns the kernel timer id.
#[cfg(target_os = "linux")]
fn arm_timer(tid: i32, period_ns: u64) -> Result<c_int, std::io::Error> {
    let ev = KernelSigevent {
        value: 0,
        signo: signal::CPU_SIGNAL,
        notify: SIGEV_THREAD_ID,
        tid,
        _pad: [0; 11],
    };
    let mut id: c_int = 0;
    // SAFETY: ev and id outlive the call; the kernel reads 64 bytes of ev and writes one int to id.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_create,
            thread_cpu_clock(tid),
            &ev as *const KernelSigevent,
            &mut id,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let period = libc::timespec {
        tv_sec: (period_ns / 1_000_000_000) as _,
        tv_nsec: (period_ns % 1_000_000_000) as _,
    };
    // The first expiry comes after a random fraction of a period: a thread that lives for less than one
    // period is then sampled with probability cpu/period instead of never (unbiased for short threads).
    let first_ns = 1 + random_u64(tid) % period_ns.max(1);
    let first = libc::timespec {
        tv_sec: (first_ns / 1_000_000_000) as _,
        tv_nsec: (first_ns % 1_000_000_000) as _,
    };
    let spec = libc::itimerspec {
        it_interval: period,
        it_value: first,
    };
    // SAFETY: spec outlives the call; the old-value pointer is null.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id,
            0,
            &spec as *const libc::itimerspec,
            std::ptr::null_mut::<u8>(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        delete_timer(id);
        return Err(err);
    }
    Ok(id)
}

/// A cheap non-cryptographic random number (SplitMix64 over a counter, the clock and `salt`).
fn random_u64(salt: i32) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    crate::mix64(
        nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ ((salt as u64) << 32),
    )
}

fn delete_timer(id: c_int) {
    #[cfg(not(target_os = "linux"))]
    let _ = id;
    #[cfg(target_os = "linux")]
    // SAFETY: deleting a timer id we created; a wrong id only returns EINVAL.
    if unsafe { libc::syscall(libc::SYS_timer_delete, id) } == 0 {}
}

/// Ticks (30 s) after which the collector lists the threads even though nothing said they changed: a
/// safety net only (the count and the probe of new ids find every change the kernel reports).
pub(crate) const FULL_LIST_EVERY: u32 = 300;

/// Ticks between retries of the threads whose timer was refused (1 s).
const RETRY_UNARMED_EVERY: u32 = 10;

/// Ids handed out by the kernel since the last tick above which the rescan lists instead of probing
/// each one.
const MAX_PROBED_IDS: i64 = 128;

/// The timers of one session, by tid, and what the rescan knows of the process's threads.
pub(super) struct Timers {
    pub(super) by_tid: HashMap<i32, c_int>,
    pub(super) period_ns: u64,
    /// Threads whose timer was refused, with the errno (retried; see the module doc).
    pub(super) unarmed: BTreeMap<i32, UnarmedThread>,
    /// Set when `unarmed` changed; the collector clears it when it has published the change.
    pub(super) unarmed_changed: bool,
    /// The thread count at the last listing, plus threads that armed themselves since.
    known: usize,
    /// Ticks since the last listing.
    since_list: u32,
    /// The namespace's last pid when last checked (every id above it is new since).
    last_pid: Option<i32>,
    /// Reused buffers: directory records, live tids, tids to delete.
    dirents: Vec<u8>,
    live: Vec<i32>,
    gone: Vec<i32>,
}

impl Timers {
    pub(super) fn new(period_ns: u64) -> Timers {
        Timers {
            by_tid: HashMap::new(),
            period_ns,
            unarmed: BTreeMap::new(),
            unarmed_changed: false,
            known: 0,
            since_list: 0,
            last_pid: None,
            dirents: Vec::new(),
            live: Vec::new(),
            gone: Vec::new(),
        }
    }

    pub(super) fn arm(&mut self, tid: i32) -> Result<(), std::io::Error> {
        if self.by_tid.contains_key(&tid) {
            return Ok(());
        }
        match arm_timer(tid, self.period_ns) {
            Ok(id) => {
                self.by_tid.insert(tid, id);
                self.unarmed_changed |= self.unarmed.remove(&tid).is_some();
                Ok(())
            }
            Err(e) => {
                // EINVAL: the thread exited since it was found; anything else leaves it unsampled.
                match e.raw_os_error() {
                    Some(errno) if errno != libc::EINVAL && !self.unarmed.contains_key(&tid) => {
                        let name = super::coverage::thread_name(tid);
                        self.unarmed.insert(tid, UnarmedThread { tid, name, errno });
                        self.unarmed_changed = true;
                    }
                    _ => {}
                }
                Err(e)
            }
        }
    }

    /// A thread arming itself at birth: armed now, and counted, so the next tick's count check does not
    /// list every thread to find it.
    pub(super) fn arm_newborn(&mut self, tid: i32) -> Result<(), std::io::Error> {
        if !self.by_tid.contains_key(&tid) {
            self.arm(tid)?;
            self.known += 1;
        }
        Ok(())
    }

    /// A thread nl6 spawned, about to end: its timer is deleted and it is counted out.
    pub(super) fn disarm_ending(&mut self, tid: i32) {
        if let Some(id) = self.by_tid.remove(&tid) {
            delete_timer(id);
            self.known = self.known.saturating_sub(1);
        }
        self.unarmed_changed |= self.unarmed.remove(&tid).is_some();
        unwind::forget_foreign(tid);
    }

    /// The collector's tick. Nothing to do when the thread count equals the known one and none of the
    /// ids handed out since the last tick is a thread of ours (each probed: see [`tasks`]); otherwise,
    /// or when a listing is due, [`Timers::sync`]. No allocation, and the same cost for 20 threads or
    /// 10 000. Returns how many timers were armed.
    pub(super) fn rescan(&mut self) -> Result<usize, std::io::Error> {
        self.since_list += 1;
        let retry = !self.unarmed.is_empty() && self.since_list.is_multiple_of(RETRY_UNARMED_EVERY);
        if retry || self.since_list >= FULL_LIST_EVERY || tasks::thread_count() != Some(self.known)
        {
            return self.sync();
        }
        let (Some(before), Some(now)) = (self.last_pid, tasks::last_pid()) else {
            return self.sync();
        };
        // Ids are handed out upwards until they wrap at pid_max; a wrap or a burst lists instead.
        let handed_out = i64::from(now) - i64::from(before);
        if !(0..=MAX_PROBED_IDS).contains(&handed_out) {
            return self.sync();
        }
        // A thread nl6 spawned has armed itself already: only an unknown new thread needs a listing.
        let by_tid = &self.by_tid;
        if (before + 1..=now).any(|t| !by_tid.contains_key(&t) && tasks::is_our_thread(t)) {
            return self.sync();
        }
        self.last_pid = Some(now);
        Ok(0)
    }

    /// Lists the threads, arms new ones and deletes timers of dead ones. Returns how many were armed.
    /// Allocates only when the buffers must grow or the timer map gains entries.
    pub(super) fn sync(&mut self) -> Result<usize, std::io::Error> {
        // Read the last pid first: a thread born after this read has a higher id and is probed next
        // tick even if the listing below missed it.
        self.last_pid = tasks::last_pid();
        tasks::list_tids_into(&mut self.dirents, &mut self.live)?;
        self.since_list = 0;
        self.known = self.live.len();
        self.gone.clear();
        let live = &self.live;
        self.gone.extend(
            self.by_tid
                .keys()
                .filter(|t| live.binary_search(t).is_err())
                .copied(),
        );
        let unarmed_before = self.unarmed.len();
        self.unarmed.retain(|t, _| live.binary_search(t).is_ok());
        self.unarmed_changed |= self.unarmed.len() != unarmed_before;
        for tid in self.gone.iter() {
            if let Some(id) = self.by_tid.remove(tid) {
                delete_timer(id);
            }
            unwind::forget_foreign(*tid);
        }
        let mut n = 0;
        let mut first_err = None;
        for i in 0..self.live.len() {
            let tid = self.live[i];
            if self.by_tid.contains_key(&tid) {
                continue;
            }
            match self.arm(tid) {
                Ok(()) => n += 1,
                // The thread may have exited since the scan (EINVAL); remember other errors.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match first_err {
            Some(e) if self.by_tid.is_empty() => Err(e),
            _ => Ok(n),
        }
    }

    /// True when `tid` has a timer in this session.
    pub(super) fn is_armed(&self, tid: i32) -> bool {
        self.by_tid.contains_key(&tid)
    }

    /// Deletes every timer and forgets the foreign stack tops of their threads: after the session nothing
    /// rescans, so an entry kept now would outlive its thread and bound the walk of a later thread that
    /// reuses the tid (contract in `unwind`).
    pub(super) fn delete_all(&mut self) {
        for (tid, id) in self.by_tid.drain() {
            delete_timer(id);
            unwind::forget_foreign(tid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_id_matches_linux_thread_cpuclock() {
        // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED.
        assert_eq!(thread_cpu_clock(1), -10);
        assert_eq!(thread_cpu_clock(1234), (!1234 << 3) | 4 | 2);
        // The kernel agrees: the clock of our own tid reads the same order of time as CLOCK_THREAD_CPUTIME_ID.
        let mut a = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writing one timespec we own.
        let rc = unsafe { libc::clock_gettime(thread_cpu_clock(signal::gettid()), &mut a) };
        assert_eq!(rc, 0, "the per-thread clock id was rejected");
    }

    /// A thread whose timer ends with the session must not leave its learnt stack top behind: a later
    /// thread reusing its tid would walk up to it.
    #[test]
    fn ending_a_session_forgets_the_stack_tops_of_its_threads() {
        let (gone, kept) = (0x3e_0001, 0x3e_0002);
        assert!(unwind::set_foreign_top(gone, 0x7100_0000));
        assert!(unwind::set_foreign_top(kept, 0x7200_0000));
        // Timer id -1 is never a real timer: deleting it only returns EINVAL.
        let mut timers = Timers::new(10_000_000);
        timers.by_tid.insert(gone, -1);
        assert!(timers.is_armed(gone));
        timers.delete_all();
        assert!(!timers.is_armed(gone));
        assert_eq!(unwind::foreign_top(gone), 0);
        assert_eq!(
            unwind::foreign_top(kept),
            0x7200_0000,
            "only the session's threads"
        );
        unwind::forget_foreign(kept);
    }
}
