//! Profiling labels: any keys and values, several per sample, read at the instant a sample is taken.
//!
//! Every CPU sample and every thread-stack sample carries the [`LabelSet`] its thread was running under
//! **at the instant the sample was taken**: the signal handler reads it from a thread-local, so a label
//! applies to exactly the code that ran under it (Go reads goroutine labels in its SIGPROF handler the
//! same way). Every pair of the set is a string label of the sample in the pprof output.
//!
//! - Build a set once: [`LabelSet::new`]`([("tenant", t), ("route", r)])` (Go's `pprof.Labels`).
//!   Building locks and searches the process's table; keep sets in a `static`/`OnceLock` or build them
//!   once per distinct value. The table is bounded (see [`LabelSet::new`] for what happens when full).
//! - Enter it for a call's duration, the analog of Go's `pprof.Do`: [`with`] sets the set, runs the
//!   closure and restores what the thread had before, also when the closure unwinds; the innermost
//!   scope wins (build a [`LabelSet::merged`] set to add to the outer one). Or hold a guard:
//!   [`LabelSet::enter`].
//! - Across `.await`: [`LabelledFuture::with_labels`] wraps a future so the set is in force around each
//!   poll and the worker thread's own set is restored after it, whichever thread polls.
//! - For a long-lived thread: [`set_thread`] (or [`crate::threads::spawn_labelled`]).
//! - [`current`] reads the calling thread's set.
//!
//! What this module never does: allocate or lock on [`with`] / [`LabelSet::enter`] / [`current`] /
//! [`set_thread`] / a labelled poll (entering is two thread-local stores), or run a destructor at thread
//! exit (the thread-local is `const`-initialised, so it stays readable from a signal handler and while a
//! thread exits).
#![forbid(unsafe_code)]

mod future;
mod set;

pub use future::{Labelled, LabelledFuture};
pub(crate) use set::overflow_note;
pub use set::{pairs_of, refused, LabelError, LabelSet, MAX_SETS, MAX_TEXT_BYTES};

use std::marker::PhantomData;
use std::sync::atomic::{compiler_fence, AtomicU16, Ordering};

thread_local! {
    /// The calling thread's label-set index (0 = none). `const`-initialised, no destructor, so the signal
    /// handler and thread-exit code can read it. An atomic (Relaxed: the same plain `mov` as a `Cell`)
    /// because a handler's read of a value the interrupted code writes is, by the language's rules, a
    /// concurrent access, which only atomics make defined.
    static CURRENT: AtomicU16 = const { AtomicU16::new(0) };
}

/// The calling thread's label set ([`LabelSet::EMPTY`] when none).
#[inline]
pub fn current() -> LabelSet {
    LabelSet(current_index())
}

/// The raw label-set index of the calling thread (0 = none). Async-signal-safe: one thread-local load.
#[inline]
pub(crate) fn current_index() -> u16 {
    CURRENT.with(|c| c.load(Ordering::Relaxed))
}

/// Stores the calling thread's label index between two compiler fences. Only a signal handler on this
/// same thread reads the value while it is set, which the compiler cannot see: without the fences, a
/// `with` around a closure that does not touch the label has both stores deleted at -O (the second
/// overwrites the first, and nothing the compiler knows of reads in between) or moved across the
/// closure's code. The fences are a signal fence (no instruction is emitted): the stores happen where
/// they are written, in program order, as the handler sees it.
#[inline(always)]
pub(crate) fn store_label(index: u16) {
    compiler_fence(Ordering::SeqCst);
    CURRENT.with(|c| c.store(index, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

/// Sets the calling thread's labels for the rest of its life (or until the next `set_thread`).
/// Use at the top of a long-lived loop in a thread not spawned with
/// [`threads::spawn_labelled`](crate::threads::spawn_labelled).
#[inline]
pub fn set_thread(set: LabelSet) {
    store_label(set.0);
}

/// Clears the calling thread's labels.
#[inline]
pub fn clear_thread() {
    store_label(0);
}

/// A set in force on this thread until dropped, which restores the set the thread had before
/// ([`LabelSet::enter`]). Not `Send`: it restores the thread it was made on. Drop guards in the reverse
/// order of entering them (as scopes do); across `.await` use [`LabelledFuture::with_labels`] instead.
#[derive(Debug)]
#[must_use = "the labels are in force only while the guard lives"]
pub struct Entered {
    before: u16,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        store_label(self.before);
    }
}

impl LabelSet {
    /// Puts this set in force on the calling thread until the guard is dropped.
    #[inline]
    pub fn enter(self) -> Entered {
        let before = current_index();
        if before != self.0 {
            store_label(self.0);
        }
        Entered {
            before,
            _not_send: PhantomData,
        }
    }
}

/// Runs `f` with the calling thread under `set`, then restores the set the thread had before (also if
/// `f` panics). Nested scopes: the innermost wins inside it; after it returns, the outer set is back.
/// When the thread already carries `set`, nothing is written at all. Costs two thread-local stores and
/// allocates nothing. Correct whatever `f` does: the stores are fenced (see `store_label`), so a pure
/// computation in `f` is sampled under `set` even when the compiler can see that `f` never reads it.
#[inline]
pub fn with<R>(set: LabelSet, f: impl FnOnce() -> R) -> R {
    let before = current_index();
    if before == set.0 {
        return f();
    }
    store_label(set.0);
    let _restore = Entered {
        before,
        _not_send: PhantomData,
    };
    f()
}

#[cfg(test)]
mod tests;
