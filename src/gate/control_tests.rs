//! The controller with a fake pusher: actions reach the port in order, GET never waits, reverts fire and
//! are cancelled, failures answer with the state, one log line per transition.
use super::*;
use crate::gate::port::{PushTarget, StartError};
use crate::gate::state::{AddressField, ADHOC_ENV};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
struct Record {
    events: Mutex<Vec<String>>,
    fail_start: AtomicBool,
}

struct FakePusher {
    record: Arc<Record>,
    stop_delay: Duration,
}

struct FakeRun {
    record: Arc<Record>,
    address: String,
    stop_delay: Duration,
}

impl Pusher for FakePusher {
    fn start(&self, target: PushTarget) -> Result<Box<dyn PushRun>, StartError> {
        if self.record.fail_start.load(Ordering::SeqCst) {
            return Err(StartError::Refused("refused by the fake".into()));
        }
        lock(&self.record.events).push(format!(
            "start {} auth={}",
            target.address,
            target.basic_auth.is_some()
        ));
        Ok(Box::new(FakeRun {
            record: Arc::clone(&self.record),
            address: target.address,
            stop_delay: self.stop_delay,
        }))
    }
}

impl PushRun for FakeRun {
    fn status(&self) -> PushStatus {
        PushStatus {
            sdk_errors: 3,
            last_error: Some("upload: 401".to_string()),
            uploads: 7,
            last_upload_at: None,
        }
    }
    fn stop(self: Box<Self>, budget: Duration) -> bool {
        std::thread::sleep(self.stop_delay);
        lock(&self.record.events).push(format!(
            "stop {} budget={}s",
            self.address,
            budget.as_secs()
        ));
        true
    }
}

struct Harness {
    gate: Gate,
    record: Arc<Record>,
    logs: Arc<Mutex<Vec<String>>>,
    adhoc: Arc<AtomicBool>,
}

fn harness(flag: Option<&str>, stop_delay: Duration) -> Harness {
    let record = Arc::new(Record::default());
    let logs = Arc::new(Mutex::new(Vec::new()));
    let adhoc = Arc::new(AtomicBool::new(false));
    let startup = Startup::new(
        flag.map(str::to_string),
        flag.map(|_| ("u".to_string(), "p".to_string())),
        None,
        Duration::from_secs(15),
    );
    let (l, a) = (Arc::clone(&logs), Arc::clone(&adhoc));
    let gate = Gate::with_hooks(
        startup,
        Box::new(FakePusher {
            record: Arc::clone(&record),
            stop_delay,
        }),
        Box::new(move || a.load(Ordering::SeqCst)),
        Box::new(move |line| lock(&l).push(line.to_string())),
        STOP_BUDGET,
    );
    Harness {
        gate,
        record,
        logs,
        adhoc,
    }
}

/// A gate pushing to the flag's address whose closing POST is in flight on another thread: when this
/// returns, the push's stop (which takes `stop_delay`) has begun.
fn closing_in_flight(
    stop_delay: Duration,
) -> (
    Harness,
    std::thread::JoinHandle<Result<GateView, PostError>>,
) {
    let h = harness(Some("http://pyro:4040"), stop_delay);
    h.gate.start().unwrap();
    let g = h.gate.clone();
    let closer = std::thread::spawn(move || g.post(&req(false, AddressField::Omitted, None)));
    assert!(wait_until(Duration::from_secs(2), || lock(
        &h.gate.inner.run
    )
    .is_none()));
    (h, closer)
}

fn req(enabled: bool, addr: AddressField, duration: Option<Duration>) -> PostRequest {
    PostRequest {
        enabled,
        server_address: addr,
        duration,
    }
}

fn events(h: &Harness) -> Vec<String> {
    lock(&h.record.events).clone()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

#[test]
fn startup_flag_opens_and_pushes_with_credentials() {
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    assert!(!h.gate.is_open());
    h.gate.start().unwrap();
    assert!(h.gate.is_open());
    assert_eq!(events(&h), vec!["start http://pyro:4040 auth=true"]);
    let v = h.gate.view();
    assert_eq!(v.startup_flag.as_deref(), Some("http://pyro:4040"));
    assert_eq!(v.server_address.as_deref(), Some("http://pyro:4040"));
    assert!(v.pushing);
    assert_eq!(
        (v.sdk_errors, v.uploads, v.last_error.as_deref()),
        (3, 7, Some("upload: 401"))
    );
    assert_eq!(lock(&h.logs).len(), 1);
}

#[test]
fn retarget_stops_then_starts_and_logs_one_line() {
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.gate.start().unwrap();
    let v = h
        .gate
        .post(&req(
            true,
            AddressField::Value("http://other:1".into()),
            None,
        ))
        .unwrap();
    assert_eq!(v.server_address.as_deref(), Some("http://other:1"));
    assert_eq!(
        events(&h),
        vec![
            "start http://pyro:4040 auth=true",
            "stop http://pyro:4040 budget=20s",
            "start http://other:1 auth=false"
        ]
    );
    let logs = lock(&h.logs).clone();
    assert_eq!(logs.len(), 2);
    assert!(
        logs[1].starts_with("[profiling] ") && logs[1].contains("credentials withheld"),
        "{}",
        logs[1]
    );
}

#[test]
fn refused_post_leaves_state_and_logs_nothing() {
    let h = harness(None, Duration::ZERO);
    let before = h.gate.view();
    let e = h
        .gate
        .post(&req(false, AddressField::Empty, None))
        .unwrap_err();
    assert!(
        matches!(e, PostError::Invalid(ref m) if m.contains("server_address")),
        "{e:?}"
    );
    assert_eq!(h.gate.view(), before);
    assert!(lock(&h.logs).is_empty());
}

#[test]
fn a_failed_start_after_a_stopped_push_shows_its_own_error() {
    // The stopped push's figures (its last upload error "upload: 401") stay visible, but the error of
    // the attempt that just failed is the one a client needs.
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.gate.start().unwrap();
    h.gate
        .post(&req(false, AddressField::Omitted, None))
        .unwrap();
    h.record.fail_start.store(true, Ordering::SeqCst);
    match h
        .gate
        .post(&req(true, AddressField::Value("http://x:1".into()), None))
    {
        Err(PostError::PushFailed { view, .. }) => {
            assert_eq!(view.last_error.as_deref(), Some("refused by the fake"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.gate.view().last_error.as_deref(),
        Some("refused by the fake")
    );
}

#[test]
fn push_start_failure_answers_with_the_state() {
    let h = harness(None, Duration::ZERO);
    h.record.fail_start.store(true, Ordering::SeqCst);
    match h
        .gate
        .post(&req(true, AddressField::Value("http://x:1".into()), None))
    {
        Err(PostError::PushFailed { message, view }) => {
            assert_eq!(message, "refused by the fake");
            assert!(view.enabled && !view.pushing);
            assert_eq!(view.last_error.as_deref(), Some("refused by the fake"));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.gate.is_open());
    assert!(lock(&h.logs)[0].contains("push failed to start: refused by the fake"));
}

#[test]
fn a_startup_push_that_does_not_start_says_why() {
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.record.fail_start.store(true, Ordering::SeqCst);
    match h.gate.start() {
        Err(e @ PushFailure::Start(StartError::Refused(_))) => {
            assert_eq!(e.to_string(), "refused by the fake")
        }
        other => panic!("{other:?}"),
    }
    assert!(h.gate.is_open() && !h.gate.view().pushing);
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.adhoc.store(true, Ordering::SeqCst);
    match h.gate.start() {
        Err(e @ PushFailure::Refused(PushRefusal::AdhocEnv)) => {
            assert!(e.to_string().contains(ADHOC_ENV), "{e}");
            assert_eq!(h.gate.view().last_error, Some(e.to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert!(events(&h).is_empty());
}

#[test]
fn adhoc_env_refuses_a_runtime_push() {
    let h = harness(None, Duration::ZERO);
    h.adhoc.store(true, Ordering::SeqCst);
    let e = h
        .gate
        .post(&req(true, AddressField::Value("http://x:1".into()), None))
        .unwrap_err();
    let PostError::PushFailed { message, view } = e else {
        panic!()
    };
    assert!(message.contains(ADHOC_ENV));
    assert!(view.enabled && !view.pushing && view.last_error.unwrap().contains(ADHOC_ENV));
    assert!(events(&h).is_empty());
    assert_eq!(lock(&h.logs).len(), 1);
}

#[test]
fn get_never_waits_behind_a_slow_stop() {
    let (h, closer) = closing_in_flight(Duration::from_millis(800));
    assert!(wait_until(Duration::from_secs(2), || events(&h).len() == 1));
    let t = Instant::now();
    let v = h.gate.view();
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    assert!(
        v.enabled && v.pushing,
        "the old state shows until the flush ends: {v:?}"
    );
    assert_eq!(
        v.sdk_errors, 3,
        "counters of the stopping push stay visible"
    );
    let after = closer.join().unwrap().unwrap();
    assert!(!after.enabled && !after.pushing);
}

#[test]
fn a_short_duration_reverts() {
    let h = harness(None, Duration::ZERO);
    let v = h
        .gate
        .post(&req(
            true,
            AddressField::Empty,
            Some(Duration::from_millis(150)),
        ))
        .unwrap();
    assert!(v.enabled && v.revert_at.is_some());
    assert!(wait_until(Duration::from_secs(3), || !h.gate.is_open()));
    let v = h.gate.view();
    assert_eq!(v.revert_at, None);
    let logs = lock(&h.logs).clone();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(
        logs[1].starts_with("[profiling] duration elapsed, reverted: gate closed"),
        "{}",
        logs[1]
    );
}

/// A duration is a promise: when the timer's thread cannot start, the POST fails and nothing changes
/// (a 200 with revert_pending would leave the gate open for good).
#[test]
fn a_revert_that_cannot_be_armed_fails_the_post_with_nothing_changed() {
    let mut h = harness(Some("http://flag:4040"), Duration::ZERO);
    h.gate = h.gate.with_spawner(|_| {
        Err(std::io::Error::from_raw_os_error(11)) // EAGAIN, as RLIMIT_NPROC gives
    });
    let before = h.gate.view();
    let e = h
        .gate
        .post(&req(
            true,
            AddressField::Value("http://other:4040".to_string()),
            Some(Duration::from_secs(3)),
        ))
        .unwrap_err();
    let PostError::RevertUnavailable { message, view } = e else {
        panic!("{e:?}")
    };
    assert!(message.contains("revert timer cannot start"), "{message}");
    assert_eq!(*view, before);
    assert_eq!(h.gate.view(), before);
    assert!(lock(&h.record.events).is_empty(), "no push was started");
    assert!(lock(&h.logs).is_empty(), "no transition happened");
    // Without a duration nothing needs the thread: the POST goes through.
    let v = h.gate.post(&req(true, AddressField::Empty, None)).unwrap();
    assert!(v.enabled && v.revert_at.is_none());
}

/// The timer thread exists only while a revert is pending: each revert starts one, which ends after it;
/// a dropped gate ends it too.
#[test]
fn the_timer_thread_lives_only_while_a_revert_is_pending() {
    static SPAWNS: AtomicU64 = AtomicU64::new(0);
    let mut h = harness(None, Duration::ZERO);
    h.gate = h.gate.with_spawner(|f| {
        SPAWNS.fetch_add(1, Ordering::SeqCst);
        spawn_timer_thread(f)
    });
    let timer = Arc::clone(&h.gate.inner.timer);
    for _ in 0..3 {
        h.gate
            .post(&req(
                true,
                AddressField::Empty,
                Some(Duration::from_millis(50)),
            ))
            .unwrap();
        assert!(wait_until(Duration::from_secs(3), || !h.gate.is_open()));
        // The thread ends just after its revert: the next POST must find it gone, not still exiting.
        assert!(wait_until(Duration::from_secs(3), || !lock(&timer.slot).running));
    }
    assert_eq!(SPAWNS.load(Ordering::SeqCst), 3);
    // Two reverts in a row share the one thread; dropping the gate ends it.
    for ms in [5000, 6000] {
        h.gate
            .post(&req(
                true,
                AddressField::Empty,
                Some(Duration::from_millis(ms)),
            ))
            .unwrap();
    }
    assert_eq!(SPAWNS.load(Ordering::SeqCst), 4);
    assert!(lock(&timer.slot).running);
    drop(h);
    assert!(wait_until(Duration::from_secs(3), || !lock(&timer.slot).running));
}

#[test]
fn a_later_post_cancels_the_pending_revert() {
    let h = harness(None, Duration::ZERO);
    h.gate
        .post(&req(
            true,
            AddressField::Empty,
            Some(Duration::from_millis(100)),
        ))
        .unwrap();
    h.gate.post(&req(true, AddressField::Empty, None)).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert!(h.gate.is_open());
    assert_eq!(lock(&h.logs).len(), 2);
}

#[test]
fn shutdown_stops_the_push() {
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.gate.start().unwrap();
    assert!(h.gate.shutdown());
    assert!(!h.gate.is_open());
    assert_eq!(
        events(&h).last().unwrap(),
        "stop http://pyro:4040 budget=20s"
    );
}

#[test]
fn posts_behind_a_long_flush_answer_busy_and_get_stays_instant() {
    // The closing POST's stop takes 4 s (a hanging collector would take 20 s); the POSTs behind it must
    // not wait for it, and must change nothing.
    let (h, closer) = closing_in_flight(Duration::from_secs(4));
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let g = h.gate.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let answer = g.post(&req(true, AddressField::Empty, None));
                (answer, t.elapsed())
            })
        })
        .collect();
    let t = Instant::now();
    let v = h.gate.view();
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    for w in waiting {
        let (answer, took) = w.join().unwrap();
        match answer {
            Err(PostError::Busy { view }) => {
                assert_eq!(*view, v, "a busy POST reports the published state")
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        assert!(
            took >= POST_WAIT && took < Duration::from_secs(3),
            "the busy answer came after {took:?}"
        );
    }
    let closed = closer.join().unwrap().unwrap();
    assert!(!closed.enabled && !closed.pushing);
    // Nothing the busy POSTs asked for happened: one stop, two log lines (startup, close).
    assert!(!h.gate.is_open());
    assert_eq!(lock(&h.logs).len(), 2, "{:?}", lock(&h.logs));
    // And once the flush is over, a POST goes through again.
    assert!(h.gate.post(&req(true, AddressField::Empty, None)).is_ok());
}

#[test]
fn posts_behind_a_short_transition_wait_for_their_turn() {
    let (h, closer) = closing_in_flight(Duration::from_millis(300));
    let v = h.gate.post(&req(true, AddressField::Empty, None)).unwrap();
    assert!(v.enabled && !v.pushing);
    assert!(closer.join().unwrap().is_ok());
}

/// A gate whose wall clock runs `offset` seconds (shared, steppable) away from the real one.
fn stepped_clock_harness() -> (Harness, Arc<std::sync::atomic::AtomicI64>) {
    let offset = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut h = harness(None, Duration::ZERO);
    let o = Arc::clone(&offset);
    h.gate = h.gate.with_wall_clock(Box::new(move || {
        let secs = o.load(Ordering::SeqCst);
        let now = SystemTime::now();
        if secs >= 0 {
            now + Duration::from_secs(secs as u64)
        } else {
            now - Duration::from_secs(secs.unsigned_abs())
        }
    }));
    (h, offset)
}

#[test]
fn a_wall_clock_stepped_back_does_not_delay_the_revert() {
    let (h, offset) = stepped_clock_harness();
    let v = h
        .gate
        .post(&req(
            true,
            AddressField::Empty,
            Some(Duration::from_millis(300)),
        ))
        .unwrap();
    assert!(v.revert_at.is_some());
    offset.store(-3600, Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(3), || !h.gate.is_open()),
        "the revert waited for the wall clock to catch up"
    );
}

#[test]
fn a_wall_clock_stepped_forward_does_not_hasten_the_revert() {
    let (h, offset) = stepped_clock_harness();
    let before = SystemTime::now();
    let v = h
        .gate
        .post(&req(
            true,
            AddressField::Empty,
            Some(Duration::from_secs(3)),
        ))
        .unwrap();
    // The displayed date follows the (stepped) wall clock of the POST.
    let at = v.revert_at.unwrap();
    assert!(at >= before + Duration::from_secs(3), "{at:?}");
    offset.store(24 * 3600, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        h.gate.is_open(),
        "the revert fired early after a clock step"
    );
    assert!(wait_until(Duration::from_secs(5), || !h.gate.is_open()));
}

#[test]
fn a_close_changes_the_open_epoch_when_it_begins_and_runs_the_hook_before_the_flush() {
    let record = Arc::new(Record::default());
    let startup = Startup::new(
        Some("http://pyro:4040".to_string()),
        None,
        None,
        Duration::from_secs(15),
    );
    let hooked = Arc::clone(&record);
    let gate = Gate::with_hooks(
        startup,
        Box::new(FakePusher {
            record: Arc::clone(&record),
            stop_delay: Duration::from_millis(300),
        }),
        Box::new(|| false),
        Box::new(|_| {}),
        STOP_BUDGET,
    )
    .with_close_hook(Box::new(move || {
        lock(&hooked.events).push("close hook".to_string())
    }));
    assert_eq!(gate.open_epoch(), None, "closed before start");
    gate.start().unwrap();
    let opened = gate.open_epoch().expect("open");
    let g = gate.clone();
    let closer = std::thread::spawn(move || g.post(&req(false, AddressField::Omitted, None)));
    // While the push flushes (300 ms), the gate still reads as open but its epoch is gone.
    assert!(wait_until(Duration::from_secs(2), || lock(&gate.inner.run).is_none()));
    assert!(gate.is_open());
    assert_eq!(gate.open_epoch(), None);
    closer.join().unwrap().unwrap();
    assert_eq!(gate.open_epoch(), None);
    gate.post(&req(true, AddressField::Empty, None)).unwrap();
    let reopened = gate.open_epoch().expect("open again");
    assert_ne!(reopened, opened, "a close and a reopen give a new epoch");
    let events = lock(&record.events).clone();
    assert_eq!(
        events,
        [
            "start http://pyro:4040 auth=false",
            "close hook",
            "stop http://pyro:4040 budget=20s"
        ]
    );
}

#[test]
fn a_stopped_push_keeps_its_figures_and_says_whose_they_are() {
    let h = harness(Some("http://pyro:4040"), Duration::ZERO);
    h.gate.start().unwrap();
    assert_eq!(
        h.gate.view().last_push,
        None,
        "running: its figures are live"
    );
    let before = SystemTime::now();
    let v = h
        .gate
        .post(&req(false, AddressField::Omitted, None))
        .unwrap();
    assert!(!v.pushing && !v.enabled);
    assert_eq!((v.uploads, v.sdk_errors), (7, 3), "not reset by the stop");
    let last = v.last_push.expect("names the push the figures belong to");
    assert_eq!(last.address, "http://pyro:4040");
    assert!(last.stopped_at >= before);
    // Pull-only starts no push: the last push's figures stay.
    let v = h.gate.post(&req(true, AddressField::Empty, None)).unwrap();
    assert_eq!(v.uploads, 7);
    assert_eq!(
        v.last_push.map(|p| p.address).as_deref(),
        Some("http://pyro:4040")
    );
    // A new push replaces them with its own.
    let v = h
        .gate
        .post(&req(
            true,
            AddressField::Value("http://other:1".into()),
            None,
        ))
        .unwrap();
    assert!(v.pushing);
    assert_eq!(v.last_push, None);
}
