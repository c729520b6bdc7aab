//! Shared by the hardening tests: a deterministic seeded generator of hostile inputs (no crates) and a
//! TCP listener that resets a connection mid-body, and ([`watch`]) a probe of the binary under a flood
//! (`/proc` readers and `wait_until` are in tests/common).
//!
//! Only loopback; every loop is bounded; nothing here kills a process.
#![allow(dead_code)]

pub mod watch;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// SplitMix64: tiny, seeded, reproducible (a failing case prints its seed and index).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// `min..max` random bytes.
    pub fn some_bytes(&mut self, min: usize, max: usize) -> Vec<u8> {
        let n = min + self.below(max - min);
        self.bytes(n)
    }
}

/// Numbers that break naive parsers.
pub const HUGE_NUMBERS: &[&str] = &[
    "1e309",
    "-1e309",
    "1e-400",
    "123456789012345678901234567890",
    "-9223372036854775809",
    "18446744073709551616",
    "-0",
    "0.0000000000000000000001",
    "9007199254740993",
    "1E400",
];

/// Go duration strings, valid and not.
pub const DURATIONS: &[&str] = &[
    "30m",
    "1h30m",
    "90s",
    "500ms",
    "1ns",
    "2562047h47m16.854775807s",
    "2562047h47m16.854775808s",
    "9999999999999999999h",
    "-5s",
    "0",
    "0s",
    "",
    "30",
    "1e309s",
    "1.5h",
    ".5s",
    "5.s",
    "1d",
    "µs",
    "1µs",
    "1us",
    "+5s",
    "5s5s5s",
    "NaN",
    "inf",
    "1h-1m",
    " 5s",
];

/// Push addresses, valid and not. The in-process fake pusher refuses to start hosts containing `fail`.
pub const ADDRESSES: &[&str] = &[
    "",
    "http://127.0.0.1:4040",
    "https://127.0.0.1:4040/",
    "http://flag.example:4040",
    "HTTP://FLAG.EXAMPLE:4040/",
    "http://other.example:4040/prefix",
    "http://fail.example:1",
    "ftp://127.0.0.1",
    "http://user:pass@127.0.0.1:4040",
    "http://127.0.0.1:4040?x=1",
    "http://127.0.0.1:4040#f",
    "http://",
    "127.0.0.1:4040",
    "http://[::1",
    "http://127.0.0.1:99999",
    "http:// 127.0.0.1",
    "javascript:alert(1)",
    "\u{0}",
    "http://\u{202e}example",
];

/// One random JSON value as text, up to `depth` levels of nesting.
pub fn json_value(r: &mut Rng, depth: usize) -> String {
    let choice = if depth == 0 { r.below(6) } else { r.below(8) };
    match choice {
        0 => "null".into(),
        1 => r.pick(&["true", "false"]).to_string(),
        2 => (r.next() as i64).to_string(),
        3 => r.pick(HUGE_NUMBERS).to_string(),
        4 => json_string(r),
        5 => format!("{:?}", r.pick(DURATIONS)),
        6 => {
            let n = r.below(4);
            let items: Vec<String> = (0..n).map(|_| json_value(r, depth - 1)).collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let n = r.below(4);
            let items: Vec<String> = (0..n)
                .map(|_| format!("{}:{}", json_key(r), json_value(r, depth - 1)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// A key: mostly the three real ones, sometimes near misses or junk.
pub fn json_key(r: &mut Rng) -> String {
    let keys = [
        "enabled",
        "server_address",
        "duration",
        "Enabled",
        "enabled ",
        "basic_auth",
        "",
        "\u{0}",
        "durations",
        "server-address",
    ];
    if r.chance(80) {
        format!("{:?}", r.pick(&keys))
    } else {
        json_string(r)
    }
}

/// A JSON string literal with escapes, unicode and the odd control character.
pub fn json_string(r: &mut Rng) -> String {
    let parts = [
        "a",
        "\\u0000",
        "\\ud800",
        "\\\"",
        "é",
        "\\n",
        "http://127.0.0.1:1",
        "%00",
        "𝄞",
        "\\uDFFF",
    ];
    let n = r.below(6);
    let inner: String = (0..n).map(|_| *r.pick(&parts)).collect();
    format!("\"{inner}\"")
}

/// A POST /api/v1/profiling body: one of eight families (random JSON, well-formed objects with wrong
/// types, huge numbers, deep nesting, invalid UTF-8, byte mutations of valid bodies, duplicate keys, huge
/// bodies). `huge_percent` tunes how often bodies above 64 KiB appear (they are slow to build).
pub fn post_body(r: &mut Rng, huge_per_mille: usize) -> Vec<u8> {
    if r.below(1000) < huge_per_mille {
        let size: usize = *r.pick(&[64 * 1024, 64 * 1024 + 1, 100_000, 300_000]);
        let mut b = br#"{"enabled":true,"server_address":""#.to_vec();
        while b.len() < size.saturating_sub(2) {
            b.push(b'a');
        }
        b.extend_from_slice(b"\"}");
        return b;
    }
    match r.below(8) {
        0 => json_value(r, 4).into_bytes(),
        1 => shaped_object(r).into_bytes(),
        2 => {
            let field = r.pick(&["enabled", "server_address", "duration"]);
            format!(r#"{{"enabled":true,"{field}":{}}}"#, r.pick(HUGE_NUMBERS)).into_bytes()
        }
        3 => {
            let depth = *r.pick(&[64, 127, 128, 129, 1000, 20_000]);
            let (open, close) = if r.chance(50) {
                ("[", "]")
            } else {
                (r#"{"enabled":"#, "}")
            };
            let mut s = open.repeat(depth);
            s.push_str("true");
            s.push_str(&close.repeat(if r.chance(80) { depth } else { depth / 2 }));
            s.into_bytes()
        }
        4 => {
            let mut b = shaped_object(r).into_bytes();
            if b.is_empty() {
                b.push(b'{');
            }
            let at = r.below(b.len());
            let bad: &[&[u8]] = &[
                b"\xff",
                b"\xc0\x80",
                b"\xed\xa0\x80",
                b"\xf4\x90\x80\x80",
                b"\x80",
            ];
            b.splice(at..at, r.pick(bad).iter().copied());
            b
        }
        5 => {
            let mut b = shaped_object(r).into_bytes();
            for _ in 0..1 + r.below(4) {
                mutate(r, &mut b);
            }
            b
        }
        6 => format!(
            r#"{{"enabled":{},"enabled":{}{}}}"#,
            r.pick(&["true", "false", "1"]),
            r.pick(&["true", "false", "null"]),
            if r.chance(50) {
                r#","duration":"1s""#
            } else {
                ""
            }
        )
        .into_bytes(),
        _ => {
            let n = r.below(64);
            r.bytes(n)
        }
    }
}

/// `{"enabled":…,"server_address":…,"duration":…}` with each field present or not, well- or ill-typed.
pub fn shaped_object(r: &mut Rng) -> String {
    let mut fields = Vec::new();
    if r.chance(85) {
        let v = if r.chance(75) {
            r.pick(&["true", "false"]).to_string()
        } else {
            json_value(r, 1)
        };
        fields.push(format!(r#""enabled":{v}"#));
    }
    if r.chance(50) {
        let v = if r.chance(75) {
            format!("{:?}", r.pick(ADDRESSES))
        } else {
            json_value(r, 1)
        };
        fields.push(format!(r#""server_address":{v}"#));
    }
    if r.chance(40) {
        let v = if r.chance(75) {
            format!("{:?}", r.pick(DURATIONS))
        } else {
            json_value(r, 1)
        };
        fields.push(format!(r#""duration":{v}"#));
    }
    if r.chance(10) {
        fields.push(format!("{}:{}", json_key(r), json_value(r, 1)));
    }
    let n = fields.len();
    for i in 0..n {
        let j = r.below(n);
        fields.swap(i, j);
    }
    format!("{{{}}}", fields.join(","))
}

/// One byte-level mutation: flip, insert, delete, duplicate a slice, or truncate.
pub fn mutate(r: &mut Rng, b: &mut Vec<u8>) {
    if b.is_empty() {
        b.push(r.next() as u8);
        return;
    }
    let at = r.below(b.len());
    match r.below(5) {
        0 => b[at] ^= 1 << r.below(8),
        1 => {
            let c = *r.pick(b"{}[]\",:\\0123456789eE+-.tfn \xff");
            b.insert(at, c)
        }
        2 => {
            b.remove(at);
        }
        3 => {
            let end = (at + 1 + r.below(8)).min(b.len());
            let piece = b[at..end].to_vec();
            b.splice(at..at, piece);
        }
        _ => b.truncate(at),
    }
}

/// A listener on 127.0.0.1:0 that reads a request head and part of its body (`read_bytes` in all), then
/// resets the connection (SO_LINGER 0, so the peer sees ECONNRESET mid-body). Counts connections.
pub struct ResetServer {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl ResetServer {
    pub fn start(read_bytes: usize) -> ResetServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, flag) = (connections.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut got = 0;
                let mut chunk = [0u8; 1024];
                while got < read_bytes {
                    match s.read(&mut chunk[..(read_bytes - got).min(1024)]) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    }
                }
                set_linger_zero(&s);
                drop(s); // RST: unread data plus linger 0
            }
        });
        ResetServer {
            addr,
            connections,
            stop,
            handle: Some(handle),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ResetServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// SO_LINGER {on, 0}: close sends RST instead of FIN (std's `set_linger` is unstable).
fn set_linger_zero(s: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the fd is a live socket owned by `s`; `linger` is a valid, correctly sized option value.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt(SO_LINGER)");
}
