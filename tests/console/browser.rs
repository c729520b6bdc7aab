//! The console in a real browser: headless Chromium, driven over the Chrome
//! DevTools Protocol, against the real binary.
//!
//! With the gate closed, clicking "CPU profile" shows the server's 503 text; "open pull-only" opens the
//! gate; "heap profile" downloads a file that `go tool pprof` opens; "CPU profile (5 s)" downloads one and
//! shows its flame graph; "wall-clock profile (5 s)" downloads fgprof's shape and switches the flame graph
//! to it, and the chooser switches back to the CPU one; a bad address shows the server's 400 message as it is; the page fits a
//! phone-sized window. Each state is captured under `target/console-screenshots/` for review.
//!
//! Another site cannot do the same: a page served by a tiny HTTP server of this test on another loopback
//! origin tries a `text/plain` fetch POST, a `<form enctype=text/plain>` POST (the body made valid JSON)
//! and a fetch of `/debug/pprof/heap`; the gate stays closed and nothing is read. A DNS-rebound name
//! ([`console_support::REBIND_NAME`]) pointing at nl6's own port gets 421, and the console, which sends
//! `X-Frame-Options: DENY` and a CSP, still runs its script and style.
//!
//! Chromium runs in its own process group with a fresh profile directory; the guards kill that group
//! and the nl6 child (and remove the directory) even when an assertion fails. Every wait is bounded.

use crate::common;
use crate::console_support;

use console_support::{Browser, TempDir, REBIND_NAME};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long any one thing may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
    std::fs::create_dir_all(&dir).expect("create target/console-screenshots");
    dir
}

fn go_pprof_top(file: &Path, work: &Path) -> String {
    common::go_pprof_ok(&[Path::new("-top"), file], work)
}

/// A thread that keeps nl6 busy with requests (bounded to 30 s) until stopped.
struct Busy {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Busy {
    fn start(addr: SocketAddr) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            let mut n = 0;
            while !flag.load(Ordering::SeqCst) && Instant::now() < end {
                let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
                    continue;
                };
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let req = format!(
                    "GET /debug/pprof/heap?debug=1 HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                );
                if s.write_all(req.as_bytes()).is_ok() {
                    common::read_reply(&mut s, false);
                    n += 1;
                }
            }
            n
        });
        Busy {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread; the number of requests it made.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The attacker's page: fires a text/plain fetch POST, a text/plain form POST (in a frame of its own) and
/// a fetch of the heap profile at `nl6`, and records what came of each in `window.results`.
fn evil_page(nl6: &str) -> String {
    format!(
        r#"<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="{nl6}/api/v1/profiling">
<input type="hidden" name='{{"enabled":true,"server_address":"","x":"' value='"}}'>
</form>
<script>
window.results = {{}};
fetch("{nl6}/api/v1/profiling", {{ method: "POST", body: '{{"enabled":true,"server_address":""}}' }})
  .then(r => r.text().then(t => "read " + r.status + " " + t), e => "blocked: " + e)
  .then(v => {{ window.results.post = v; }});
fetch("{nl6}/debug/pprof/heap?debug=1")
  .then(r => r.text().then(t => "read " + r.status + " " + t.slice(0, 40)), e => "blocked: " + e)
  .then(v => {{ window.results.heap = v; }});
document.getElementById("f").submit();
window.results.form = "submitted";
</script></body></html>"#
    )
}

/// Serves `page` to every GET on a free 127.0.0.1 port (another origin than nl6's) until `stop`, for at
/// most 60 s. Returns its base URL.
fn serve_evil_page(page: String, stop: Arc<AtomicBool>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(60);
        while !stop.load(Ordering::SeqCst) && Instant::now() < end {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                page.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(page.as_bytes());
        }
    });
    base
}

#[test]
fn another_origin_can_neither_open_the_gate_nor_read_a_profile() {
    let nl6 = common::boot().start();
    let base = format!("http://{}", nl6.addr);
    let tmp = TempDir::new("nl6-console-evil");
    let mut b = Browser::launch(&tmp.path().join("profile"), WAIT);
    let stop = Arc::new(AtomicBool::new(false));
    let evil = serve_evil_page(evil_page(&base), Arc::clone(&stop));
    assert_ne!(evil, base);
    b.navigate(&format!("{evil}/"));
    b.wait_eval(
        WAIT,
        "!!(window.results && window.results.post && window.results.heap && window.results.form)",
    );
    let results = b.eval("JSON.stringify(window.results)");
    // Give the form's navigation time to land before looking at the gate.
    std::thread::sleep(Duration::from_millis(500));
    let state = common::json(&nl6.http("GET", "/api/v1/profiling", b"").2);
    assert_eq!(
        state["data"]["enabled"], false,
        "{state}; page saw {results}"
    );
    let r: serde_json::Value = serde_json::from_str(results.as_str().unwrap()).unwrap();
    for key in ["post", "heap"] {
        let v = r[key].as_str().unwrap();
        assert!(v.starts_with("blocked"), "{key}: {v}");
    }
    // The gate open, a page on a rebound name at nl6's own port and address: 421, no profile.
    nl6.open_pull_only();
    let rebound = format!(
        "http://{REBIND_NAME}:{}/debug/pprof/heap?debug=1",
        nl6.addr.port()
    );
    b.navigate(&rebound);
    let text = b
        .eval("document.body.innerText")
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        text.contains("not a name nl6 answers as") && !text.contains("heap profile"),
        "{text}"
    );
    // The console itself, framed by nobody, still runs its script and style under its CSP.
    b.navigate(&format!("{base}/"));
    b.wait_text("gate-state", WAIT, |t| t == "open (pull-only)");
    assert_eq!(
        b.eval("getComputedStyle(document.body).backgroundColor"),
        "rgb(244, 245, 247)",
        "console.css applies"
    );
    stop.store(true, Ordering::SeqCst);
    b.close();
}

#[test]
fn console_drives_the_gate_and_the_profiles_in_headless_chromium() {
    let shots = screenshot_dir();
    let nl6 = common::boot().start();
    let base = format!("http://{}", nl6.addr);
    let tmp = TempDir::new("nl6-console");
    let downloads = tmp.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let mut b = Browser::launch(&tmp.path().join("profile"), WAIT);

    // Desktop window; the page loads and shows the closed gate.
    b.viewport(1280, 900, 1.0, false);
    b.navigate(&format!("{base}/"));
    b.wait_text("gate-state", WAIT, |t| t == "closed");
    b.screenshot(&shots.join("01-closed.png"));

    // The binary boots its lab fleet (4 devices by default): the devices panel appears once the
    // fleet API answers 200.
    assert_eq!(nl6.http("GET", "/api/v1/devices", b"").0, 200);
    b.wait_eval(WAIT, "!document.getElementById('devices-panel').hidden");

    // Gate closed: "CPU profile" says so in the page, not a silent download, and points at the page's
    // own "open pull-only" button rather than the server's curl line.
    let (status, _, _) = nl6.http("GET", "/debug/pprof/profile?seconds=5", b"");
    assert_eq!(status, 503);
    b.click("cpu-profile");
    let shown = b.wait_text("profile-message", WAIT, |t| t.contains("gate is closed"));
    assert!(
        shown.contains("\u{201c}open pull-only\u{201d}") && !shown.contains("curl"),
        "page shows {shown:?}"
    );
    assert_eq!(b.eval("document.activeElement.id"), "open-pull");
    assert_eq!(
        b.eval("document.getElementById('open-pull').classList.contains('attention')"),
        true
    );
    assert_eq!(
        b.eval("document.getElementById('profile-message').className"),
        "message error"
    );
    assert_eq!(
        b.eval("document.getElementById('flame-panel').hidden"),
        true,
        "no flame graph before any CPU profile"
    );
    assert_eq!(
        nl6.http("GET", "/api/v1/profiling/flamegraph.svg", b"").0,
        404
    );
    b.screenshot(&shots.join("02-cpu-refused-503.png"));

    // Open the gate from the page.
    b.click("open-pull");
    b.wait_text("gate-state", WAIT, |t| t == "open (pull-only)");
    let rest = common::json(&nl6.http("GET", "/api/v1/profiling", b"").2);
    assert_eq!(rest["data"]["enabled"], true, "{rest}");
    assert_eq!(rest["data"]["server_address"], "", "{rest}");
    b.screenshot(&shots.join("03-open-pull-only.png"));

    // "heap profile" downloads a .pb.gz that go tool pprof opens.
    b.allow_downloads(&downloads);
    b.click("heap-profile");
    let heap = b.wait_download(&downloads.join("heap.pb.gz"), WAIT);
    let top = go_pprof_top(&heap, tmp.path());
    assert!(
        top.contains("Type: inuse_space"),
        "go tool pprof -top:\n{top}"
    );
    b.wait_text("profile-message", WAIT, |t| {
        t.starts_with("downloaded heap.pb.gz")
    });
    b.screenshot(&shots.join("04-heap-downloaded.png"));

    // "CPU profile (5 s)" downloads a CPU profile and shows its flame graph; requests keep nl6 busy
    // meanwhile so the profile has samples to draw.
    let busy = Busy::start(nl6.addr);
    b.click("cpu-profile");
    let cpu = b.wait_download(&downloads.join("cpu.pb.gz"), WAIT + Duration::from_secs(5));
    let requests = busy.stop();
    assert!(requests > 0, "the load thread made no request");
    let top = go_pprof_top(&cpu, tmp.path());
    assert!(top.contains("Type: cpu"), "go tool pprof -top:\n{top}");
    b.wait_eval(
        WAIT,
        "(() => { const i = document.getElementById('flame-img'); \
         return !document.getElementById('flame-panel').hidden && i.complete && i.naturalWidth > 0; })()",
    );
    let (status, headers, svg) = nl6.http("GET", "/api/v1/profiling/flamegraph.svg", b"");
    assert_eq!(status, 200);
    assert_eq!(
        common::header(&headers, "content-type"),
        Some("image/svg+xml")
    );
    let svg = String::from_utf8_lossy(&svg);
    assert!(svg.contains("nl6 CPU profile"), "{svg}");
    assert!(
        !svg.contains("no samples") && svg.contains("nl6::"),
        "the flame graph of a busy server shows nl6's frames: {svg}"
    );
    // The caption says where the profile came from; the box splits it into one tower per subsystem.
    let caption = b.wait_text("flame-source", WAIT, |t| !t.is_empty());
    assert!(
        caption.starts_with("nl6 CPU profile, ")
            && caption.contains("from GET /debug/pprof/profile"),
        "{caption}"
    );
    b.scroll_to("flame-panel");
    b.screenshot(&shots.join("05-cpu-flamegraph.png"));
    b.click("flame-split");
    b.wait_eval(
        WAIT,
        "(() => { const i = document.getElementById('flame-img'); \
         return i.src.includes('by=subsystem') && i.complete && i.naturalWidth > 0; })()",
    );
    let (_, _, split) = nl6.http("GET", "/api/v1/profiling/flamegraph.svg?by=subsystem", b"");
    assert!(
        String::from_utf8_lossy(&split).contains("subsystem="),
        "one tower per subsystem"
    );
    b.screenshot(&shots.join("05b-cpu-flamegraph-by-subsystem.png"));

    // "wall-clock profile (5 s)" downloads fgprof's shape (go tool pprof reads its `time` type) and
    // switches the flame graph to it; the chooser switches back to the CPU one, which is still kept.
    b.click("flame-split");
    b.click("wall-profile");
    let wall = b.wait_download(&downloads.join("wall.pb.gz"), WAIT + Duration::from_secs(5));
    let top = go_pprof_top(&wall, tmp.path());
    assert!(top.contains("Type: time"), "go tool pprof -top:\n{top}");
    b.wait_eval(
        WAIT,
        "(() => { const i = document.getElementById('flame-img'); \
         return i.src.includes('profile=wall') && i.complete && i.naturalWidth > 0; })()",
    );
    assert_eq!(
        b.eval("document.getElementById('flame-kind').value"),
        "wall"
    );
    let caption = b.wait_text("flame-source", WAIT, |t| t.contains("wall-clock"));
    assert!(
        caption.starts_with("nl6 wall-clock profile, ")
            && caption.contains("from GET /debug/fgprof"),
        "{caption}"
    );
    let (status, _, svg) = nl6.http("GET", "/api/v1/profiling/flamegraph.svg?profile=wall", b"");
    assert_eq!(status, 200);
    let svg = String::from_utf8_lossy(&svg);
    assert!(
        svg.contains("nl6 wall-clock profile") && svg.contains("time:"),
        "the wall-clock flame graph draws the time type: {svg}"
    );
    b.scroll_to("flame-panel");
    b.screenshot(&shots.join("05c-wall-flamegraph.png"));
    b.eval(
        "(() => { const k = document.getElementById('flame-kind'); k.value = 'cpu'; \
         k.dispatchEvent(new Event('change')); return true; })()",
    );
    b.wait_eval(
        WAIT,
        "(() => { const i = document.getElementById('flame-img'); \
         return !i.src.includes('profile=wall') && i.complete && i.naturalWidth > 0; })()",
    );
    b.wait_text("flame-source", WAIT, |t| t.starts_with("nl6 CPU profile, "));

    // A refused POST: the page shows the server's message exactly.
    let bad = "ftp://pyroscope.invalid:4040";
    let (status, _, body) = nl6.http(
        "POST",
        "/api/v1/profiling",
        format!("{{\"enabled\":true,\"server_address\":\"{bad}\"}}").as_bytes(),
    );
    assert_eq!(status, 400);
    let server_error = common::json(&body)["error"]
        .as_str()
        .expect("error text")
        .to_string();
    b.scroll_to("gate-panel");
    b.type_into("gate-address", bad);
    b.click("open-push");
    let shown = b.wait_text("gate-message", WAIT, |t| t.starts_with("400"));
    assert_eq!(shown, format!("400: {server_error}"));
    b.wait_text("gate-state", WAIT, |t| t == "open (pull-only)");
    b.screenshot(&shots.join("06-bad-address-400.png"));

    // Open with an address (a loopback port nothing listens on): the state names it.
    let target = common::unused_loopback_url();
    b.type_into("gate-address", &target);
    b.click("open-push");
    let state = b.wait_text("gate-state", WAIT, |t| t.starts_with("open, push"));
    assert_eq!(state, format!("open, pushing to {target}"));
    b.screenshot(&shots.join("07-open-pushing.png"));

    // Close from the page.
    b.click("close-gate");
    b.wait_text("gate-state", WAIT, |t| t == "closed");
    let rest = common::json(&nl6.http("GET", "/api/v1/profiling", b"").2);
    assert_eq!(rest["data"]["enabled"], false, "{rest}");

    // Phone-sized window: nothing wider than the screen, the buttons on screen, full-page screenshot.
    b.viewport(390, 844, 2.0, true);
    b.navigate(&format!("{base}/"));
    b.wait_text("gate-state", WAIT, |t| t == "closed");
    b.wait_eval(WAIT, "!document.getElementById('flame-panel').hidden");
    assert_eq!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        true,
        "the page scrolls sideways at 390 px: scrollWidth {}",
        b.eval("document.documentElement.scrollWidth")
    );
    for id in [
        "open-pull",
        "close-gate",
        "open-push",
        "heap-profile",
        "cpu-profile",
        "wall-profile",
    ] {
        let fits = b.eval(&format!(
            "(() => {{ const r = document.getElementById('{id}').getBoundingClientRect(); \
             return r.left >= 0 && r.right <= window.innerWidth && r.height >= 32; }})()"
        ));
        assert_eq!(fits, true, "button {id} does not fit a phone-sized window");
    }
    b.screenshot_full_page(&shots.join("08-phone.png"));

    b.close();
}
