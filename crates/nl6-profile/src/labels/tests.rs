use super::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

#[test]
fn a_set_is_its_pairs_sorted_with_the_last_value_of_a_repeated_key() {
    let a = LabelSet::new([("route", "/a"), ("tenant", "t1"), ("route", "/b")]);
    assert_eq!(a.pairs(), &[("route", "/b"), ("tenant", "t1")]);
    assert_eq!(a, LabelSet::new([("tenant", "t1"), ("route", "/b")]));
    assert_ne!(a, LabelSet::new([("tenant", "t1"), ("route", "/a")]));
    assert_eq!(a.get("tenant"), Some("t1"));
    assert_eq!(LabelSet::from_index(a.index()), Some(a));
    assert_eq!(pairs_of(a.index()), a.pairs());
    assert_eq!(format!("{a:?}"), r#"{"route": "/b", "tenant": "t1"}"#);
}

#[test]
fn keys_and_values_may_hold_any_text() {
    // A key/value split no separator could make ambiguous: ("a:1", "b") vs ("a", "1:b").
    let x = LabelSet::new([("a:1", "b")]);
    let y = LabelSet::new([("a", "1:b")]);
    assert_ne!(x, y);
    let empty_value = LabelSet::new([("", "")]);
    assert_eq!(empty_value.pairs(), &[("", "")]);
    assert!(LabelSet::new(Vec::<(&str, &str)>::new()).is_empty());
    let owned = LabelSet::new([(String::from("k"), format!("v{}", 1))]);
    assert_eq!(owned.pairs(), &[("k", "v1")]);
}

#[test]
fn merged_adds_to_a_set_and_overrides_its_keys() {
    let base = LabelSet::new([("service", "api"), ("route", "/x")]);
    let m = base.merged([("route", "/y"), ("tenant", "t")]);
    assert_eq!(
        m.pairs(),
        &[("route", "/y"), ("service", "api"), ("tenant", "t")]
    );
    assert_eq!(
        LabelSet::EMPTY.merged([("k", "v")]),
        LabelSet::new([("k", "v")])
    );
}

#[test]
fn nesting_restores_the_outer_set_and_the_innermost_wins() {
    let (outer, a, b) = (
        LabelSet::new([("n", "outer")]),
        LabelSet::new([("n", "a")]),
        LabelSet::new([("n", "b")]),
    );
    std::thread::spawn(move || {
        assert_eq!(current(), LabelSet::EMPTY);
        set_thread(outer);
        with(a, || {
            assert_eq!(current(), a);
            with(b, || assert_eq!(current(), b));
            let g = b.enter();
            assert_eq!(current(), b);
            drop(g);
            assert_eq!(current(), a);
        });
        assert_eq!(current(), outer);
        clear_thread();
        assert_eq!(current(), LabelSet::EMPTY);
    })
    .join()
    .unwrap();
}

#[test]
fn a_scope_is_restored_on_unwind() {
    let (t, s) = (LabelSet::new([("n", "t")]), LabelSet::new([("n", "s")]));
    std::thread::spawn(move || {
        set_thread(t);
        let r = std::panic::catch_unwind(|| with(s, || panic!("boom")));
        assert!(r.is_err());
        assert_eq!(current(), t);
    })
    .join()
    .unwrap();
}

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Pending on its first `n` polls; records the thread's labels at every poll.
struct Yields {
    left: u32,
    seen: Vec<LabelSet>,
}

impl Future for Yields {
    type Output = Vec<LabelSet>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<LabelSet>> {
        let now = current();
        self.seen.push(now);
        if self.left == 0 {
            return Poll::Ready(std::mem::take(&mut self.seen));
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_labelled_future_has_its_set_at_every_poll_and_leaves_the_thread_s_own() {
    let (worker, r1, r2) = (
        LabelSet::new([("who", "worker")]),
        LabelSet::new([("request", "1")]),
        LabelSet::new([("request", "2")]),
    );
    std::thread::spawn(move || {
        set_thread(worker);
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let y = |left| Yields {
            left,
            seen: Vec::new(),
        };
        let mut f1 = Box::pin(y(2).with_labels(r1));
        let mut f2 = Box::pin(y(2).with_labels(r2));
        assert_eq!(f1.labels(), r1);
        let mut done = (None, None);
        // Interleaved, as one worker runs two tasks: each poll sees its own set, the worker keeps its own.
        for _ in 0..3 {
            if let Poll::Ready(v) = f1.as_mut().poll(&mut cx) {
                done.0 = Some(v);
            }
            assert_eq!(current(), worker);
            if let Poll::Ready(v) = f2.as_mut().poll(&mut cx) {
                done.1 = Some(v);
            }
            assert_eq!(current(), worker);
        }
        assert_eq!(done.0.unwrap(), vec![r1; 3]);
        assert_eq!(done.1.unwrap(), vec![r2; 3]);
    })
    .join()
    .unwrap();
}
