//! `-device-net CIDR`: an IPv4 range where device *i* is at the first address + 1 + *i* (the range's
//! first and last addresses are never a device's). Plain values: parsing, capacity, address ↔ index.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// An IPv4 range of `-device-net`: device *i* is at the first address + 1 + *i*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceNet {
    base: Ipv4Addr,
    prefix: u8,
}

/// Why a `-device-net` range, or a target beside it, was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceNetError {
    /// Not `a.b.c.d/n` with `n` at most 32 (the text as given).
    Syntax(String),
    /// An exporter target (`flag`) that packets from the range's addresses cannot reach, and why.
    Unreachable {
        flag: &'static str,
        target: SocketAddr,
        net: DeviceNet,
        why: &'static str,
    },
}

impl std::fmt::Display for DeviceNetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceNetError::Syntax(text) => {
                write!(f, "want an IPv4 range like 127.1.0.0/16, not {text:?}")
            }
            DeviceNetError::Unreachable {
                flag,
                target,
                net,
                why,
            } => write!(
                f,
                "{flag} {target} with -device-net {net}: every device sends from its own address, and \
                 {why}; use a {flag} on 127.0.0.0/8 (e.g. 127.0.0.1:{}), or a -device-net range of this \
                 host's own IPv4 addresses",
                target.port()
            ),
        }
    }
}

impl std::error::Error for DeviceNetError {}

impl DeviceNet {
    /// Parses `a.b.c.d/n` (the address is masked to the range's first address).
    pub fn parse(text: &str) -> Result<DeviceNet, DeviceNetError> {
        let bad = || DeviceNetError::Syntax(text.to_string());
        let (ip, prefix) = text.split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        Ok(DeviceNet {
            base: Ipv4Addr::from(u32::from(ip) & mask),
            prefix,
        })
    }
    /// The smallest range from this one's first address with room for `devices`.
    pub fn widened_for(&self, devices: usize) -> DeviceNet {
        let prefix = (0..=30u8)
            .rev()
            .find(|&p| (1usize << (32 - p)) >= devices + 2)
            .unwrap_or(0);
        let base = self.base;
        DeviceNet::parse(&format!("{base}/{prefix}")).unwrap_or(DeviceNet { base, prefix })
    }
    /// How many devices fit: every address but the first and the last.
    pub fn capacity(&self) -> usize {
        (1usize << (32 - u32::from(self.prefix))).saturating_sub(2)
    }
    /// The address of device `index`.
    pub fn device_ip(&self, index: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base).wrapping_add(1 + index as u32))
    }
    /// Refuses an exporter target (`flag` names it) that packets from this range's addresses cannot
    /// reach: the kernel will not route a packet with a 127.x source off the host, and devices send
    /// from IPv4 addresses, so an IPv6 target is out of reach whatever the range.
    pub fn check_target(
        &self,
        flag: &'static str,
        target: SocketAddr,
    ) -> Result<(), DeviceNetError> {
        let why = match target.ip() {
            IpAddr::V6(_) => "an IPv6 target cannot be reached from the devices' IPv4 addresses",
            IpAddr::V4(ip) if self.base.is_loopback() && !ip.is_loopback() => {
                "the kernel does not send packets with a 127.x source to an address off 127.0.0.0/8"
            }
            IpAddr::V4(_) => return Ok(()),
        };
        Err(DeviceNetError::Unreachable {
            flag,
            target,
            net: *self,
            why,
        })
    }
    /// The device at `ip`, when `ip` is one of the first `devices` addresses of the range.
    pub fn device_at(&self, ip: Ipv4Addr, devices: usize) -> Option<usize> {
        let i = u32::from(ip)
            .checked_sub(u32::from(self.base))?
            .checked_sub(1)? as usize;
        (i < devices).then_some(i)
    }
}

impl std::fmt::Display for DeviceNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_map_to_devices_both_ways() {
        let net = DeviceNet::parse("127.1.0.0/16").unwrap();
        assert_eq!(net.capacity(), 65_534);
        assert_eq!(net.device_ip(0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(net.device_ip(29_999), Ipv4Addr::new(127, 1, 117, 48));
        assert_eq!(
            net.device_at(Ipv4Addr::new(127, 1, 117, 48), 30_000),
            Some(29_999)
        );
        assert_eq!(net.device_at(Ipv4Addr::new(127, 1, 117, 49), 30_000), None);
        assert_eq!(net.device_at(Ipv4Addr::new(127, 1, 0, 0), 30_000), None);
        assert_eq!(net.device_at(Ipv4Addr::new(127, 0, 0, 1), 30_000), None);
        // The address is masked to the range's first address.
        assert_eq!(
            DeviceNet::parse("10.1.2.3/24").unwrap().to_string(),
            "10.1.2.0/24"
        );
        assert_eq!(net.widened_for(300).to_string(), "127.1.0.0/23");
        for bad in ["127.1.0.0", "127.1.0.0/33", "::1/64", "x/8"] {
            assert!(DeviceNet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn targets_the_devices_addresses_cannot_reach_are_refused() {
        let lo = DeviceNet::parse("127.1.0.0/16").unwrap();
        let lan = DeviceNet::parse("10.9.0.0/16").unwrap();
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert!(lo.check_target("-trap-target", at("127.0.0.1:162")).is_ok());
        assert!(lan.check_target("-trap-target", at("10.0.0.5:162")).is_ok());
        let e = lo
            .check_target("-trap-target", at("10.0.0.5:162"))
            .unwrap_err()
            .to_string();
        for needle in [
            "-trap-target 10.0.0.5:162",
            "-device-net 127.1.0.0/16",
            "127.0.0.0/8",
            "own",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        for net in [lo, lan] {
            let e = net
                .check_target("-flow-target", at("[::1]:2055"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("-flow-target [::1]:2055") && e.contains("IPv6"),
                "{e}"
            );
        }
    }
}
