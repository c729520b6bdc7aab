//! A dial-out collector that misbehaves: a plain `TcpListener` on loopback speaking just enough to be
//! hostile (accept and say nothing; garbage; an HTTP/2 SETTINGS allowing no stream; a ping flood;
//! close at once).
//! It counts and times every connection it accepts, and can give up its port while holding what it
//! accepted, as a hung process on its way out does, so a good collector can take the port beside it.
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
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
    /// Writes an HTTP/2 SETTINGS frame, then PING frames as fast as the connection takes them, and
    /// never reads.
    PingFlood,
    /// Closes the connection right after accepting it.
    Close,
}

/// A server SETTINGS frame (the server's preface) with SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 0.
const NO_STREAMS: [u8; 15] = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
/// An empty server SETTINGS frame, and a PING frame (8 bytes of opaque data).
const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
const PING: [u8; 17] = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
const GARBAGE: &[u8] = b"HTTP/1.0 200 nope\r\n\r\n\x00\xff\x13\x37 not a gRPC server at all\r\n";
/// How often the listener looks for a connection (it polls, so that it can stop).
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// A running hostile collector.
pub struct Hostile {
    pub port: u16,
    accepts: Arc<Mutex<Vec<Instant>>>,
    held: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    flood: Arc<AtomicBool>,
    released: bool,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    /// Listens on 127.0.0.1:`port` (0: an ephemeral port).
    pub fn start(port: u16, mode: Mode) -> Hostile {
        let l = TcpListener::bind(("127.0.0.1", port)).expect("bind the hostile collector");
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let (accepts, held, stop, flood) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(true)),
        );
        let (a, h, s, f) = (accepts.clone(), held.clone(), stop.clone(), flood.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => {
                        a.lock().unwrap().push(Instant::now());
                        treat(c, mode, &h, &f);
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
            flood,
            released: false,
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
    /// connection open and unread (and flooded) until the returned value is dropped.
    pub fn release_port(mut self) -> Held {
        self.stop_listening();
        self.released = true;
        Held {
            conns: std::mem::take(&mut *self.held.lock().unwrap()),
            flood: self.flood.clone(),
        }
    }

    fn stop_listening(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// The connections a collector that gave up its port still holds; dropping it closes them.
pub struct Held {
    pub conns: Vec<TcpStream>,
    flood: Arc<AtomicBool>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.flood.store(false, Ordering::Relaxed);
    }
}

fn treat(mut c: TcpStream, mode: Mode, held: &Mutex<Vec<TcpStream>>, flood: &Arc<AtomicBool>) {
    let hello: &[u8] = match mode {
        Mode::Close => return,
        Mode::Silent => b"",
        Mode::Garbage => GARBAGE,
        Mode::NoStreams => &NO_STREAMS,
        Mode::PingFlood => &SETTINGS,
    };
    let _ = c.write_all(hello);
    if mode == Mode::PingFlood {
        if let Ok(w) = c.try_clone() {
            let f = flood.clone();
            std::thread::spawn(move || pings(w, &f));
        }
    }
    held.lock().unwrap().push(c);
}

/// Writes PING frames until the peer is gone or the test is done with the connection.
fn pings(mut w: TcpStream, flood: &AtomicBool) {
    let _ = w.set_write_timeout(Some(Duration::from_millis(50)));
    let burst: Vec<u8> = PING.iter().copied().cycle().take(PING.len() * 64).collect();
    // Whole frames: a write cut short goes on where it stopped.
    let mut at = 0;
    while flood.load(Ordering::Relaxed) {
        match w.write(&burst[at..]) {
            Ok(n) => at = (at + n) % burst.len(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
    let _ = w.shutdown(Shutdown::Both);
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop_listening();
        if !self.released {
            self.flood.store(false, Ordering::Relaxed);
        }
    }
}
