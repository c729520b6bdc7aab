//! Name resolution for one push's uploads: IP literals as they are, host names looked up on a named,
//! short-lived thread (`nl6-push-dns`), **at most one lookup in flight per push**.
//!
//! The libc resolver cannot be cancelled, so a lookup that outlives its upload's time keeps its thread.
//! Rather than start one more such thread per upload while the resolver hangs, the resolver keeps the
//! in-flight lookup's receiver: the next upload first looks there. An answer that arrived meanwhile is
//! used (the lookup was for the same host); a lookup still running makes the upload fail at once with a
//! timeout error naming the host. So a hanging resolver costs one thread, not one per upload.
//!
//! Owns only that receiver; never opens a socket. The lookup function is injectable for tests.
#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The name of the lookup thread a host-name address needs.
pub const DNS_THREAD_NAME: &str = "nl6-push-dns";

/// Looks a `host:port` up (blocking). The real one is the libc resolver through `ToSocketAddrs`.
pub type LookupFn = dyn Fn(&str) -> io::Result<Vec<SocketAddr>> + Send + Sync;

type Answer = io::Result<Vec<SocketAddr>>;

/// A lookup whose thread has not been heard from.
struct InFlight {
    host_port: String,
    answer: Receiver<Answer>,
}

/// The resolver one push's agent uses.
pub struct PushResolver {
    lookup: Arc<LookupFn>,
    in_flight: Mutex<Option<InFlight>>,
}

impl std::fmt::Debug for PushResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushResolver").finish_non_exhaustive()
    }
}

impl Default for PushResolver {
    fn default() -> Self {
        PushResolver::with_lookup(Arc::new(|host_port: &str| {
            host_port.to_socket_addrs().map(Iterator::collect)
        }))
    }
}

impl PushResolver {
    /// A resolver over `lookup` (tests pass a slow or counting one).
    pub fn with_lookup(lookup: Arc<LookupFn>) -> PushResolver {
        PushResolver {
            lookup,
            in_flight: Mutex::new(None),
        }
    }

    /// Resolves `host_port` (`host:port` or `[v6]:port`) within `wait` (`None`: no limit).
    pub fn lookup_host(&self, host_port: &str, wait: Option<Duration>) -> Answer {
        if let Ok(literal) = host_port.parse::<SocketAddr>() {
            return Ok(vec![literal]);
        }
        // Another upload of this push waiting on a lookup right now is a lookup in flight too.
        let mut slot = match self.in_flight.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(still_running(host_port)),
        };
        if let Some(previous) = slot.take() {
            match previous.answer.try_recv() {
                Ok(answer) if previous.host_port == host_port => return answer,
                // An answer for another host (a proxy, say): done with; look this one up.
                Ok(_) | Err(TryRecvError::Disconnected) => {}
                Err(TryRecvError::Empty) => {
                    *slot = Some(previous);
                    return Err(still_running(host_port));
                }
            }
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let lookup = Arc::clone(&self.lookup);
        let host = host_port.to_string();
        std::thread::Builder::new()
            .name(DNS_THREAD_NAME.to_string())
            .spawn(move || {
                let _ = tx.send(lookup(&host));
            })?;
        let waited = match wait {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(d) => rx.recv_timeout(d),
        };
        match waited {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                *slot = Some(InFlight {
                    host_port: host_port.to_string(),
                    answer: rx,
                });
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("DNS lookup of {host_port} timed out"),
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("DNS lookup of {host_port} ended without an answer"),
            )),
        }
    }
}

fn still_running(host_port: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "DNS lookup of {host_port} timed out: an earlier lookup is still running (one at a time per push)"
        ),
    )
}

impl Resolver for PushResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err(ureq::Error::BadUri(uri.to_string()));
        };
        let host_port = DefaultResolver::host_and_port(scheme, authority)
            .ok_or_else(|| ureq::Error::BadUri(uri.to_string()))?;
        let wait = (!timeout.after.is_not_happening()).then(|| *timeout.after);
        let found = self
            .lookup_host(&host_port, wait)
            .map_err(ureq::Error::Io)?;
        let mut out = self.empty();
        for addr in config.ip_family().keep_wanted(found.into_iter()).take(16) {
            out.push(addr);
        }
        if out.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Condvar;

    fn resolve(url: &str) -> Result<Vec<SocketAddr>, ureq::Error> {
        let uri: ureq::http::Uri = url.parse().unwrap();
        let config = ureq::Agent::config_builder().build();
        let timeout = NextTimeout {
            after: Duration::from_secs(5).into(),
            reason: ureq::Timeout::Global,
            per_read: None,
            per_write: None,
        };
        PushResolver::default()
            .resolve(&uri, &config, timeout)
            .map(|a| a.iter().copied().collect())
    }

    #[test]
    fn literal_addresses_resolve_to_themselves_with_default_ports() {
        let v4: SocketAddr = "127.0.0.1:4040".parse().unwrap();
        assert_eq!(resolve("http://127.0.0.1:4040/ingest").unwrap(), vec![v4]);
        let v6: SocketAddr = "[::1]:443".parse().unwrap();
        assert_eq!(resolve("https://[::1]/ingest").unwrap(), vec![v6]);
        let http: SocketAddr = "10.1.2.3:80".parse().unwrap();
        assert_eq!(resolve("http://10.1.2.3/x").unwrap(), vec![http]);
    }

    #[test]
    fn host_names_are_looked_up() {
        // `localhost` comes from /etc/hosts: no query leaves the machine.
        let found = resolve("http://localhost:4040/ingest").unwrap();
        assert!(!found.is_empty());
        assert!(found
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 4040));
    }

    /// A lookup that blocks until released, counting its calls.
    struct Gatekeeper {
        calls: AtomicUsize,
        released: Mutex<bool>,
        release: Condvar,
    }

    impl Gatekeeper {
        fn open(&self) {
            *self.released.lock().unwrap() = true;
            self.release.notify_all();
        }
    }

    fn hanging_lookup() -> (PushResolver, Arc<Gatekeeper>) {
        let gate = Arc::new(Gatekeeper {
            calls: AtomicUsize::new(0),
            released: Mutex::new(false),
            release: Condvar::new(),
        });
        let g = Arc::clone(&gate);
        let resolver = PushResolver::with_lookup(Arc::new(move |host_port: &str| {
            g.calls.fetch_add(1, Ordering::SeqCst);
            let mut open = g.released.lock().unwrap();
            while !*open {
                open = g.release.wait(open).unwrap();
            }
            let port = host_port.rsplit(':').next().unwrap().parse().unwrap();
            Ok(vec![SocketAddr::from(([127, 0, 0, 9], port))])
        }));
        (resolver, gate)
    }

    #[test]
    fn a_hanging_resolver_costs_one_lookup_not_one_per_upload() {
        let (resolver, gate) = hanging_lookup();
        let wait = Some(Duration::from_millis(50));
        let first = resolver.lookup_host("pyro.lab:4040", wait).unwrap_err();
        assert_eq!(first.kind(), io::ErrorKind::TimedOut);
        assert!(first.to_string().contains("pyro.lab:4040"), "{first}");
        // The next uploads fail at once, naming the host, without a lookup of their own, even with
        // plenty of time left.
        for _ in 0..5 {
            let e = resolver
                .lookup_host("pyro.lab:4040", Some(Duration::from_secs(30)))
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert!(
                e.to_string().contains("pyro.lab:4040") && e.to_string().contains("still running"),
                "{e}"
            );
        }
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1);
        // The late answer is used by the next upload, still without a new lookup.
        gate.open();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let answer = loop {
            match resolver.lookup_host("pyro.lab:4040", Some(Duration::ZERO)) {
                Ok(a) => break Some(a),
                Err(_) if std::time::Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => break None,
            }
        };
        assert_eq!(answer, Some(vec![SocketAddr::from(([127, 0, 0, 9], 4040))]));
        assert_eq!(gate.calls.load(Ordering::SeqCst), 1);
        // After that, a new upload looks up afresh (and, released, gets its answer in time).
        let again = resolver
            .lookup_host("pyro.lab:4040", Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(gate.calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn literals_never_wait_behind_a_hanging_lookup() {
        let (resolver, gate) = hanging_lookup();
        assert!(resolver
            .lookup_host("pyro.lab:4040", Some(Duration::from_millis(20)))
            .is_err());
        let v4: SocketAddr = "127.0.0.1:4040".parse().unwrap();
        assert_eq!(
            resolver.lookup_host("127.0.0.1:4040", None).unwrap(),
            vec![v4]
        );
        gate.open();
    }
}
