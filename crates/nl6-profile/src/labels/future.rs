//! A future that carries a label set across `.await`: the set is in force around each poll of the
//! wrapped future, on whichever thread polls it, and the thread's own set is restored after the poll.
//!
//! Owns no state but the set; never allocates, locks or spawns. Thread-local labels alone cannot follow a
//! task: a task that sets a thread's label and then awaits leaves it on the worker for whatever task runs
//! next, and resumes on another worker without it.
#![forbid(unsafe_code)]

use super::LabelSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// A future polled under a label set ([`LabelledFuture::with_labels`]).
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Labelled<F> {
        set: LabelSet,
        #[pin]
        inner: F,
    }
}

impl<F> Labelled<F> {
    /// The set the future is polled under.
    pub fn labels(&self) -> LabelSet {
        self.set
    }
}

impl<F: Future> Future for Labelled<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        super::with(*this.set, || this.inner.poll(cx))
    }
}

/// Label any future: `async { … }.with_labels(set)`, e.g. an HTTP handler's body, so every sample taken
/// while it runs carries `set`, also after each `.await`. A task spawned inside does not inherit the set:
/// wrap it too (`spawn(fut.with_labels(labels::current()))` from inside a labelled poll).
pub trait LabelledFuture: Future + Sized {
    /// This future, polled under `set`.
    fn with_labels(self, set: LabelSet) -> Labelled<Self> {
        Labelled { set, inner: self }
    }
}

impl<F: Future> LabelledFuture for F {}
