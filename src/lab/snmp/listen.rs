//! Binds the fleet's SNMP sockets before any thread starts, so a refusal stops startup with one line and
//! nothing half-started:
//!
//! - per port: one socket per device on `-bind`, at `-snmp-port` + *i* (or an ephemeral port each);
//! - `-device-net CIDR`: first checks that the host owns the range's first and last device addresses,
//!   then binds [`SERVING_THREADS`] sockets to the wildcard address on one port (`-snmp-port`, or the
//!   ephemeral port the first socket got), sharing it with `SO_REUSEPORT`.
//!
//! Each device learns its SNMP address here (and, under `-device-net`, its own address). Takes plain
//! values, not the fleet's configuration, and says why a bind failed in its own [`ListenError`], which
//! the fleet's error wraps with the remedy.
#![forbid(unsafe_code)]

use super::super::device::Device;
use super::super::device_net::DeviceNet;
use super::serve::{Listener, Route, SERVING_THREADS};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;

/// Why the SNMP sockets could not be bound.
#[derive(Debug)]
pub enum ListenError {
    /// A device's SNMP address could not be bound (`device` names it, or a range under `-device-net`).
    Bind {
        device: String,
        addr: SocketAddr,
        cause: std::io::Error,
    },
    /// Another socket call failed.
    Io { what: String, cause: std::io::Error },
    /// The `-device-net` range is not this host's (the message says how to make it so).
    NotOwned(String),
}

impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenError::Bind {
                device,
                addr,
                cause,
            } => write!(f, "device {device}: cannot bind UDP {addr}: {cause}"),
            ListenError::Io { what, cause } => write!(f, "{what}: {cause}"),
            ListenError::NotOwned(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ListenError {}

/// Binds the SNMP sockets on `bind` (per port, from `port` + *i*, or ephemeral ports at `0`) or, with
/// `net`, for the whole `-device-net` range on one port, and tells every device its address.
pub fn bind_snmp(
    bind: IpAddr,
    port: u16,
    net: Option<DeviceNet>,
    devices: &[Arc<Device>],
) -> Result<Vec<Listener>, ListenError> {
    match net {
        Some(net) => bind_device_net(port, net, devices),
        None => bind_per_port(bind, port, devices),
    }
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> ListenError {
    let what = what.to_string();
    move |cause| ListenError::Io { what, cause }
}

fn bind_per_port(
    ip: IpAddr,
    base: u16,
    devices: &[Arc<Device>],
) -> Result<Vec<Listener>, ListenError> {
    let mut out = Vec::with_capacity(devices.len());
    for d in devices {
        let port = if base == 0 {
            0
        } else {
            base + d.index() as u16
        };
        let socket =
            UdpSocket::bind(SocketAddr::new(ip, port)).map_err(|cause| ListenError::Bind {
                device: d.name().to_string(),
                addr: SocketAddr::new(ip, port),
                cause,
            })?;
        socket
            .set_nonblocking(true)
            .map_err(io("SNMP socket mode"))?;
        crate::netsys::count_drops(&socket).map_err(io("SNMP socket drop count"))?;
        d.set_snmp_addr(socket.local_addr().map_err(io("SNMP socket address"))?);
        out.push(Listener {
            socket,
            route: Route::Device(d.index()),
        });
    }
    Ok(out)
}

/// Refuses a range whose addresses this host does not own: binding its first and last device address
/// fails with "cannot assign requested address".
fn check_owned(net: DeviceNet, devices: usize) -> Result<(), ListenError> {
    for i in [0, devices - 1] {
        let ip = net.device_ip(i);
        if let Err(cause) = UdpSocket::bind(SocketAddr::from((ip, 0))) {
            return Err(ownership_error(net, i, ip, cause));
        }
    }
    Ok(())
}

/// Why the test bind of device `i`'s address failed: only EADDRNOTAVAIL means the host does not own
/// it (a flag error, exit 2); anything else (EMFILE, ENOBUFS…) is a resource error that the fleet's
/// error explains (the descriptor limit) or reports as it is.
pub(crate) fn ownership_error(
    net: DeviceNet,
    i: usize,
    ip: Ipv4Addr,
    cause: std::io::Error,
) -> ListenError {
    if cause.raw_os_error() != Some(libc::EADDRNOTAVAIL) {
        return ListenError::Io {
            what: format!("-device-net {net}: cannot bind address {ip} (device {i})"),
            cause,
        };
    }
    ListenError::NotOwned(format!(
        "-device-net {net}: address {ip} (device {i}) is not this host's ({cause}); make the range \
         local first, e.g. `ip route add local {net} dev lo` as root, or use a range under \
         127.0.0.0/8 such as 127.1.0.0/16"
    ))
}

/// The receive buffer a `-device-net` socket asks for (4 MiB; without CAP_NET_ADMIN the kernel grants
/// up to `net.core.rmem_max`): at 2 × 150 requests a millisecond, the default 208 KiB overflowed
/// whenever a serving thread was a tick late (148 627 of 1.5 M dropped at an offered 300 000 GET/s).
const DEVICE_NET_RCVBUF: usize = 4 << 20;

fn bind_device_net(
    mut port: u16,
    net: DeviceNet,
    devices: &[Arc<Device>],
) -> Result<Vec<Listener>, ListenError> {
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    check_owned(net, devices.len())?;
    let last = devices[devices.len() - 1].name();
    let bind_error = |at: SocketAddrV4| {
        let device = format!("{} … {last}", devices[0].name());
        move |cause| ListenError::Bind {
            device,
            addr: SocketAddr::V4(at),
            cause,
        }
    };
    // A plain bind first makes a port anyone already holds (with or without SO_REUSEPORT) a refusal.
    // It cannot stop a process of this user from joining the port later with SO_REUSEPORT and taking
    // a share of the requests (SECURITY.md says so).
    if port != 0 {
        let at = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        drop(UdpSocket::bind(at).map_err(bind_error(at))?);
    }
    let mut out = Vec::with_capacity(SERVING_THREADS);
    for _ in 0..SERVING_THREADS {
        let at = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        let socket = crate::netsys::bind_shared_port(at).map_err(bind_error(at))?;
        crate::netsys::count_drops(&socket).map_err(io("SNMP socket drop count"))?;
        // A range's requests queue on a few sockets: room for a burst while a thread is off the CPU.
        crate::netsys::deepen_receive_buffer(&socket, DEVICE_NET_RCVBUF)
            .map_err(io("SNMP socket receive buffer"))?;
        port = socket
            .local_addr()
            .map_err(io("SNMP socket address"))?
            .port();
        out.push(Listener {
            socket,
            route: Route::Net(net),
        });
    }
    for d in devices {
        let ip = net.device_ip(d.index());
        d.set_own_ip(ip);
        d.set_snmp_addr(SocketAddr::new(IpAddr::V4(ip), port));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_address_is_called_not_this_hosts() {
        let net = DeviceNet::parse("10.9.0.0/16").unwrap();
        let ip = net.device_ip(0);
        let err = |code| ownership_error(net, 0, ip, std::io::Error::from_raw_os_error(code));
        let missing = err(libc::EADDRNOTAVAIL);
        assert!(matches!(missing, ListenError::NotOwned(_)), "{missing:?}");
        assert!(missing.to_string().contains("is not this host's"));
        for code in [libc::EMFILE, libc::ENOBUFS] {
            let other = err(code);
            assert!(matches!(other, ListenError::Io { .. }), "{other:?}");
            assert!(!other.to_string().contains("not this host's"), "{other}");
        }
    }
}
