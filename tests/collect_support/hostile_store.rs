//! A scripted S3-compatible store on 127.0.0.1 for the hostile-store tests: every request is recorded
//! (method, raw target, headers, body) and answered by the test's handler, which starts from
//! [`well_behaved`] (listings, PUTs with the body's MD5 as ETag, DELETEs, no lifecycle) and changes what
//! it wants. It verifies no signature: the tests read what the collector sent. Every connection is one
//! request (`Connection: close`); the server stops when dropped, after 120 s, or after
//! [`MAX_REQUESTS`] requests. It kills no process.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most requests one store answers (an endless listing stops being answered here).
pub const MAX_REQUESTS: usize = 20_000;

/// One request as the store received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target exactly as sent: path and query, still percent-encoded.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// A query parameter's raw (still encoded) value.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query()
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A ListObjectsV2 request (not the lifecycle GET, not an object GET).
    pub fn is_list(&self) -> bool {
        self.method == "GET" && self.param("list-type") == Some("2")
    }

    pub fn is_lifecycle(&self) -> bool {
        self.query()
            .split('&')
            .any(|kv| kv == "lifecycle" || kv == "lifecycle=")
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn with(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// An S3 error document.
pub fn s3_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::new(
        status,
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"),
    )
    .with("content-type", "application/xml")
}

/// A ListObjectsV2 page of `keys` (inserted as given: the caller escapes what XML needs), truncated
/// with `next` as its continuation token when given.
pub fn listing(keys: &[String], next: Option<&str>) -> Reply {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>fleet</Name><Prefix></Prefix>",
    );
    xml.push_str(&format!(
        "<KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys>",
        keys.len()
    ));
    match next {
        Some(t) => xml.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>{t}</NextContinuationToken>"
        )),
        None => xml.push_str("<IsTruncated>false</IsTruncated>"),
    }
    for k in keys {
        xml.push_str(&format!(
            "<Contents><Key>{k}</Key><LastModified>2020-01-01T00:00:00.000Z</LastModified><ETag>\"d41d8cd98f00b204e9800998ecf8427e\"</ETag><Size>2</Size><StorageClass>STANDARD</StorageClass></Contents>"
        ));
    }
    xml.push_str("</ListBucketResult>");
    Reply::new(200, xml).with("content-type", "application/xml")
}

/// The body's MD5 as S3 gives it in an ETag: lower-case hex in quotes.
pub fn etag_of(body: &[u8]) -> String {
    use md5::Digest as _;
    let hex: String = md5::Md5::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{hex}\"")
}

/// What a store that keeps everything would answer (nothing is kept: listings are empty).
pub fn well_behaved(req: &Request) -> Reply {
    match req.method.as_str() {
        "GET" if req.is_lifecycle() => s3_error(
            404,
            "NoSuchLifecycleConfiguration",
            "The lifecycle configuration does not exist",
        ),
        "GET" if req.is_list() => listing(&[], None),
        "PUT" => Reply::new(200, Vec::new()).with("etag", &etag_of(&req.body)),
        "DELETE" => Reply::new(204, Vec::new()),
        _ => s3_error(404, "NoSuchKey", "The specified key does not exist."),
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// The store; stops when dropped.
pub struct HostileStore {
    pub endpoint: String,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for HostileStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl HostileStore {
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> HostileStore {
        let ln = TcpListener::bind("127.0.0.1:0").unwrap();
        ln.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", ln.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log2, stop2) = (log.clone(), stop.clone());
        let handler: Arc<Handler> = Arc::new(handler);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut answered = 0;
            while !stop2.load(Ordering::Relaxed)
                && Instant::now() < deadline
                && answered < MAX_REQUESTS
            {
                match ln.accept() {
                    Ok((s, _)) => {
                        answered += 1;
                        let (log, handler) = (log2.clone(), handler.clone());
                        std::thread::spawn(move || serve(s, &log, &*handler));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        HostileStore {
            endpoint,
            log,
            stop,
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }
}

fn serve(mut s: TcpStream, log: &Mutex<Vec<Request>>, handler: &Handler) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let Some(req) = read_request(&mut s) else {
        return;
    };
    let reply = handler(&req);
    log.lock().unwrap().push(req);
    let reason = if reply.status < 300 { "OK" } else { "Refused" };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&reply.body);
    let _ = s.flush();
}

/// One request with a Content-Length body (at most 128 MiB), `None` when the peer gave up.
fn read_request(s: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
        .min(128 << 20);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < len {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(len);
    Some(Request {
        method,
        target,
        headers,
        body,
    })
}
