//! The pull surface for async servers: [`PullSurface::handle_async`] answers a request on a thread of
//! its own and completes a future with the answer, so an async handler awaits a 30-second CPU profile
//! without holding a runtime worker (no runtime is assumed: the future is woken by that thread).
//!
//! Owns one thread per request in flight, named `pprof-pull`, spawned through
//! [`crate::threads::spawn_recorded`] (so it is sampled and in `threadcreate`). Dropping the future
//! (the server dropped the handler because the client left) ends a timed request at its next watch,
//! with [`super::client_gone`], and the thread exits.
#![forbid(unsafe_code)]

use super::{PullRequest, PullResponse, PullSurface};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Shared between the future and its thread.
#[derive(Debug, Default)]
struct Slot {
    state: Mutex<(Option<PullResponse>, Option<Waker>)>,
    dropped: AtomicBool,
}

/// The answer to a request handed to [`PullSurface::handle_async`]; resolves when the surface has
/// answered. Dropping it ends the request (a timed one at its next watch, within 100 ms).
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct PullFuture {
    slot: Arc<Slot>,
}

impl Future for PullFuture {
    type Output = PullResponse;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PullResponse> {
        let mut state = self.slot.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.0.take() {
            Some(answer) => Poll::Ready(answer),
            None => {
                state.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for PullFuture {
    fn drop(&mut self) {
        self.slot.dropped.store(true, Ordering::Relaxed);
    }
}

impl PullSurface {
    /// Answers `req` on a thread of its own (method, path, query and body are copied), for a handler
    /// on an async runtime: `surface.handle_async(&req).await`. The request's watch ends it when this
    /// future is dropped. When no thread can be spawned the future is ready at once with a 503 naming
    /// the OS error.
    pub fn handle_async(self: &Arc<Self>, req: &PullRequest) -> PullFuture {
        let slot = Arc::new(Slot::default());
        let owned = (
            req.method.to_owned(),
            req.path.to_owned(),
            req.query.to_owned(),
            req.body.to_vec(),
        );
        let (surface, theirs) = (self.clone(), slot.clone());
        let spawned = crate::threads::spawn_recorded("pprof-pull", move || {
            let (method, path, query, body) = &owned;
            let req = PullRequest {
                method,
                path,
                query,
                body,
            };
            let watch = || {
                theirs
                    .dropped
                    .load(Ordering::Relaxed)
                    .then(super::client_gone)
            };
            let answer = surface.handle(&req, &watch);
            let mut state = theirs.state.lock().unwrap_or_else(|e| e.into_inner());
            state.0 = Some(answer);
            if let Some(w) = state.1.take() {
                w.wake();
            }
        });
        if let Err(e) = spawned {
            let answer = super::serve_error(
                503,
                &format!("the profiling request could not start a thread: {e}; retry later"),
            );
            slot.state.lock().unwrap_or_else(|e| e.into_inner()).0 = Some(answer);
        }
        PullFuture { slot }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::task::Wake;
    use std::time::{Duration, Instant};

    /// Wakes by sending on a channel, so the test sees when (and that) the thread woke the future.
    struct Tell(Mutex<mpsc::Sender<()>>);
    impl Wake for Tell {
        fn wake(self: Arc<Self>) {
            let _ = self.0.lock().unwrap().send(());
        }
    }

    #[test]
    fn the_answer_arrives_by_wake_and_the_caller_is_never_blocked() {
        let surface = Arc::new(PullSurface::new());
        let (tx, rx) = mpsc::channel();
        let waker = Waker::from(Arc::new(Tell(Mutex::new(tx))));
        let mut cx = Context::from_waker(&waker);
        let t0 = Instant::now();
        let mut f = surface.handle_async(&PullRequest::get("goroutine", "seconds=1"));
        // A 1-second delta: the first poll returns at once.
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        rx.recv_timeout(Duration::from_secs(10)).expect("woken");
        match Pin::new(&mut f).poll(&mut cx) {
            Poll::Ready(answer) => {
                assert_eq!(answer.status, 200, "{}", answer.text());
                assert_eq!(answer.content_type, "application/octet-stream");
            }
            Poll::Pending => panic!("woken but not ready"),
        }
        assert!(t0.elapsed() >= Duration::from_secs(1));
    }

    #[test]
    fn dropping_the_future_ends_a_timed_request() {
        let surface = Arc::new(PullSurface::new());
        let f = surface.handle_async(&PullRequest::get("goroutine", "seconds=60"));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            Arc::strong_count(&surface),
            2,
            "the request's thread holds the surface"
        );
        drop(f);
        let t0 = Instant::now();
        while Arc::strong_count(&surface) > 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the request did not end"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
