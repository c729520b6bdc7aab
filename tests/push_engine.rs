//! The push over the real engine (SIGPROF sampler, sampling allocator, thread stacks, encoder) into the
//! Pyroscope stand-in: every profile type lands under `service_name="nl6"` with the OS hostname and the
//! crate version, the `subsystem` label becomes a series label, and a service nothing pushed holds nothing.

mod common;
mod push_support;

use nl6::gate::port::Pusher;
use nl6::labels::{self, Subsystem};
use nl6::push::PyroscopePusher;
use nl6_profile::heap::SamplingAllocator;
use push_support::*;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn burn(stop: Arc<AtomicBool>) {
    let label = Subsystem::custom("push-e2e");
    labels::with(label, || {
        let mut keep: Vec<Vec<u8>> = Vec::new();
        let mut x = 1u64;
        while !stop.load(Ordering::Relaxed) {
            for i in 0..200_000u64 {
                x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            keep.push(vec![x as u8; 64 * 1024]);
            if keep.len() > 64 {
                keep.drain(..32);
            }
        }
        black_box(keep);
    });
}

#[test]
fn the_real_engine_lands_every_type_under_nl6() {
    let server = StandIn::start(&[]);
    let logs = Logs::default();
    let config = nl6::push::config()
        .with_upload_timeout(Duration::from_secs(3))
        .with_log(logs.sink());
    let pusher = PyroscopePusher::new(config);
    let stop = Arc::new(AtomicBool::new(false));
    let burner = {
        let stop = stop.clone();
        std::thread::spawn(move || burn(stop))
    };
    let run = pusher
        .start(target(&server.url(), Duration::from_secs(1)))
        .unwrap();
    let all = wait_until(Duration::from_secs(30), || {
        let types = server.profile_types();
        SERIES_TYPES.iter().all(|t| types.iter().any(|x| x == t))
    });
    stop.store(true, Ordering::Relaxed);
    burner.join().unwrap();
    let status = run.status();
    assert!(run.stop(Duration::from_secs(10)), "flush completes");
    assert!(
        all,
        "types {:?}; status {status:?}; requests {:?}",
        server.profile_types(),
        server.requests()
    );
    assert_eq!(status.sdk_errors, 0, "{status:?} {:?}", logs.lines());

    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let selector = format!(
        r#"{{service_name="nl6",hostname="{}",version="{}"}}"#,
        nl6::push::ingest_url::sanitize_label_value(&hostname),
        env!("CARGO_PKG_VERSION")
    );
    for t in SERIES_TYPES {
        assert!(server.total(t, &selector) > 0, "{t} under {selector}");
    }
    assert!(
        server.total(
            SERIES_TYPES[0],
            r#"{service_name="nl6",subsystem="push-e2e"}"#
        ) > 0
    );
    assert_eq!(
        server.total(SERIES_TYPES[0], r#"{service_name="nl6",subsystem="bogus"}"#),
        0
    );
    assert_eq!(
        server.total(SERIES_TYPES[0], r#"{service_name="nothing-pushed"}"#),
        0
    );
}
