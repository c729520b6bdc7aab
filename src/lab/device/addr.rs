//! A device's address packed in one atomic word, so the SNMP and gNMI addresses cost 8 bytes each
//! rather than a `OnceLock<SocketAddr>` (40); an IPv6 address (a fleet bound to `::1`) is kept aside.
#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// An address set once, packed in one word: bit 63 set, bit 62 an IPv6 address (kept aside in
/// `Device::v6`), else bits 16..48 the IPv4 address and 0..16 the port.
#[derive(Debug, Default)]
pub(super) struct PackedAddr(AtomicU64);

const ADDR_SET: u64 = 1 << 63;
const ADDR_V6: u64 = 1 << 62;

impl PackedAddr {
    pub(super) fn get(&self, v6: &OnceLock<SocketAddr>) -> Option<SocketAddr> {
        let w = self.0.load(Ordering::Acquire);
        if w & ADDR_SET == 0 {
            return None;
        }
        if w & ADDR_V6 != 0 {
            return v6.get().copied();
        }
        let ip = Ipv4Addr::from((w >> 16) as u32);
        Some(SocketAddr::V4(SocketAddrV4::new(ip, w as u16)))
    }
    /// Sets the address if it was unset; an IPv6 one goes to the slot `v6` gives (made only then).
    pub(super) fn set<'a>(&self, a: SocketAddr, v6: impl FnOnce() -> &'a OnceLock<SocketAddr>) {
        let w = match a {
            SocketAddr::V4(a) => ADDR_SET | (u32::from(*a.ip()) as u64) << 16 | a.port() as u64,
            SocketAddr::V6(_) => {
                let _ = v6().set(a);
                ADDR_SET | ADDR_V6
            }
        };
        let _ = self
            .0
            .compare_exchange(0, w, Ordering::AcqRel, Ordering::Acquire);
    }
}
