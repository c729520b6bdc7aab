//! The wall-clock profile of a workload with known waits, read back by `go tool pprof` (the independent
//! reader): a thread blocked on a mutex another thread holds 70 % of the time (and busy while it is free), a sleeper and a busy loop.
//! The blocked thread's share of time in the lock wait must be within 5 points of what its own clock measured
//! over the session (about 70 %, less when a loaded machine wakes the holder late), under its own function and
//! label; the sleeper's in the sleep; the busy one's in its loop. Also fgprof's shape (sample types, period type),
//! as `go tool pprof -raw` prints it. And the 99 Hz schedule: every period is a tick but those the
//! kernel's own clock of the sampler (its run-queue wait) and the late answers account for.
//!   cargo test -p nl6-profile --test engine_wall
#[path = "support/go_pprof.rs"]
mod go_pprof;

use nl6_profile::labels::LabelSet;
use nl6_profile::{threads, wall};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The waiter's own clock: nanoseconds in the lock wait and in all, counted while `on` (the session).
#[derive(Default)]
struct Clock {
    on: AtomicBool,
    wait_ns: AtomicU64,
    total_ns: AtomicU64,
}

impl Clock {
    fn share(&self) -> f64 {
        self.wait_ns.load(Ordering::SeqCst) as f64
            / self.total_ns.load(Ordering::SeqCst).max(1) as f64
    }
}

/// Holds `m` for 70 ms of every 100 ms (asleep while holding it); `held` says when it holds it.
#[inline(never)]
fn holder_loop(m: &Mutex<u64>, held: &AtomicBool, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        {
            let mut g = m.lock().unwrap();
            held.store(true, Ordering::SeqCst);
            *g += 1;
            std::thread::sleep(Duration::from_millis(70));
            held.store(false, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// Waits for `m` whenever the holder has it and works (busy) while it is free: its time is the holder's
/// 70/30 split, the 70 in the lock wait. `clock` measures the split it really had.
#[inline(never)]
fn waiter_loop(m: &Mutex<u64>, held: &AtomicBool, stop: &AtomicBool, clock: &Clock) {
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        lock_wait(m);
        let t1 = Instant::now();
        waiter_work(held, stop);
        if clock.on.load(Ordering::SeqCst) {
            let t2 = Instant::now();
            clock
                .wait_ns
                .fetch_add((t1 - t0).as_nanos() as u64, Ordering::SeqCst);
            clock
                .total_ns
                .fetch_add((t2 - t0).as_nanos() as u64, Ordering::SeqCst);
        }
    }
}

#[inline(never)]
fn lock_wait(m: &Mutex<u64>) {
    let g = m.lock().unwrap();
    std::hint::black_box(*g);
}

/// Busy until the holder holds the lock again.
#[inline(never)]
fn waiter_work(held: &AtomicBool, stop: &AtomicBool) {
    let mut x = 1u64;
    while !held.load(Ordering::SeqCst) && !stop.load(Ordering::Relaxed) {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

#[inline(never)]
fn sleeper_loop(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[inline(never)]
fn busy_loop(stop: &AtomicBool) {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        x = std::hint::black_box(x.wrapping_mul(2862933555777941757).wrapping_add(3));
    }
}

/// One `-traces` block: its value, its labels and its functions (leaf first).
#[derive(Debug)]
struct Trace {
    value: i64,
    labels: Vec<String>,
    funcs: Vec<String>,
}

/// Parses `go tool pprof -traces` output: blocks separated by dashed lines; a block holds its label
/// lines (`key:  value`), then `VALUE LEAF`, then the callers, one a line.
fn parse_traces(text: &str) -> Vec<Trace> {
    let mut out = Vec::new();
    for block in text.split("-----------+-------------------------------------------------------") {
        let (mut value, mut labels, mut funcs) = (None, Vec::new(), Vec::new());
        for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if value.is_none() {
                if let Some(v) = parse_ns(first) {
                    value = Some(v);
                    funcs.extend(words.next().map(str::to_string));
                } else if let Some(key) = first.strip_suffix(':') {
                    labels.push(format!("{key}:[{}]", words.collect::<Vec<_>>().join(" ")));
                }
            } else {
                funcs.push(first.to_string());
            }
        }
        if let Some(value) = value {
            out.push(Trace {
                value,
                labels,
                funcs,
            });
        }
    }
    out
}

/// A `-traces` value (`30.30ms`, `1.20s`, `10101010ns`, a plain count) in nanoseconds.
fn parse_ns(w: &str) -> Option<i64> {
    let (num, scale) = if let Some(n) = w.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = w.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = w.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = w.strip_suffix('s') {
        (n, 1e9)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| (v * scale) as i64)
}

#[test]
fn known_waits_are_attributed_to_their_stacks_labels_and_states() {
    let stop = Arc::new(AtomicBool::new(false));
    let m = Arc::new(Mutex::new(0u64));
    let mut handles = Vec::new();
    let spawn = |label: &str, f: Box<dyn FnOnce() + Send>| {
        threads::spawn_labelled(LabelSet::new([("subsystem", label)]), label, f).unwrap()
    };
    let held = Arc::new(AtomicBool::new(false));
    let (m1, h1, s1) = (m.clone(), held.clone(), stop.clone());
    handles.push(spawn(
        "holder",
        Box::new(move || holder_loop(&m1, &h1, &s1)),
    ));
    let clock = Arc::new(Clock::default());
    let (m2, h2, s2, c2) = (m.clone(), held.clone(), stop.clone(), clock.clone());
    handles.push(spawn(
        "waiter",
        Box::new(move || waiter_loop(&m2, &h2, &s2, &c2)),
    ));
    let s3 = stop.clone();
    handles.push(spawn("sleeper", Box::new(move || sleeper_loop(&s3))));
    let s4 = stop.clone();
    handles.push(spawn("busy", Box::new(move || busy_loop(&s4))));
    std::thread::sleep(Duration::from_millis(200));

    clock.on.store(true, Ordering::SeqCst);
    let session = wall::start().expect("a wall-clock session");
    let window = Instant::now();
    let sampler = thread_named("pprof-wall");
    let waited_before = run_queue_wait(sampler);
    std::thread::sleep(Duration::from_secs(5));
    let waited = run_queue_wait(sampler).saturating_sub(waited_before);
    let window = window.elapsed();
    let profile = session.stop();
    clock.on.store(false, Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    // The sampler keeps an absolute 99 Hz schedule and skips the ticks it is late for; it is late only
    // when the kernel kept it waiting for a CPU (its run-queue wait, the kernel's clock) or when a tick
    // waited out its timeout (one period) for a thread that did not answer. Those are the machine's
    // load; every other period must be a tick (80 % of them, as on a quiet machine, where both are ~0).
    let period = Duration::from_nanos(profile.period_ns);
    let due = window.as_secs_f64() / period.as_secs_f64();
    let late = waited.as_secs_f64() / period.as_secs_f64() + profile.unanswered as f64;
    eprintln!(
        "{} ticks in {window:?} ({due:.0} due); the sampler waited {waited:?} for a CPU; {} answers late",
        profile.ticks, profile.unanswered
    );
    assert!(
        profile.ticks as f64 >= 0.8 * (due - late),
        "{} ticks in {window:?} at 99 Hz ({due:.0} due, {late:.0} of them late by the machine)",
        profile.ticks
    );

    let work = std::env::temp_dir().join(format!("nl6-wall-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("fgprof.pb.gz");
    std::fs::write(&file, wall::encode(&profile)).unwrap();

    // fgprof's shape, as pprof reads it.
    let raw = go_pprof::go_pprof_ok(&["-raw".as_ref(), file.as_os_str()], &work);
    assert!(raw.contains("PeriodType: wallclock nanoseconds"), "{raw}");
    assert!(raw.contains("samples/count time/nanoseconds"), "{raw}");
    assert!(
        raw.contains(&format!("Period: {}", 1_000_000_000 / 99)),
        "{raw}"
    );

    let text = go_pprof::go_pprof_ok(
        &[
            "-traces".as_ref(),
            "-sample_index=time".as_ref(),
            file.as_os_str(),
        ],
        &work,
    );
    let traces = parse_traces(&text);
    let of = |label: &str| -> Vec<&Trace> {
        let want = format!("subsystem:[{label}]");
        traces
            .iter()
            .filter(|t| t.labels.iter().any(|l| l.contains(&want)))
            .collect()
    };
    let share = |label: &str, pred: &dyn Fn(&Trace) -> bool| -> f64 {
        let mine = of(label);
        let total: i64 = mine.iter().map(|t| t.value).sum();
        assert!(total > 0, "no time for {label}: {text}");
        mine.iter()
            .filter(|t| pred(t))
            .map(|t| t.value)
            .sum::<i64>() as f64
            / total as f64
    };
    let through = |f: &'static str| move |t: &Trace| t.funcs.iter().any(|n| n.ends_with(f));
    let in_state = |s: &'static str| {
        move |t: &Trace| t.labels.iter().any(|l| l.contains(&format!("state:[{s}]")))
    };

    let lock = share("waiter", &through("::lock_wait"));
    let measured = clock.share();
    eprintln!(
        "waiter: {lock:.3} of its time in the lock wait by the profile, {measured:.3} by its clock; {} ticks",
        profile.ticks
    );
    assert!(
        (0.5..=0.8).contains(&measured),
        "the workload did not run as built: the waiter's clock says {measured:.3} in the lock wait"
    );
    assert!(
        (lock - measured).abs() <= 0.05,
        "waiter's lock-wait share {lock:.3}, its clock says {measured:.3}\n{text}"
    );
    let lock_futex = share("waiter", &|t| {
        through("::lock_wait")(t) && in_state("semacquire")(t)
    });
    assert!(
        lock_futex >= 0.6,
        "the lock wait reads as semacquire: {lock_futex:.3}\n{text}"
    );
    let work_share = share("waiter", &through("::waiter_work"));
    assert!(work_share >= 0.2, "waiter's own work {work_share:.3}");

    let sleep = share("sleeper", &|t| {
        through("::sleeper_loop")(t) && t.funcs.iter().any(|f| f.contains("sleep"))
    });
    assert!(sleep >= 0.95, "sleeper in its sleep {sleep:.3}\n{text}");
    assert!(share("sleeper", &in_state("sleep")) >= 0.9);

    let busy = share("busy", &through("::busy_loop"));
    assert!(busy >= 0.95, "busy in its loop {busy:.3}\n{text}");
    assert!(share("busy", &in_state("running")) >= 0.8);

    // The holder sleeps while holding: its time is under the sleep, not the lock.
    let held = share("holder", &through("::holder_loop"));
    assert!(held >= 0.95, "{held:.3}");
    std::fs::remove_dir_all(&work).ok();
}

/// The tid of this process's thread named `name` (waits up to a second for it to appear).
fn thread_named(name: &str) -> i32 {
    for _ in 0..1000 {
        for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == name {
                return e.file_name().to_str().unwrap().parse().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no thread named {name} in /proc/self/task");
}

/// How long thread `tid` has waited on a run queue, runnable but not running: the second field of
/// `/proc/self/task/<tid>/schedstat` (the kernel's scheduler statistics). Zero on a kernel without them
/// (the bound it feeds is then the quiet machine's).
fn run_queue_wait(tid: i32) -> Duration {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}
