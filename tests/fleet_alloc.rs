//! The flow tick funnel allocates nothing once warm, whether or not the caller already carries `flow`;
//! an SNMP GET or GETNEXT answers from the device's MIB without rebuilding it (counted by a global
//! allocator that counts calls and bytes only on the measuring thread).
use nl6::lab::device::Device;
use nl6::lab::netflow::FlowExporter;
use nl6::labels::{self, Subsystem};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; the counters are const thread-locals
// without destructors, so touching them never allocates or recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
            BYTES.with(|c| c.set(c.get() + l.size() as u64));
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if ON.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
            BYTES.with(|c| c.set(c.get() + n as u64));
        }
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    allocations_and_bytes(f).0
}

fn allocations_and_bytes(f: impl FnOnce()) -> (u64, u64) {
    COUNT.with(|c| c.set(0));
    BYTES.with(|c| c.set(0));
    ON.with(|o| o.set(true));
    f();
    ON.with(|o| o.set(false));
    (COUNT.with(Cell::get), BYTES.with(Cell::get))
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
    // As the scheduler runs a flow job: the thread already carries `flow`.
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

fn request(pdu_type: u8, oid: &str) -> Vec<u8> {
    use nl6::lab::snmp::ber::{Oid, Value};
    nl6::lab::snmp::Message {
        version: 1,
        community: b"public".to_vec(),
        pdu_type,
        request_id: 7,
        error_status: 0,
        error_index: 0,
        varbinds: vec![(Oid::parse(oid).unwrap(), Value::Null)],
    }
    .encode()
}

/// A request must not rebuild and sort the device's whole MIB (about 22 KB and 300 allocations per
/// request): a GET or GETNEXT costs its decode, its one answer and its encode, a handful of small
/// allocations, whatever the MIB's size.
#[test]
fn an_snmp_request_does_not_rebuild_the_mib() {
    use nl6::lab::snmp::{pdu, respond};
    let d = Device::new(3, Instant::now());
    let get = request(pdu::GET, "1.3.6.1.2.1.2.2.1.10.2");
    let next = request(pdu::GET_NEXT, "1.3.6.1.2.1.2.2.1.16.4");
    assert!(respond(&d, &get, b"public").is_some(), "warm-up GET");
    for (what, req) in [("GET", &get), ("GETNEXT", &next)] {
        let (calls, bytes) = allocations_and_bytes(|| {
            for _ in 0..100 {
                assert!(respond(&d, req, b"public").is_some());
            }
        });
        let (calls, bytes) = (calls / 100, bytes / 100);
        eprintln!("fleet_alloc: one {what}: {calls} allocations, {bytes} bytes");
        assert!(calls <= 16, "{what}: {calls} allocations per request");
        assert!(bytes <= 2048, "{what}: {bytes} bytes allocated per request");
    }
}
