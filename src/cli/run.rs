//! Serve mode: resolve the configuration, bind, open the gate if the flag says so, print the boot line,
//! and on SIGTERM/SIGINT/SIGHUP close the gate (bounded flush) and exit 0 (see [`signals`]).
//!
//! Threads: the main thread waits for the signal; the server has one poll thread and its workers; the gate
//! adds a revert timer only while a revert is pending; the push adds its own while it runs.
#![forbid(unsafe_code)]

use super::config::Config;
use super::{signals, Args};
use crate::api::Api;
use crate::console::{self, CpuSlot, CpuSource};
use crate::gate::control::Gate;
use crate::gate::port::Pusher;
use crate::http::server::{plain_refusal, Handler, Refusal, Server, ServerConfig};
use crate::http::sys;
use crate::http::Response;
use crate::push::PyroscopePusher;
use std::sync::Arc;

/// The server's limits for the binary: no route accepts a body over [`crate::api::rest::MAX_BODY`]
/// (64 KiB; scenario and symbol bodies are far smaller), so no connection buffers more than that plus a
/// head; the other limits are the server's defaults.
fn server_config() -> ServerConfig {
    ServerConfig::default()
        .max_body(crate::api::rest::MAX_BODY)
        .refusal(refusal)
}

/// The server's own refusals in each surface's shape: JSON `{"error": …}` under `/api/`, plain text
/// elsewhere (as the pull surface's errors are).
fn refusal(r: &Refusal) -> Response {
    match &r.path {
        Some(p) => crate::api::error_for(p, r.status, &r.message),
        None => plain_refusal(r),
    }
}

/// The pusher the gate drives: the Pyroscope push over the real engine, its CPU and wall-clock windows
/// kept in `flame` for the console.
fn pusher(flame: &Arc<CpuSlot>) -> Box<dyn Pusher> {
    let cpu = console::cpu_hook(Arc::clone(flame), CpuSource::Push);
    let wall = console::wall_hook(Arc::clone(flame), CpuSource::Push);
    Box::new(PyroscopePusher::new(
        crate::push::config()
            .with_cpu_hook(Arc::from(cpu))
            .with_wall_hook(Arc::from(wall)),
    ))
}

pub(super) fn serve(args: Args) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// Serve mode from start to exit; `Err` carries the exit code of a startup that failed (its line
/// already printed).
fn run(args: Args) -> Result<(), i32> {
    let config = prepare(args)?;
    let fleet = start_fleet(&config)?;
    // The console's flame graph shows the last CPU profile, pulled or pushed: one slot, handed to both.
    let flame = Arc::new(CpuSlot::new());
    // A close halts the CPU sampler at once, whoever holds it (a pull profile, a push hung in an upload).
    let gate = Gate::new(config.startup().clone(), pusher(&flame))
        .with_close_hook(Box::new(nl6_profile::cpu::halt));
    let server = bind_server(&config, &gate, &flame, &fleet)?;
    // The push failing to start is logged by the gate's transition line; pull still serves.
    let _ = gate.start();
    eprintln!(
        "nl6 listening on {}; profiling gate {}; {}",
        server.local_addr(),
        gate_summary(&gate.view()),
        crate::goflag::count(
            fleet.devices().len(),
            "simulated device",
            "simulated devices"
        )
    );
    if let Some(line) = exposure_warning(server.local_addr()) {
        eprintln!("{line}");
    }
    match signals::wait_termination() {
        Ok(sig) => eprintln!("nl6: {sig} received: closing the profiling gate"),
        Err(e) => eprintln!("nl6: waiting for signals failed ({e}): closing the profiling gate"),
    }
    gate.shutdown();
    fleet.stop();
    eprintln!("nl6: exiting");
    Ok(())
}

/// The process set up before any thread of nl6's exists: the signal mask, the profiler's handlers and
/// log sink, the configuration, the open-file limit and the heap sampler.
fn prepare(args: Args) -> Result<Config, i32> {
    // Before any thread exists, so every thread inherits the mask and only `wait_termination` sees them.
    if let Err(e) = signals::block_termination() {
        eprintln!("nl6: cannot block SIGTERM/SIGINT/SIGHUP: {e}");
        return Err(1);
    }
    // A stray SIGPROF or stack-capture signal before the first profile must not kill the process.
    if let Err(e) = nl6_profile::install_signal_handlers() {
        eprintln!("nl6: profiler signal handlers: {e}");
    }
    // What a sampler cannot do (threads it cannot arm, a smaller heap region) is logged as it happens.
    nl6_profile::notes::set_log_sink(|line| eprintln!("nl6: {line}"));
    let config = Config::resolve(args, &|name| std::env::var_os(name).is_some()).map_err(|e| {
        eprintln!("nl6: {e}");
        2
    })?;
    if let Err(e) = sys::raise_nofile_limit() {
        eprintln!("nl6: could not raise the open-file limit: {e}");
    }
    if let Some(rate) = config.heap_rate() {
        nl6_profile::heap::set_rate(rate);
    }
    // Reserved now rather than at the first sample, so a refusal (an address-space limit) is logged at
    // startup; the sampler degrades to the region it got.
    let _ = nl6_profile::heap::reserve_region();
    Ok(config)
}

/// The fleet binds every device socket before anything is served: a port in use stops startup here
/// with the line naming the device, the port and the remedy.
fn start_fleet(config: &Config) -> Result<Arc<crate::lab::Fleet>, i32> {
    let fleet = crate::lab::Fleet::start(config.fleet().clone()).map_err(|e| {
        eprintln!("nl6: {e}");
        // A flag the fleet cannot honour is a usage error; a port or a limit is a resource one.
        if matches!(e, crate::lab::FleetError::Config(_)) {
            2
        } else {
            1
        }
    })?;
    if let Some(warning) = config.fleet().exposure_warning() {
        eprintln!("nl6: {warning}");
    }
    Ok(Arc::new(fleet))
}

/// Binds the listener and starts the server over the API, the console and the lab's routes.
fn bind_server(
    config: &Config,
    gate: &Gate,
    flame: &Arc<CpuSlot>,
    fleet: &Arc<crate::lab::Fleet>,
) -> Result<Server, i32> {
    let failed = |e: std::io::Error| {
        eprintln!("nl6: listen on {}: {e}", config.listen());
        1
    };
    // Bound before the handler is made: the browser checks need the address really bound (port 0).
    let listener = std::net::TcpListener::bind(config.listen()).map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    let mounted = Arc::clone(fleet);
    let api = Arc::new(
        console::mount(Api::new(gate.clone()), flame)
            .with_extension(Box::new(move |req| crate::lab::api::route(req, &mounted)))
            .with_browser_policy(config.browser_policy(bound)),
    );
    let handler: Arc<Handler> = Arc::new(move |req| api.handle(req));
    Server::from_listener(listener, server_config(), handler).map_err(failed)
}

/// The boot line's words for the gate as startup left it.
fn gate_summary(view: &crate::gate::control::GateView) -> String {
    match (&view.server_address, view.enabled) {
        (_, false) => "closed (open: POST /api/v1/profiling or -profiling-pyroscope)".to_string(),
        (Some(a), true) if view.pushing => format!("open, pushing to {a}"),
        (Some(a), true) => format!("open, push to {a} not running"),
        (None, true) => "open, pull-only".to_string(),
    }
}

/// The startup line for a REST API reachable beyond loopback (the default `-port` binds every
/// interface, as the Go original does): the API has no authentication, so say what that allows.
fn exposure_warning(addr: std::net::SocketAddr) -> Option<String> {
    if addr.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "nl6: warning: the REST API on {addr} is reachable beyond loopback and has no authentication: \
         anyone who can reach it can open the profiling gate and redirect the push to their own server \
         (see SECURITY.md; -listen 127.0.0.1:{} keeps it local)",
        addr.port()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    /// Sends `head` (no body) and reads the answer, within 5 s.
    fn answer(server: &Server, head: &str) -> String {
        let mut s = TcpStream::connect(server.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn bodies_over_the_largest_a_route_accepts_are_refused_before_they_are_buffered() {
        let handler: Arc<Handler> = Arc::new(|r| Response::new(200, "text/plain", r.body.clone()));
        let server = Server::bind("127.0.0.1:0", server_config(), handler).unwrap();
        let limit = crate::api::rest::MAX_BODY;
        // Only the head is sent: the refusal must not wait for a body the server will not keep.
        let rest = answer(
            &server,
            &format!(
                "POST /api/v1/profiling HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                limit + 1
            ),
        );
        assert!(rest.starts_with("HTTP/1.1 413 "), "{rest}");
        assert!(
            rest.contains("Content-Type: application/json\r\n"),
            "{rest}"
        );
        let body = rest.split_once("\r\n\r\n").unwrap().1;
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            v["error"],
            format!(
                "request body is {} bytes; the limit is 65536 (64 KiB)",
                limit + 1
            )
        );
        let pull = answer(
            &server,
            "POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",
        );
        assert!(pull.starts_with("HTTP/1.1 413 "), "{pull}");
        assert!(pull.contains("Content-Type: text/plain"), "{pull}");
        server.shutdown();
    }
}
