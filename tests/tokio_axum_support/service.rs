//! A tokio multi-thread + axum service profiled by nl6-profile, as the crate's README tells an embedder:
//! the sampling allocator, the pool hooks, labels per request across `.await`, and `/debug/pprof/`
//! answered without blocking a runtime worker; with `PUSH_TO=<url>`, continuous profiling through
//! nl6-push instead (`GET /push/stop` flushes it and answers its counts); with `FOREIGN_SIGPROF=1`, a
//! SIGPROF handler of its own installed first, which the engine must refuse. Built and driven by
//! tests/engine/tokio_axum.rs.
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use nl6_profile::heap::SamplingAllocator;
use nl6_profile::labels::{LabelSet, LabelledFuture};
use nl6_profile::pull::{PullRequest, PullSurface};
use nl6_profile::threads;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: SamplingAllocator = SamplingAllocator::system();

#[inline(never)]
fn spin(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < end {
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    black_box(x)
}

// Distinct arithmetic after the call: neither is a tail call (its frame stays on the stack) nor folded
// into the other by the compiler's merging of identical functions.
#[inline(never)]
fn burn_route_a() -> u64 {
    spin(Duration::from_millis(4)).wrapping_mul(3)
}

#[inline(never)]
fn burn_route_b() -> u64 {
    spin(Duration::from_millis(4)).wrapping_add(5)
}

/// CPU-busy in slices, yielding between them, so tasks interleave on the workers and resume on others.
async fn busy(Path(route): Path<String>) -> String {
    let labels = LabelSet::new([("route", route.as_str()), ("handler", "busy")]);
    async move {
        let mut acc = 0u64;
        for _ in 0..10 {
            acc ^= if route == "a" {
                burn_route_a()
            } else {
                burn_route_b()
            };
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        acc.to_string()
    }
    .with_labels(labels)
    .await
}

#[inline(never)]
fn alloc_heavy() -> usize {
    let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1 << 20]).collect();
    black_box(blocks.iter().map(|b| b.len()).sum())
}

async fn alloc() -> String {
    alloc_heavy().to_string()
}

async fn pprof(
    State(surface): State<Arc<PullSurface>>,
    method: Method,
    path: Option<Path<String>>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let path = path.map(|Path(p)| p).unwrap_or_default();
    let query = query.unwrap_or_default();
    let req = PullRequest::new(method.as_str(), &path, &query, &body);
    let answer = surface.handle_async(&req).await;
    let mut resp = (StatusCode::from_u16(answer.status).unwrap(), answer.body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static(answer.content_type),
    );
    for (name, value) in &answer.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(*name),
            HeaderValue::try_from(value.as_str()),
        ) {
            headers.insert(n, v);
        }
    }
    resp
}

/// Another owner's SIGPROF handler (a competing profiler, say).
extern "C" fn their_sigprof(_: libc::c_int) {}

/// The running push, stopped (and flushed) by `GET /push/stop`.
static PUSH: Mutex<Option<nl6_push::Push>> = Mutex::new(None);

async fn stop_push() -> String {
    let push = PUSH.lock().unwrap().take();
    let Some(push) = push else {
        return "no push".to_string();
    };
    let (flushed, status) =
        tokio::task::spawn_blocking(move || push.stop_with_status(Duration::from_secs(10)))
            .await
            .unwrap();
    format!(
        "flushed={flushed} uploads={} sdk_errors={} last_error={:?}",
        status.uploads, status.sdk_errors, status.last_error
    )
}

fn main() {
    if std::env::var_os("FOREIGN_SIGPROF").is_some() {
        // SAFETY: installs a handler that does nothing, before any other thread exists.
        unsafe { libc::signal(libc::SIGPROF, their_sigprof as libc::sighandler_t) };
    }
    if let Err(e) = nl6_profile::install_signal_handlers() {
        eprintln!("profiling refused: {e}");
        std::process::exit(3);
    }
    if let Some(url) = std::env::var_os("PUSH_TO") {
        let config = nl6_push::PushConfig::new("tokio-axum-profiled");
        let target = nl6_push::Target::new(url.to_string_lossy(), Duration::from_secs(1));
        let push = nl6_push::Pusher::new(config).start(target).expect("push start");
        *PUSH.lock().unwrap() = Some(push);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(threads::on_thread_start)
        .on_thread_stop(threads::on_thread_stop)
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let surface = Arc::new(PullSurface::new());
        let app = Router::new()
            .route("/busy/{route}", get(busy))
            .route("/alloc", get(alloc))
            .route("/push/stop", get(stop_push))
            .route("/debug/pprof/", get(pprof))
            .route("/debug/pprof/{*path}", get(pprof).post(pprof))
            .with_state(surface);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!("listening on {}", listener.local_addr().unwrap());
        axum::serve(listener, app).await.expect("serve");
    });
}
