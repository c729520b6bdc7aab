//! What the subsystem label costs on the lab's hottest funnels, side by side in one run: a syslog exporter
//! fire and a flow tick, each without its label scope, with it from an unlabelled caller, and with it from a
//! caller that already carries the label. Allocations and bytes come from a counting global allocator;
//! time is the best of several interleaved rounds (ns per call).
use nl6::lab::device::Device;
use nl6::lab::netflow::FlowExporter;
use nl6::lab::syslog::{SyslogExporter, SEVERITY_INFO};
use nl6::labels::{self, Subsystem};
use std::alloc::{GlobalAlloc, Layout, System};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator; only bumps two atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[derive(Clone, Copy)]
struct Cost {
    allocs: f64,
    bytes: f64,
    ns: f64,
}

/// Runs the variants interleaved, `rounds` times each, and keeps each variant's best round, so machine
/// noise hits all of them alike.
fn measure<const N: usize>(
    iters: u64,
    rounds: usize,
    f: &mut dyn FnMut(usize),
    after: &dyn Fn(),
) -> [Cost; N] {
    let mut out = [Cost {
        allocs: 0.0,
        bytes: 0.0,
        ns: f64::MAX,
    }; N];
    for _ in 0..rounds {
        for (v, c) in out.iter_mut().enumerate() {
            let (a0, b0) = (
                ALLOCS.load(Ordering::Relaxed),
                BYTES.load(Ordering::Relaxed),
            );
            let t = Instant::now();
            for _ in 0..iters {
                f(v);
            }
            let ns = t.elapsed().as_nanos() as f64 / iters as f64;
            c.ns = c.ns.min(ns);
            c.allocs = (ALLOCS.load(Ordering::Relaxed) - a0) as f64 / iters as f64;
            c.bytes = (BYTES.load(Ordering::Relaxed) - b0) as f64 / iters as f64;
            after();
        }
    }
    out
}

fn row(name: &str, c: Cost, base: Cost) {
    println!(
        "{name:<50} {:>7.2} allocs {:>8.1} B {:>9.0} ns   (x{:.3} time vs unscoped, {:+.2} allocs, {:+.1} B)",
        c.allocs,
        c.bytes,
        c.ns,
        c.ns / base.ns,
        c.allocs - base.allocs,
        c.bytes - base.bytes
    );
}

fn main() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let target = rx.local_addr().unwrap();
    let drain = || {
        let mut b = [0u8; 2048];
        while rx.recv(&mut b).is_ok() {}
    };
    let device = Device::new(0, Instant::now() - Duration::from_secs(60));
    let syslog = SyslogExporter::udp(UdpSocket::bind("127.0.0.1:0").unwrap(), target);
    let mut flow = FlowExporter::new(UdpSocket::bind("127.0.0.1:0").unwrap(), target, 1);
    let (iters, rounds) = (1_000, 21);

    println!("fleet_label_cost: {iters} calls x {rounds} interleaved rounds per variant, best round reported");
    let now = SystemTime::now();
    let text = "periodic status: 4/4 interfaces up";
    // Variant 0: no scope; 1: scoped from an unlabelled caller; 2: scoped, caller already carries it.
    let mut fire = |v: usize| match v {
        0 => {
            labels::clear_thread();
            syslog.fire_unscoped(&device, SEVERITY_INFO, "STATUS", text, now);
        }
        1 => {
            labels::clear_thread();
            syslog.fire(&device, SEVERITY_INFO, "STATUS", text, now);
        }
        _ => {
            labels::set_thread(Subsystem::SYSLOG);
            syslog.fire(&device, SEVERITY_INFO, "STATUS", text, now);
        }
    };
    let [s_un, s_sc, s_same] = measure::<3>(iters, rounds, &mut fire, &drain);
    row("syslog fire, no label scope", s_un, s_un);
    row(
        "syslog fire, scoped `syslog` (unlabelled caller)",
        s_sc,
        s_un,
    );
    row("syslog fire, scoped, caller already `syslog`", s_same, s_un);

    let mut t = Instant::now();
    let mut tick = |v: usize| {
        t += Duration::from_millis(1);
        match v {
            0 => {
                labels::clear_thread();
                flow.tick_unscoped(&device, t);
            }
            1 => {
                labels::clear_thread();
                flow.tick(&device, t);
            }
            _ => {
                labels::set_thread(Subsystem::FLOW);
                flow.tick(&device, t);
            }
        }
    };
    let [f_un, f_sc, f_same] = measure::<3>(iters, rounds, &mut tick, &drain);
    labels::clear_thread();
    row("flow tick, no label scope", f_un, f_un);
    row("flow tick, scoped `flow` (unlabelled caller)", f_sc, f_un);
    row(
        "flow tick, scoped, caller already `flow` (ticker)",
        f_same,
        f_un,
    );
}
