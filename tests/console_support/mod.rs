//! Headless Chromium for the console tests, driven over the Chrome DevTools Protocol (CDP).
//!
//! - [`Browser::launch`] starts Debian's `chromium` headless with a fresh profile directory and
//!   `--remote-debugging-port=0`, reads the port it chose from `DevToolsActivePort`, connects one
//!   WebSocket (the `tungstenite` crate, synchronous) to the browser endpoint and attaches to a new page
//!   in flat mode (page commands carry a `sessionId`).
//! - Helpers click elements with real mouse events, type text, evaluate JavaScript, wait (bounded) for
//!   text or a condition, allow downloads into a directory and write screenshots.
//! - Dropping a [`Browser`] kills Chromium's process group (it runs in its own, so only processes this
//!   test started are killed); dropping a [`TempDir`] removes it.
//!
//! Talks only to 127.0.0.1 ([`REBIND_NAME`] resolves there too); Chromium is started with its background
//! networking off.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tungstenite::{Message, WebSocket};

/// Debian's Chromium (scripts/setup.sh installs it).
const CHROMIUM: &str = "chromium";

/// A DNS name this Chromium resolves to 127.0.0.1 (`--host-resolver-rules`): what a rebinding attack
/// makes of the attacker's own name.
pub const REBIND_NAME: &str = "rebind.nl6.test";

/// How long one CDP command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Chromium's process group, killed on drop.
struct ChromiumProcess {
    child: Child,
}

impl Drop for ChromiumProcess {
    fn drop(&mut self) {
        // The group id is the child's pid (process_group(0)): renderers and helpers go with it.
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium with one page attached over CDP.
pub struct Browser {
    ws: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    /// Declared last: dropped after the socket.
    process: ChromiumProcess,
}

impl Browser {
    /// Starts Chromium with its profile in `profile_dir` and attaches to a blank page, within `limit`.
    pub fn launch(profile_dir: &Path, limit: Duration) -> Browser {
        std::fs::create_dir_all(profile_dir).expect("create the Chromium profile dir");
        let mut cmd = Command::new(CHROMIUM);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            "--hide-scrollbars",
            // A name that resolves to loopback, as a DNS rebinding makes an attacker's name do.
            &format!("--host-resolver-rules=MAP {REBIND_NAME} 127.0.0.1"),
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
        let child = cmd
            .spawn()
            .expect("start chromium (scripts/setup.sh installs Debian's chromium)");
        let mut process = ChromiumProcess { child };

        // DevToolsActivePort: the port on line 1, the browser endpoint's path on line 2.
        let port_file = profile_dir.join("DevToolsActivePort");
        let end = Instant::now() + limit;
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    if let Ok(port) = port.trim().parse::<u16>() {
                        break (port, path.trim().to_string());
                    }
                }
            }
            if let Some(status) = process.child.try_wait().expect("try_wait chromium") {
                panic!("chromium exited before opening its DevTools port: {status}");
            }
            assert!(
                Instant::now() < end,
                "chromium wrote no DevToolsActivePort within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };

        let stream = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(5),
        )
        .expect("connect to chromium's DevTools port");
        // The handshake gets a generous read timeout (a loaded machine answers slowly); afterwards reads
        // poll every 250 ms so waits stay bounded by the caller's deadline.
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (ws, _) = tungstenite::client::client(url.as_str(), stream)
            .unwrap_or_else(|e| panic!("WebSocket handshake with {url}: {e}"));
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        let mut b = Browser {
            ws,
            session: String::new(),
            next_id: 0,
            process,
        };
        let target = b.browser_call("Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().expect("targetId").to_string();
        let attached = b.browser_call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_string();
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b
    }

    /// Sends one command (to the page when `session` is set) and waits for its answer; events are skipped.
    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .unwrap_or_else(|e| panic!("CDP send {method}: {e}"));
        let end = Instant::now() + COMMAND_TIMEOUT;
        loop {
            assert!(
                Instant::now() < end,
                "CDP {method}: no answer within {COMMAND_TIMEOUT:?}"
            );
            let frame = match self.ws.read() {
                Ok(f) => f,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => panic!("CDP {method}: {e}"),
            };
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(text.as_str()).expect("CDP message is JSON");
            if v["id"].as_u64() != Some(id) {
                continue;
            }
            if let Some(err) = v.get("error") {
                panic!("CDP {method} failed: {err}");
            }
            return v["result"].clone();
        }
    }

    /// A browser-level command.
    pub fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A page-level command.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(method, params, Some(&session))
    }

    /// Evaluates `expr` in the page (promises awaited) and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("evaluating {expr:?} threw: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is true.
    pub fn wait_eval(&mut self, limit: Duration, expr: &str) {
        let end = Instant::now() + limit;
        while self.eval(expr) != Value::Bool(true) {
            assert!(Instant::now() < end, "not true within {limit:?}: {expr}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The text of the element with id `id` (empty when it does not exist).
    pub fn text(&mut self, id: &str) -> String {
        self.eval(&format!(
            "(document.getElementById('{id}') || {{}}).textContent || ''"
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// Waits until the text of `id` satisfies `ok`, and returns it.
    pub fn wait_text(&mut self, id: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + limit;
        loop {
            let t = self.text(id);
            if ok(&t) {
                return t;
            }
            assert!(
                Instant::now() < end,
                "#{id} never reached the expected text within {limit:?}; last: {t:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Loads `url` and waits for the document to finish loading.
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({ "url": url }));
        if let Some(e) = r.get("errorText") {
            panic!("navigating to {url}: {e}");
        }
        self.wait_eval(
            COMMAND_TIMEOUT,
            &format!(
                "location.href === {} && document.readyState === 'complete'",
                json!(url)
            ),
        );
    }

    /// Sets the viewport (CSS pixels) and whether the page is a mobile one.
    pub fn viewport(&mut self, width: u32, height: u32, scale: f64, mobile: bool) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile }),
        );
    }

    /// Scrolls the element with id `id` into view.
    pub fn scroll_to(&mut self, id: &str) {
        self.eval(&format!(
            "document.getElementById('{id}').scrollIntoView({{block: 'start'}})"
        ));
    }

    /// Clicks the element with id `id` with real mouse events at its centre (so it must be visible and
    /// on top), after scrolling it into view.
    pub fn click(&mut self, id: &str) {
        let rect = self.eval(&format!(
            "(() => {{ const e = document.getElementById('{id}'); e.scrollIntoView({{block: 'center'}}); \
             const r = e.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2; \
             const top = document.elementFromPoint(x, y); \
             return {{ x, y, onTop: top === e || e.contains(top), disabled: !!e.disabled }}; }})()"
        ));
        assert_eq!(
            rect["onTop"], true,
            "#{id} is covered or off screen: {rect}"
        );
        assert_eq!(rect["disabled"], false, "#{id} is disabled");
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": rect["x"], "y": rect["y"], "button": "left", "clickCount": 1 }),
            );
        }
    }

    /// Focuses the input `id`, clears it and types `text`.
    pub fn type_into(&mut self, id: &str, text: &str) {
        self.eval(&format!(
            "(() => {{ const e = document.getElementById('{id}'); e.focus(); e.value = ''; }})()"
        ));
        self.call("Input.insertText", json!({ "text": text }));
        let got = self.eval(&format!("document.getElementById('{id}').value"));
        assert_eq!(got, json!(text), "typing into #{id}");
    }

    /// Lets the page download files into `dir`.
    pub fn allow_downloads(&mut self, dir: &Path) {
        self.browser_call(
            "Browser.setDownloadBehavior",
            json!({ "behavior": "allow", "downloadPath": dir.to_str().expect("UTF-8 path") }),
        );
    }

    /// Waits until `file` exists with content and no download of it is in progress; returns its path.
    pub fn wait_download(&mut self, file: &Path, limit: Duration) -> PathBuf {
        let end = Instant::now() + limit;
        let partial = |dir: &Path| {
            std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .any(|e| e.file_name().to_string_lossy().ends_with(".crdownload"))
                })
                .unwrap_or(false)
        };
        let dir = file.parent().expect("download dir");
        loop {
            let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            if size > 0 && !partial(dir) {
                return file.to_path_buf();
            }
            assert!(
                Instant::now() < end,
                "{} was not downloaded within {limit:?}; the page says {:?}; the directory holds {:?}",
                file.display(),
                self.text("profile-message"),
                std::fs::read_dir(dir)
                    .map(|rd| rd
                        .filter_map(Result::ok)
                        .map(|e| e.file_name())
                        .collect::<Vec<_>>())
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Writes a PNG of the viewport.
    pub fn screenshot(&mut self, file: &Path) {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        write_png(file, &r);
    }

    /// Writes a PNG of the whole page, beyond the viewport.
    pub fn screenshot_full_page(&mut self, file: &Path) {
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let size = &m["cssContentSize"];
        let r = self.call(
            "Page.captureScreenshot",
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": { "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 },
            }),
        );
        write_png(file, &r);
    }

    /// Closes the browser politely (the guard kills whatever is left).
    pub fn close(mut self) {
        let _ = self.ws.send(Message::text(
            json!({ "id": u64::MAX, "method": "Browser.close", "params": {} }).to_string(),
        ));
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.process.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn write_png(file: &Path, result: &Value) {
    let data = result["data"].as_str().expect("screenshot data");
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("screenshot data is base64");
    assert!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
    std::fs::write(file, png).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
}
