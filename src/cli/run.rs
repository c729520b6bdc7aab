//! Serve mode: resolve the configuration, bind, open the gate if the flag says so, print the boot line,
//! and on SIGTERM/SIGINT close the gate (bounded flush) and exit 0.
//!
//! Threads: the main thread waits for the signal; the server has one poll thread and its workers; the gate
//! adds a revert timer only while a revert is pending; the push adds its own while it runs.
#![forbid(unsafe_code)]

use super::config::Config;
use super::{signals, Args};
use crate::api::Api;
use crate::gate::control::Gate;
use crate::gate::port::Pusher;
use crate::http::server::{Handler, Server, ServerConfig};
use crate::http::sys;
use crate::push::{PushConfig, PyroscopePusher};
use std::sync::Arc;

/// The pusher the gate drives: the Pyroscope push over the real engine.
fn pusher() -> Box<dyn Pusher> {
    Box::new(PyroscopePusher::new(PushConfig::default()))
}

pub(super) fn serve(args: Args) -> i32 {
    // Before any thread exists, so every thread inherits the mask and only `wait_termination` sees them.
    if let Err(e) = signals::block_termination() {
        eprintln!("nl6: cannot block SIGTERM/SIGINT: {e}");
        return 1;
    }
    let config = match Config::resolve(args, &|name| std::env::var_os(name).is_some()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nl6: {e}");
            return 2;
        }
    };
    if let Err(e) = sys::raise_nofile_limit() {
        eprintln!("nl6: could not raise the open-file limit: {e}");
    }
    if let Some(rate) = config.heap_rate() {
        crate::profiling::heap::set_rate(rate);
    }
    // The fleet binds every device socket before anything is served: a port in use stops startup here
    // with the line naming the device, the port and the remedy.
    let fleet = match crate::lab::Fleet::start(config.fleet().clone()) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            eprintln!("nl6: {e}");
            return 1;
        }
    };
    let gate = Gate::new(config.startup().clone(), pusher());
    let mounted = Arc::clone(&fleet);
    let api = Arc::new(
        Api::new(gate.clone())
            .with_extension(Box::new(move |req| crate::lab::api::route(req, &mounted))),
    );
    let handler: Arc<Handler> = Arc::new(move |req| api.handle(req));
    let server = match Server::bind(config.listen(), ServerConfig::default(), handler) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nl6: listen on {}: {e}", config.listen());
            return 1;
        }
    };
    // The push failing to start is logged by the gate's transition line; pull still serves.
    let _ = gate.start();
    let view = gate.view();
    let state = match (&view.server_address, view.enabled) {
        (_, false) => "closed (open: POST /api/v1/profiling or -profiling-pyroscope)".to_string(),
        (Some(a), true) if view.pushing => format!("open, pushing to {a}"),
        (Some(a), true) => format!("open, push to {a} not running"),
        (None, true) => "open, pull-only".to_string(),
    };
    eprintln!(
        "nl6 listening on {}; profiling gate {state}; {} simulated devices",
        server.local_addr(),
        fleet.devices().len()
    );
    match signals::wait_termination() {
        Ok(sig) => eprintln!("nl6: {sig} received: closing the profiling gate"),
        Err(e) => eprintln!("nl6: waiting for signals failed ({e}): closing the profiling gate"),
    }
    gate.shutdown();
    fleet.stop();
    eprintln!("nl6: exiting");
    0
}
