//! The push over HTTPS to a server whose certificate was made with the lab recipe, verbatim:
//! `openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext
//! subjectAltName=IP:127.0.0.1,DNS:localhost` (which says `CA:TRUE`), trusted through `SSL_CERT_FILE`.
//! curl and Go accept it; so must nl6. The server is a small rustls HTTPS responder on 127.0.0.1 that
//! answers every request 200 and counts the `/ingest` POSTs.
use crate::common;

use common::{boot, json, wait_until};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runs the lab recipe in `dir`: `(cert.pem, key.pem)`.
fn lab_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let recipe = "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost";
    let mut words = recipe.split(' ');
    let out = Command::new(words.next().unwrap())
        .args(words)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-days", "2"])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "the recipe's certificate is a CA certificate: the case under test"
    );
    (cert, key)
}

/// An HTTPS responder on 127.0.0.1: every request gets `200`, POSTs to `/ingest` are counted.
struct TlsResponder {
    port: u16,
    ingests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl TlsResponder {
    fn start(cert: &Path, key: &Path) -> TlsResponder {
        let chain = vec![CertificateDer::from_pem_file(cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let ingests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (ingests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        let (config, count) = (config.clone(), count.clone());
                        std::thread::spawn(move || serve(s, config, &count));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        TlsResponder {
            port,
            ingests,
            stop,
        }
    }
}

impl Drop for TlsResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One connection: requests (head, then Content-Length bytes of body) answered 200 until it closes.
fn serve(s: TcpStream, config: Arc<rustls::ServerConfig>, ingests: &AtomicUsize) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ServerConnection::new(config).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, s);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    for _ in 0..1000 {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match tls.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            match tls.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        if head.starts_with("post /ingest?") {
            ingests.fetch_add(1, Ordering::Relaxed);
        }
        buf.drain(..end + 4 + length);
        if tls
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .and_then(|_| tls.flush())
            .is_err()
        {
            return;
        }
    }
}

#[test]
fn the_push_trusts_a_lab_self_signed_ca_certificate_given_in_ssl_cert_file() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("push-tls-lab-cert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (cert, key) = lab_certificate(&dir);
    let (other, _) = lab_certificate(&dir.join("other"));
    let server = TlsResponder::start(&cert, &key);
    let url = format!("https://127.0.0.1:{}", server.port);
    let start = |roots: &Path| {
        boot()
            .args(&["-devices", "0", "-profiling-pyroscope", &url])
            .args(&["-profiling-upload-interval", "1s"])
            .env("SSL_CERT_FILE", roots.to_str().unwrap())
            .env("SSL_CERT_DIR", dir.join("no-such-dir").to_str().unwrap())
            .start()
    };
    let trusted = start(&cert);
    let untrusted = start(&other);
    let state = |n: &common::Nl6| json(&n.http("GET", "/api/v1/profiling", b"").2)["data"].clone();
    let ok = wait_until(Duration::from_secs(30), || {
        state(&trusted)["uploads"].as_u64().unwrap_or(0) >= 3
            && state(&untrusted)["sdk_errors"].as_u64().unwrap_or(0) >= 1
    });
    assert!(
        ok,
        "trusted {}\nuntrusted {}\n{}",
        state(&trusted),
        state(&untrusted),
        trusted.stderr()
    );
    assert_eq!(state(&trusted)["sdk_errors"], 0, "{}", trusted.stderr());
    assert!(server.ingests.load(Ordering::Relaxed) >= 3);
    // Closing the gate stops the push; its figures stay, naming the push they belong to.
    let pushed = state(&trusted)["uploads"].as_u64().unwrap();
    let (status, _, body) = trusted.http("POST", "/api/v1/profiling", br#"{"enabled":false}"#);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let closed = state(&trusted);
    assert_eq!(closed["pushing"], false, "{closed}");
    assert!(closed["uploads"].as_u64().unwrap() >= pushed, "{closed}");
    assert!(closed["last_upload_at"].is_string(), "{closed}");
    assert_eq!(closed["last_push"]["address"], url.as_str(), "{closed}");
    assert!(closed["last_push"]["stopped_at"].is_string(), "{closed}");
    // Another CA certificate than the one in SSL_CERT_FILE is still refused.
    let refused = state(&untrusted);
    assert_eq!(refused["uploads"], 0, "{refused}");
    let error = refused["last_error"].as_str().unwrap();
    assert!(error.contains("certificate"), "{error}");
    drop((trusted, untrusted, server));
    let _ = std::fs::remove_dir_all(&dir);
}
