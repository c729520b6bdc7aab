//! The flow tick funnel allocates nothing once warm, whether or not the caller already carries `flow`
//! (counted by a global allocator that counts only on the measuring thread).
use nl6::lab::device::Device;
use nl6::lab::netflow::FlowExporter;
use nl6_profile::labels::{self, Subsystem};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; the counters are const thread-locals
// without destructors, so touching them never allocates or recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if ON.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    ON.with(|o| o.set(true));
    f();
    ON.with(|o| o.set(false));
    COUNT.with(Cell::get)
}

#[test]
fn flow_tick_funnel_allocates_nothing_once_warm() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let boot = Instant::now();
    let devices: Vec<Device> = (0..4).map(|i| Device::new(i, boot)).collect();
    let mut e = FlowExporter::new(
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        rx.local_addr().unwrap(),
        devices.len(),
    );
    let mut now = boot + Duration::from_millis(10);
    for d in &devices {
        assert!(e.tick(d, now), "warm-up tick");
    }
    // As the fleet flow ticker calls it: the thread already carries `flow`.
    labels::set_thread(Subsystem::FLOW);
    let n = allocations(|| {
        for _ in 0..50 {
            now += Duration::from_millis(10);
            for d in &devices {
                assert!(e.tick(d, now));
            }
        }
    });
    assert_eq!(n, 0, "allocations in 200 ticks under `flow`");
    // From an unlabelled caller the scope writes the label, still without allocating.
    labels::clear_thread();
    let n = allocations(|| {
        now += Duration::from_millis(10);
        assert!(e.tick(&devices[0], now));
    });
    assert_eq!(n, 0, "allocations in one scoped tick");
    // The control: the counter does see allocations on this thread.
    assert!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))) >= 1);
}
