//! What every gNMI RPC shares: the fleet, the wall-clock anchor, which device a connection reached
//! ([`Routes`]: by local port per port, by local address under `-device-net`, as SNMP's destination
//! address does) and the optional username/password check. [`Target::admit`] is the first step of
//! every RPC: it names the device or refuses with the gRPC status gNMI specifies.
#![forbid(unsafe_code)]

use super::schema::Clock;
use super::Host;
use crate::lab::device::Device;
use crate::lab::device_net::DeviceNet;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

/// Which device a connection's local address names.
#[derive(Debug, Clone)]
pub enum Routes {
    /// Per port: local port → device index.
    Ports(HashMap<u16, usize>),
    /// `-device-net`: the local address names the device.
    Net(DeviceNet, usize),
}

impl Routes {
    /// The device at local address `local`.
    pub fn device_at(&self, local: SocketAddr) -> Option<usize> {
        match (self, local.ip()) {
            (Routes::Ports(m), _) => m.get(&local.port()).copied(),
            (Routes::Net(net, n), IpAddr::V4(ip)) => net.device_at(ip, *n),
            (Routes::Net(..), IpAddr::V6(ip)) => ip
                .to_ipv4_mapped()
                .and_then(|v4| self.device_at(SocketAddr::new(IpAddr::V4(v4), local.port()))),
        }
    }
}

/// The gNMI target of the whole fleet (one value; each RPC finds its device).
#[derive(Debug)]
pub struct Target {
    pub shared: Arc<dyn Host>,
    pub clock: Clock,
    pub routes: Routes,
    credentials: Option<(String, String)>,
}

impl Target {
    pub fn new(shared: Arc<dyn Host>, routes: Routes) -> Target {
        let credentials = shared
            .config()
            .gnmi()
            .credentials()
            .map(|(u, p)| (u.to_string(), p.to_string()));
        Target {
            shared,
            clock: Clock::now(),
            routes,
            credentials,
        }
    }

    /// The device an RPC is for, after the credential check; counts the RPC.
    pub fn admit<T>(&self, req: &Request<T>) -> Result<(usize, &Arc<Device>), Status> {
        self.check_credentials(req.metadata())?;
        let local = req
            .local_addr()
            .ok_or_else(|| Status::internal("the connection has no local address"))?;
        let index = self
            .routes
            .device_at(local)
            .ok_or_else(|| Status::not_found(format!("no simulated device at {local}")))?;
        let d = &self.shared.devices()[index];
        crate::lab::device::DeviceCounters::inc(&d.counters.gnmi_rpcs);
        Ok((index, d))
    }

    /// The device the connection of `req` reached, if any (for counting a refusal before admission).
    pub fn device_of<T>(&self, req: &Request<T>) -> Option<usize> {
        req.local_addr().and_then(|a| self.routes.device_at(a))
    }

    /// A refusal on its way out: counted on its device and its message cut to
    /// [`super::limits::MAX_MESSAGE_BYTES`].
    pub fn refused(&self, device: Option<usize>, s: Status) -> Status {
        if let Some(d) = device.and_then(|i| self.shared.devices().get(i)) {
            crate::lab::device::DeviceCounters::inc(&d.counters.gnmi_refused);
        }
        super::limits::clip(s)
    }

    fn check_credentials(&self, md: &MetadataMap) -> Result<(), Status> {
        let Some((user, password)) = &self.credentials else {
            return Ok(());
        };
        let got = |k: &str| md.get(k).and_then(|v| v.to_str().ok()).unwrap_or("");
        // Both compared in full, so the time taken does not say which one was wrong.
        let ok = same(got("username"), user) & same(got("password"), password);
        if ok {
            Ok(())
        } else {
            Err(Status::unauthenticated(
                "this target wants `username` and `password` metadata matching -gnmi-username and \
                 -gnmi-password",
            ))
        }
    }
}

/// Compares two strings in time that depends on their lengths only.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let diff = a
        .iter()
        .zip(b)
        .fold(a.len() ^ b.len(), |acc, (x, y)| acc | usize::from(x ^ y));
    diff == 0
}

/// The request's `prefix.target`, checked against the device: empty, or the device's name.
pub fn check_target(d: &Device, target: &str) -> Result<(), Status> {
    if target.is_empty() || d.name() == target {
        Ok(())
    } else {
        Err(Status::not_found(format!(
            "target {} is not this device ({}); each device answers for itself",
            super::limits::quote(&format!("{target:?}"), super::limits::MAX_QUOTE_BYTES),
            d.name()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_addresses_name_devices() {
        let ports = Routes::Ports([(5000, 0), (5001, 1)].into_iter().collect());
        assert_eq!(ports.device_at("127.0.0.1:5001".parse().unwrap()), Some(1));
        assert_eq!(ports.device_at("127.0.0.1:5002".parse().unwrap()), None);
        let net = Routes::Net(DeviceNet::parse("127.1.0.0/16").unwrap(), 10);
        assert_eq!(net.device_at("127.1.0.3:9339".parse().unwrap()), Some(2));
        assert_eq!(net.device_at("127.1.0.99:9339".parse().unwrap()), None);
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
