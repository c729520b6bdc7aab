//! Stress for both samplers: `cargo run --release --example cpu_stress -- [SECONDS]` (default 60); the
//! soak that matters runs the static build: add `--target x86_64-unknown-linux-musl`.
//!
//! The heap sampler is this binary's global allocator, sampling at a small rate ([`HEAP_RATE`] bytes,
//! about a hundred samples per churn round) so its recording, site table and free matching run
//! constantly. The CPU sampler runs at the highest rate the kernel delivers (1000 Hz requested, capped at
//! `cpu::MAX_HZ`) while workers allocate and free, spawn and join threads (recorded and foreign), bounce
//! UDP datagrams over loopback and write through a pipe; the main thread takes a window every second (as
//! the push does), captures all thread stacks every 2 s and reads a heap snapshot every 5 s. A watchdog
//! fails the run when any worker makes no progress for 10 s. Exits 0 only when nothing deadlocked,
//! nothing crashed, no timer leaked, samples were taken and memory stayed flat after warm-up.
//!
//! Memory: VmRSS is read at the end of warm-up (a quarter of the run, at most 10 s) and at the end; it
//! may grow by at most [`RSS_GROWTH_LIMIT_KB`]. What may legitimately still grow after warm-up is bounded
//! and small: the `threadcreate` record (capped at 4096 stacks, about 1 MiB in all), heap sites not yet
//! seen (this workload has at most ~4096 sizes × 3 call paths, ~300 B each: under 4 MiB, most of it
//! filled during warm-up) and allocator fragmentation. A leak per sample, window, capture or thread
//! would pass that within the run (250 Hz × 5 threads × 50 s is over 60 000 samples; ~1 000 threads are
//! spawned).
use nl6::labels::Subsystem;
use nl6_profile::heap::{self, SamplingAllocator};
use nl6_profile::{cpu, threads};
use std::hint::black_box;
use std::io::{ErrorKind, Read, Write};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

const WORKERS: usize = 4;
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// Heap sampling rate for the soak: small, so sampling runs all the time.
const HEAP_RATE: usize = 4096;
/// Largest VmRSS growth allowed between the end of warm-up and the end of the run (see module doc).
const RSS_GROWTH_LIMIT_KB: u64 = 8 * 1024;

fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn alloc_churn(round: u64) {
    let mut keep: Vec<Vec<u8>> = Vec::new();
    for i in 0..200u64 {
        let v = vec![(i ^ round) as u8; 16 + ((i * 7919 + round) % 4096) as usize];
        if i % 3 == 0 {
            keep.push(v);
        } else {
            black_box(v);
        }
    }
    black_box(keep);
}

fn spawn_churn() {
    let a = nl6_profile::threads::spawn_labelled(Subsystem::SCENARIO, "stress-child", || {
        alloc_churn(1)
    })
    .expect("spawn");
    let b = std::thread::spawn(|| alloc_churn(2));
    a.join().expect("join recorded child");
    b.join().expect("join foreign child");
}

/// One UDP round trip over loopback, retrying EINTR (our signals interrupt calls with timeouts).
fn udp_round_trip(a: &UdpSocket, b: &UdpSocket, round: u64) -> std::io::Result<()> {
    let msg = round.to_le_bytes();
    a.send_to(&msg, b.local_addr()?)?;
    let mut buf = [0u8; 16];
    loop {
        match b.recv_from(&mut buf) {
            Ok((8, _)) if buf[..8] == msg => return Ok(()),
            Ok(_) => continue, // a late datagram from an earlier timed-out round
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

fn pipe_round_trip(round: u64) -> std::io::Result<()> {
    let (mut r, mut w) = std::io::pipe()?;
    w.write_all(&round.to_le_bytes())?;
    drop(w);
    let mut got = Vec::new();
    loop {
        match r.read_to_end(&mut got) {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if got != round.to_le_bytes() {
        return Err(std::io::Error::other("pipe returned other bytes"));
    }
    Ok(())
}

fn worker(i: usize, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>) -> Result<(), String> {
    let a = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let b = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    b.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        match (round + i as u64) % 4 {
            0 => alloc_churn(round),
            1 => spawn_churn(),
            2 => udp_round_trip(&a, &b, round).map_err(|e| format!("udp: {e}"))?,
            _ => pipe_round_trip(round).map_err(|e| format!("pipe: {e}"))?,
        }
        progress.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn proc_timers() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/timers").ok()?;
    Some(text.lines().filter(|l| l.starts_with("ID:")).count())
}

fn main() {
    let seconds: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 60,
        Some(Ok(s)) => s,
        Some(Err(_)) => {
            eprintln!("cpu_stress: the argument must be a number of seconds");
            std::process::exit(2);
        }
    };
    heap::set_rate(HEAP_RATE);
    let stop = Arc::new(AtomicBool::new(false));
    let progress: Vec<Arc<AtomicU64>> = (0..WORKERS).map(|_| Arc::new(AtomicU64::new(0))).collect();

    // Watchdog: any worker stalled for STALL_LIMIT is a deadlock.
    {
        let (stop, progress) = (Arc::clone(&stop), progress.clone());
        std::thread::spawn(move || {
            let mut last: Vec<(u64, Instant)> =
                progress.iter().map(|_| (0, Instant::now())).collect();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                for (i, p) in progress.iter().enumerate() {
                    let now = p.load(Ordering::Relaxed);
                    if now != last[i].0 {
                        last[i] = (now, Instant::now());
                    } else if last[i].1.elapsed() > STALL_LIMIT {
                        eprintln!("cpu_stress: FAIL worker {i} made no progress for {STALL_LIMIT:?} (deadlock?)");
                        std::process::exit(1);
                    }
                }
            }
        });
    }

    let signals_before = cpu::signals_taken();
    let mut session = cpu::start(1000).unwrap_or_else(|e| {
        eprintln!("cpu_stress: FAIL start: {e}");
        std::process::exit(1)
    });
    let handles: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (stop, p) = (Arc::clone(&stop), Arc::clone(&progress[i]));
            nl6_profile::threads::spawn_labelled(
                Subsystem::custom("stress"),
                &format!("stress-{i}"),
                move || worker(i, stop, p),
            )
            .expect("spawn worker")
        })
        .collect();

    let began = Instant::now();
    let warm_up = Duration::from_secs((seconds / 4).clamp(1, 10));
    let mut rss_after_warm_up = None;
    let (mut windows, mut sampled, mut lost, mut captures) = (0u64, Duration::ZERO, 0u64, 0u64);
    while began.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        let w = session.take_window();
        windows += 1;
        sampled += w.cpu_time();
        lost += w.lost;
        if rss_after_warm_up.is_none() && began.elapsed() >= warm_up {
            rss_after_warm_up = Some(vm_rss_kb());
        }
        if windows % 5 == 0 {
            black_box(heap::snapshot());
        }
        if windows % 2 == 0 {
            let all = threads::capture_all(Duration::from_secs(1));
            captures += 1;
            if all.len() < WORKERS + 1 {
                eprintln!("cpu_stress: FAIL capture_all saw {} threads", all.len());
                std::process::exit(1);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut failed = false;
    for (i, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("cpu_stress: FAIL worker {i}: {e}");
                failed = true;
            }
            Err(_) => {
                eprintln!("cpu_stress: FAIL worker {i} panicked");
                failed = true;
            }
        }
    }
    let last = session.stop();
    sampled += last.cpu_time();
    lost += last.lost;
    let rss_end = vm_rss_kb();
    let rss_warm = rss_after_warm_up.unwrap_or(rss_end);
    let snapshot = heap::snapshot();
    let heap_samples: u64 = snapshot.records.iter().map(|r| r.alloc_objects).sum();
    let (unplaced, dropped) = heap::lost_counts();
    let signals = cpu::signals_taken() - signals_before;
    let rounds: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
    println!(
        "cpu_stress: {seconds}s at {} Hz: {signals} samples, {:.2}s CPU sampled, {lost} lost, {windows} windows, \
         {captures} captures, {rounds} work rounds",
        cpu::effective_hz(1000),
        sampled.as_secs_f64()
    );
    println!(
        "cpu_stress: heap at rate {HEAP_RATE}: {heap_samples} sampled allocations in {} sites, {unplaced} unplaced, \
         {dropped} dropped; {} threadcreate records; VmRSS {rss_warm} kB after {warm_up:?} warm-up, {rss_end} kB \
         at the end ({:+} kB, limit +{RSS_GROWTH_LIMIT_KB} kB)",
        snapshot.records.len(),
        threads::threadcreate_stacks().len(),
        rss_end as i64 - rss_warm as i64
    );
    if rss_end > rss_warm + RSS_GROWTH_LIMIT_KB {
        eprintln!(
            "cpu_stress: FAIL VmRSS grew by {} kB after warm-up",
            rss_end - rss_warm
        );
        failed = true;
    }
    if heap_samples == 0 {
        eprintln!("cpu_stress: FAIL the heap sampler recorded nothing");
        failed = true;
    }
    if proc_timers().is_some_and(|n| n != 0) {
        eprintln!(
            "cpu_stress: FAIL timers leaked: /proc/self/timers lists {:?}",
            proc_timers()
        );
        failed = true;
    }
    if signals == 0 {
        eprintln!("cpu_stress: FAIL no samples taken");
        failed = true;
    }
    std::process::exit(if failed { 1 } else { 0 });
}
