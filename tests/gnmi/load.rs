//! The gNMI target under a collector's load, against the real (debug) binary the other fleet tests run:
//! - 1 000 concurrent STREAM SAMPLE subscriptions at 1 s (100 devices, one HTTP/2 connection each, 10
//!   Subscribe RPCs per connection, read by two client threads) each hold their cadence for 10 s after
//!   their `sync_response`: none missing, every gap between two notifications within 1 s ± 0.25 s at p99;
//! - 5 s CPU profiles pulled during a Get and Subscribe load, read by `go tool pprof -traces`, have
//!   `gnmi` on ≥ 95 % of the lab's samples and the profiler's own frames on ≤ 2 % of all samples (the
//!   heap sampler's per-allocation path counted apart, ≤ 5 % in this debug build, as `fleet_scale` does); two profiles are
//!   pooled, so the few samples the profiler takes are not judged on one profile's sampling error.
//!
//! The two tests run one after the other (each loads the machine). A failure prints the `gnmi` thread's
//! run time and run-queue wait (`/proc/PID/task/TID/schedstat`): a box so loaded that the thread waits
//! for a CPU most of the time misses the cadence whatever the server does.
use crate::common;
use crate::fleet_common;
use crate::gnmi_support;

use gnmi_support::{boot, gnmi_addr, stream as gs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// 5 s CPU profiles taken under the gNMI load and judged together.
const PROFILES: usize = 2;
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const DEVICES: usize = 100;
const PER_CONNECTION: usize = 10;
const CLIENT_THREADS: usize = 2;
const HOLD: Duration = Duration::from_secs(10);

fn quantile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// Run and run-queue wait seconds, summed over `pid`'s threads named `name`.
fn sched(pid: u32, name: &str) -> (f64, f64) {
    let mut t = (0.0, 0.0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return t;
    };
    for e in tasks.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let s = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        let f: Vec<f64> = s
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() >= 2 {
            t.0 += f[0] / 1e9;
            t.1 += f[1] / 1e9;
        }
    }
    t
}

/// `per` subscriptions on one connection to each of `addrs`, spread over `threads` client threads.
fn subscribe_all(addrs: &[std::net::SocketAddr], per: usize, threads: usize) -> Vec<gs::StreamLog> {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mine: Vec<_> = addrs.iter().copied().skip(t).step_by(threads).collect();
            std::thread::spawn(move || gs::runtime().block_on(gs::hold(mine, per, HOLD, start)))
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("a client thread"))
        .collect()
}

#[test]
fn a_thousand_stream_sample_subscriptions_hold_a_one_second_cadence() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let nl6 = boot(DEVICES, &[]);
    let addrs: Vec<_> = (0..DEVICES).map(|i| gnmi_addr(&nl6, i)).collect();
    let before = sched(nl6.pid(), "gnmi");
    let logs = subscribe_all(&addrs, PER_CONNECTION, CLIENT_THREADS);
    let after = sched(nl6.pid(), "gnmi");
    let (ran, waited) = (after.0 - before.0, after.1 - before.1);

    let synced: Vec<f64> = logs
        .iter()
        .filter_map(|s| s.synced.map(|d| d.as_secs_f64()))
        .collect();
    let mut gaps: Vec<f64> = logs
        .iter()
        .flat_map(|s| s.arrivals.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()))
        .collect();
    gaps.sort_by(f64::total_cmp);
    let mut delays: Vec<f64> = logs
        .iter()
        .flat_map(|s| {
            s.stamps
                .iter()
                .map(|(ts, at)| (*at as f64 - *ts as f64) / 1e9)
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    let fewest = logs.iter().map(|s| s.arrivals.len()).min().unwrap_or(0);
    let figures = format!(
        "{} subscriptions, {} synced (the last {:.2} s after the first request); {} gaps between \
         notifications: p1 {:.3} s, p50 {:.3} s, p99 {:.3} s, max {:.3} s; fewest notifications in \
         {HOLD:?}: {fewest}; notification timestamp to arrival p50 {:.3} s, p99 {:.3} s; the gnmi \
         thread ran {ran:.2} s and waited for a CPU {waited:.2} s",
        logs.len(),
        synced.len(),
        synced.iter().copied().fold(0.0, f64::max),
        gaps.len(),
        quantile(&gaps, 0.01),
        quantile(&gaps, 0.5),
        quantile(&gaps, 0.99),
        quantile(&gaps, 1.0),
        quantile(&delays, 0.5),
        quantile(&delays, 0.99),
    );
    eprintln!("gnmi_load: {figures}");
    assert_eq!(logs.len(), DEVICES * PER_CONNECTION, "{figures}");
    assert_eq!(
        synced.len(),
        logs.len(),
        "every subscription synced: {figures}"
    );
    // 10 s at 1 s: 10 notifications, one of which may fall just past the end.
    let least = HOLD.as_secs() as usize - 1;
    assert!(fewest >= least, "none missing (≥ {least} each): {figures}");
    let (lo, hi) = (quantile(&gaps, 0.01), quantile(&gaps, 0.99));
    assert!(
        lo >= 0.75 && hi <= 1.25,
        "the cadence is 1 s ± 0.25 s from p1 to p99: {figures}"
    );
}

/// One profile sample as `go tool pprof -traces` prints it: its `subsystem` label, value (ms) and
/// frames, leaf first.
struct Trace {
    label: String,
    ms: f64,
    frames: Vec<String>,
}

fn millis(v: &str) -> Option<f64> {
    let (n, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = n.parse().ok()?;
    Some(match unit {
        "ns" => n / 1e6,
        "us" | "µs" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" | "min" | "mins" => n * 60e3,
        _ => return None,
    })
}

fn traces(text: &str) -> Vec<Trace> {
    let mut out = Vec::new();
    for block in text.split("-----------+-------------------------------------------------------") {
        let (mut label, mut ms, mut frames) = (String::new(), None, Vec::new());
        for line in block.lines() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("subsystem:") {
                label = v.trim().to_string();
            } else if ms.is_none() {
                let mut w = t.splitn(2, char::is_whitespace);
                if let (Some(v), Some(f)) = (w.next().and_then(millis), w.next()) {
                    ms = Some(v);
                    frames.push(f.trim().to_string());
                }
            } else if !t.is_empty() {
                frames.push(t.to_string());
            }
        }
        if let Some(ms) = ms {
            out.push(Trace { label, ms, frames });
        }
    }
    out
}

#[test]
fn a_cpu_profile_under_gnmi_load_is_gnmi_labelled_and_the_profiler_stays_small() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let devices = 20;
    let nl6 = boot(devices, &[]);
    nl6.open_pull_only();
    let addrs: Vec<_> = (0..devices).map(|i| gnmi_addr(&nl6, i)).collect();
    let until = Instant::now() + Duration::from_secs(PROFILES as u64 * 12);
    let getters: Vec<_> = addrs[..10]
        .chunks(5)
        .map(|a| {
            let a = a.to_vec();
            std::thread::spawn(move || gs::runtime().block_on(gs::get_loop(a, until)))
        })
        .collect();
    let streams = {
        let a = addrs[10..].to_vec();
        std::thread::spawn(move || {
            gs::runtime().block_on(gs::hold(
                a,
                5,
                Duration::from_secs(PROFILES as u64 * 12),
                Instant::now(),
            ))
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    // Two 5 s profiles, judged pooled: the profiler's share is a few samples of a few hundred, and one
    // profile's sampling error alone is about the margin between today's share and the 2 % bound.
    let mut bodies = Vec::new();
    let mut took = Vec::new();
    for _ in 0..PROFILES {
        let asked = Instant::now();
        bodies.push(nl6.profile_ok("/debug/pprof/profile?seconds=5"));
        took.push(asked.elapsed());
    }
    let (mut ok, mut failed) = (0, 0);
    for g in getters {
        let (o, f) = g.join().expect("a Get thread");
        ok += o;
        failed += f;
    }
    let logs = streams.join().expect("the stream thread");
    assert_eq!(failed, 0, "every Get answered ({ok} were)");
    assert!(ok > 100, "the Get load ran: {ok} Gets");
    assert!(
        logs.iter().all(|s| s.synced.is_some()),
        "every stream synced"
    );

    let work = std::env::temp_dir().join(format!("nl6-gnmi-load-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let mut all = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let file = work.join(format!("cpu{i}.pb.gz"));
        std::fs::write(&file, body).unwrap();
        let text = common::go_pprof_ok(&["-traces".as_ref(), file.as_os_str()], &work);
        all.extend(traces(&text));
    }
    let _ = std::fs::remove_dir_all(&work);
    let lab = fleet_common::LAB_LABELS;
    let in_lab = |t: &Trace| {
        lab.contains(&t.label.as_str()) || t.frames.iter().any(|f| f.contains("nl6::lab::"))
    };
    let sum = |f: &dyn Fn(&Trace) -> bool| -> f64 {
        all.iter().filter(|t| f(t)).fold(0.0, |a, t| a + t.ms)
    };
    let total = sum(&|_| true);
    let lab_ms = sum(&|t| in_lab(t));
    let gnmi_ms = sum(&|t| in_lab(t) && t.label == "gnmi");
    // As fleet_scale counts them: the profiler's machinery (handler, unwinder, sampler threads) apart
    // from the heap sampler's per-allocation path (a call of its own in this debug build, inlined in a
    // release one; its cost is the heap bench's).
    let own = sum(&|t| fleet_common::profiler_self(&t.frames) == Some(false));
    let alloc = sum(&|t| fleet_common::profiler_self(&t.frames) == Some(true));
    let figures = format!(
        "{PROFILES} profiles of 5 s answered in {took:.1?}: {} samples, {total:.0} ms, {lab_ms:.0} ms in the lab, \
         {gnmi_ms:.0} ms of it `gnmi`, {own:.0} ms in the profiler's machinery, {alloc:.0} ms in the heap \
         sampler's per-allocation path; the load: {ok} Gets, \
         {} streams",
        all.len(),
        logs.len()
    );
    let own_leaves: Vec<&str> = all
        .iter()
        .filter(|t| fleet_common::profiler_self(&t.frames).is_some())
        .filter_map(|t| t.frames.iter().find(|f| f.contains("nl6_profile::")))
        .map(String::as_str)
        .collect();
    let figures = format!("{figures}; the profiler's samples end in {own_leaves:?}");
    eprintln!("gnmi_load: {figures}");
    assert!(lab_ms >= 200.0, "the load was sampled: {figures}");
    assert!(
        gnmi_ms >= lab_ms * 0.95,
        "`gnmi` on ≥ 95 % of the lab: {figures}"
    );
    assert!(
        own <= total * 0.02,
        "the profiler's machinery ≤ 2 %: {figures}"
    );
    // 1–3 % measured here on a quiet machine: this debug build calls the countdown on every one of the
    // gRPC stack's allocations; inlined in a release build, its cost there is `heap_overhead`'s.
    assert!(
        alloc <= total * 0.05,
        "the per-allocation path ≤ 5 % in a debug build: {figures}"
    );
}
