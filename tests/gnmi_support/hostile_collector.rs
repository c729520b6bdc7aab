//! A dial-out collector that misbehaves: a plain `TcpListener` on loopback speaking just enough to be
//! hostile (accept and say nothing; garbage; an HTTP/2 SETTINGS allowing no stream; close at once).
//! It counts and times every connection it accepts, and can give up its port while holding what it
//! accepted, as a hung process on its way out does, so a good collector can take the port beside it.
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the collector treats every connection it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Accepts, never reads, never writes.
    Silent,
    /// Writes bytes that are neither HTTP/2 nor anything else, then never reads.
    Garbage,
    /// Writes an HTTP/2 SETTINGS frame with MAX_CONCURRENT_STREAMS = 0, then never reads.
    NoStreams,
    /// Closes the connection right after accepting it.
    Close,
}

/// A server SETTINGS frame (the server's preface) with SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 0.
const NO_STREAMS: [u8; 15] = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
const GARBAGE: &[u8] = b"HTTP/1.0 200 nope\r\n\r\n\x00\xff\x13\x37 not a gRPC server at all\r\n";
/// How often the listener looks for a connection (it polls, so that it can stop).
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// A running hostile collector.
pub struct Hostile {
    pub port: u16,
    accepts: Arc<Mutex<Vec<Instant>>>,
    held: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    /// Listens on 127.0.0.1:`port` (0: an ephemeral port).
    pub fn start(port: u16, mode: Mode) -> Hostile {
        let l = TcpListener::bind(("127.0.0.1", port)).expect("bind the hostile collector");
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let (accepts, held, stop) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let (a, h, s) = (accepts.clone(), held.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => {
                        a.lock().unwrap().push(Instant::now());
                        treat(c, mode, &h);
                    }
                    Err(_) => std::thread::sleep(ACCEPT_POLL),
                }
            }
        });
        Hostile {
            port,
            accepts,
            held,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepts.lock().unwrap().len()
    }

    /// Connections accepted in the window `[from, from + len)`.
    pub fn accepted_between(&self, from: Instant, len: Duration) -> usize {
        let a = self.accepts.lock().unwrap();
        a.iter().filter(|&&t| t >= from && t < from + len).count()
    }

    /// Closes the listening socket (the port is free for another collector) but keeps every accepted
    /// connection open and unread until the returned value is dropped.
    pub fn release_port(mut self) -> Vec<TcpStream> {
        self.stop_listening();
        std::mem::take(&mut *self.held.lock().unwrap())
    }

    fn stop_listening(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn treat(mut c: TcpStream, mode: Mode, held: &Mutex<Vec<TcpStream>>) {
    let hello: &[u8] = match mode {
        Mode::Close => return,
        Mode::Silent => b"",
        Mode::Garbage => GARBAGE,
        Mode::NoStreams => &NO_STREAMS,
    };
    let _ = c.write_all(hello);
    held.lock().unwrap().push(c);
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop_listening();
    }
}
