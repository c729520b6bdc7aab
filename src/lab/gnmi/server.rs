//! The gNMI target's sockets and thread. [`bind`] runs at fleet start before any thread: per port, one
//! TCP listener per device on `-bind` at `-gnmi-port` + *i* (0: ephemeral each); under `-device-net`, one
//! listener on the wildcard address at `-gnmi-port` whose accepted connections' local addresses name
//! the devices (connections to other addresses are closed at once). TLS files are read and checked
//! there too, so a bad file stops startup with one line. [`run`] is the body of the one `gnmi` thread:
//! a tokio `current_thread` runtime (nothing else in nl6 is async) serving tonic's HTTP/2 on every
//! listener until the fleet stops.
#![forbid(unsafe_code)]

use super::idle::Idle;
use super::limits;
use super::proto::gnmi::g_nmi_server::GNmiServer;
use super::service::Service;
use super::target::{Routes, Target};
use super::{Host, Settings};
use crate::lab::device::Device;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::transport::{Identity, Server, ServerTlsConfig};

/// Connections accepted but not yet taken by the HTTP/2 server.
const ACCEPT_BACKLOG: usize = 256;
/// How often the runtime looks at the fleet's stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The target's listeners, bound and checked, waiting for its thread.
/// Why the gNMI target could not start (the fleet turns it into its own start-up error).
#[derive(Debug)]
pub enum StartError {
    /// A device's listener could not be bound.
    Bind {
        device: String,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    /// A socket call on a bound listener failed.
    Io { what: String, cause: std::io::Error },
    /// A `-gnmi-*` setting cannot be used (the flag, the value, why).
    Config(String),
}

#[derive(Debug)]
pub struct Bound {
    listeners: Vec<TcpListener>,
    routes: Routes,
    tls: Option<ServerTlsConfig>,
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> StartError {
    let what = what.to_string();
    move |cause| StartError::Io { what, cause }
}

/// Binds what `config` asks for and tells every device its gNMI address; `None` when gNMI is off.
pub fn bind(config: &dyn Settings, devices: &[Arc<Device>]) -> Result<Option<Bound>, StartError> {
    let Some(base) = config.gnmi().port() else {
        return Ok(None);
    };
    let tls = tls(config)?;
    let (listeners, routes) = match config.device_net() {
        Some(net) => {
            let at = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), base);
            let l = listen(at, || format!("{} … (every device)", first_name(devices)))?;
            let port = l.local_addr().map_err(io("gNMI socket address"))?.port();
            for d in devices {
                d.set_gnmi_addr(SocketAddr::new(IpAddr::V4(net.device_ip(d.index())), port));
            }
            (vec![l], Routes::Net(net, devices.len()))
        }
        None => {
            let mut ls = Vec::with_capacity(devices.len());
            let mut ports = HashMap::with_capacity(devices.len());
            for d in devices {
                let port = if base == 0 {
                    0
                } else {
                    base + d.index() as u16
                };
                let l = listen(SocketAddr::new(config.bind(), port), || {
                    d.name().to_string()
                })?;
                let a = l.local_addr().map_err(io("gNMI socket address"))?;
                d.set_gnmi_addr(a);
                ports.insert(a.port(), d.index());
                ls.push(l);
            }
            (ls, Routes::Ports(ports))
        }
    };
    Ok(Some(Bound {
        listeners,
        routes,
        tls,
    }))
}

fn first_name(devices: &[Arc<Device>]) -> String {
    devices
        .first()
        .map_or_else(|| "no device".into(), |d| d.name().to_string())
}

fn listen(at: SocketAddr, device: impl FnOnce() -> String) -> Result<TcpListener, StartError> {
    let l = TcpListener::bind(at).map_err(|cause| StartError::Bind {
        device: device(),
        addr: at,
        cause,
    })?;
    l.set_nonblocking(true).map_err(io("gNMI socket mode"))?;
    Ok(l)
}

/// The TLS configuration from `-gnmi-tls-cert`/`-key`, read and checked now.
fn tls(config: &dyn Settings) -> Result<Option<ServerTlsConfig>, StartError> {
    let Some((cert, key)) = config.gnmi().tls() else {
        return Ok(None);
    };
    let read = |flag: &str, p: &std::path::PathBuf| {
        std::fs::read(p)
            .map_err(|e| StartError::Config(format!("{flag} {}: cannot read it: {e}", p.display())))
    };
    let (c, k) = (read("-gnmi-tls-cert", cert)?, read("-gnmi-tls-key", key)?);
    let cfg = ServerTlsConfig::new().identity(Identity::from_pem(c, k));
    // The builder checks the certificate and key now, not at the first connection.
    Server::builder().tls_config(cfg.clone()).map_err(|e| {
        StartError::Config(format!(
            "-gnmi-tls-cert {} / -gnmi-tls-key {}: not a usable PEM certificate chain and key ({e})",
            cert.display(),
            key.display()
        ))
    })?;
    Ok(Some(cfg))
}

/// The runtime the `gnmi` thread runs (built by the caller, so a failure is a startup error).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
}

/// The `gnmi` thread's body: serves every listener until the fleet stops.
pub fn run(rt: tokio::runtime::Runtime, shared: Arc<dyn Host>, bound: Bound) {
    let Bound {
        listeners,
        routes,
        tls,
    } = bound;
    let target = Arc::new(Target::new(shared.clone(), routes.clone()));
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(ACCEPT_BACKLOG);
        for l in listeners {
            match tokio::net::TcpListener::from_std(l) {
                Ok(l) => {
                    tokio::spawn(accept(l, tx.clone(), routes.clone()));
                }
                Err(e) => eprintln!("nl6: gNMI: a listener could not join the runtime: {e}"),
            }
        }
        drop(tx);
        let incoming = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::io::Error>);
        let mut builder = bounded(Server::builder());
        if let Some(cfg) = tls {
            builder = match builder.tls_config(cfg) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("nl6: gNMI: TLS configuration refused: {e}");
                    return;
                }
            };
        }
        // One service, so no router: the generated server answers other paths UNIMPLEMENTED itself.
        let service =
            GNmiServer::new(Service(target)).max_decoding_message_size(limits::MAX_REQUEST_BYTES);
        let serve = builder.serve_with_incoming(service, incoming);
        tokio::select! {
            r = serve => if let Err(e) = r { eprintln!("nl6: gNMI server stopped: {e}") },
            _ = stopped(&*shared) => {}
        }
    });
}

/// The HTTP/2 settings that bound what one connection holds: streams, flow-control windows, and
/// the pings that tell a live client from a gone one ([`limits`]).
fn bounded(b: Server) -> Server {
    b.max_concurrent_streams(limits::MAX_STREAMS)
        .initial_stream_window_size(limits::STREAM_WINDOW)
        .initial_connection_window_size(limits::CONNECTION_WINDOW)
        .http2_keepalive_interval(Some(limits::KEEPALIVE))
        .http2_keepalive_timeout(Some(limits::KEEPALIVE_TIMEOUT))
}

/// Resolves when the fleet stops.
pub async fn stopped(shared: &dyn Host) {
    while !shared.stopping() {
        tokio::time::sleep(STOP_POLL).await;
    }
}

/// Accepts on one listener, handing each connection that names a device to the server.
async fn accept(l: tokio::net::TcpListener, tx: tokio::sync::mpsc::Sender<Idle>, routes: Routes) {
    let mut failing = false;
    loop {
        match l.accept().await {
            Ok((s, _)) => {
                failing = false;
                let named = s.local_addr().ok().and_then(|a| routes.device_at(a));
                if named.is_none() {
                    continue; // dropped: no device lives at that address
                }
                let _ = s.set_nodelay(true);
                if tx.send(Idle::new(s)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                // Out of descriptors or the like: say so once per episode, pause, go on.
                if !failing {
                    eprintln!("nl6: gNMI: accept failed ({e}); retrying");
                    failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
