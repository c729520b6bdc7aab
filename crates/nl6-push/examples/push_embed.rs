//! A small service that profiles itself continuously: the engine's sampling allocator as the global
//! allocator, one busy thread that burns CPU and allocates, and a push to a Pyroscope server.
//!
//!   cargo run -p nl6-push --example push_embed -- http://127.0.0.1:4040 10
//!
//! Arguments: the server's address and how many seconds to run (default 10), counted from the first
//! accepted upload: the first CPU window begins only once the engine has read the executable's symbols
//! and unwind tables, which in a debug build on a loaded machine takes seconds. It pushes every second,
//! waits at most 60 s for that first upload, stops with a flush, prints one line `push: flushed=… uploads=… sdk_errors=… last_error=…` and exits 0
//! only when the flush completed with no error.
use nl6_profile::heap::SamplingAllocator;
use nl6_push::{PushConfig, Pusher, Target};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(address) = args.next() else {
        eprintln!("usage: push_embed <pyroscope address> [seconds]");
        std::process::exit(2);
    };
    let seconds: u64 = match args.next().map(|s| s.parse()) {
        None => 10,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("push_embed: seconds: {e}");
            std::process::exit(2);
        }
    };

    // The push: a handful of lines.
    let config = PushConfig::new("push-example").with_version(env!("CARGO_PKG_VERSION"));
    let pusher = Pusher::new(config);
    let push = match pusher.start(Target::new(address, Duration::from_secs(1))) {
        Ok(push) => push,
        Err(e) => {
            eprintln!("push_embed: {e}");
            std::process::exit(1);
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = Arc::clone(&stop);
        nl6_profile::threads::spawn_recorded("busy", move || work(&stop)).expect("busy thread")
    };
    let first_by = Instant::now() + Duration::from_secs(60);
    while push.status().uploads == 0 && Instant::now() < first_by {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    busy.join().expect("busy thread");

    let (flushed, status) = push.stop_with_status(Duration::from_secs(10));
    println!(
        "push: flushed={flushed} uploads={} sdk_errors={} last_error={:?}",
        status.uploads, status.sdk_errors, status.last_error
    );
    std::process::exit(if flushed && status.sdk_errors == 0 {
        0
    } else {
        1
    });
}

/// Burns CPU and keeps some allocations live (so every series has samples) until `stop`.
fn work(stop: &AtomicBool) {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let until = Instant::now() + Duration::from_millis(20);
        while Instant::now() < until {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        kept.push(vec![x as u8; 64 * 1024]);
        if kept.len() > 64 {
            kept.remove(0);
        }
    }
    black_box(kept);
}
