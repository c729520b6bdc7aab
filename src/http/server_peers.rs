//! The server's count of open connections, in all and per client address, and each connection's
//! place in it ([`PeerSlot`]): what the poll thread limits and a connection gives back when it is
//! dropped. Below both the poll thread and the connection code, which share it.
#![forbid(unsafe_code)]

use super::lock;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// A client address as the per-address limit counts it: an IPv4 address (IPv4-mapped IPv6 included), or
/// the /64 of an IPv6 one (one host's usual share).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PeerKey(IpAddr);

impl PeerKey {
    pub(super) fn of(ip: IpAddr) -> PeerKey {
        match ip {
            IpAddr::V4(v4) => PeerKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    PeerKey(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/64"),
        }
    }
}

/// Open connections per client address and in all (all of them: parked, queued, being served or on
/// their way back to the poll thread).
#[derive(Default)]
pub(super) struct PeerTable(Mutex<PeerCounts>);

#[derive(Default)]
struct PeerCounts {
    by_peer: HashMap<PeerKey, usize>,
    total: usize,
}

impl PeerTable {
    /// Connections open now.
    pub(super) fn open(&self) -> usize {
        lock(&self.0).total
    }
}

/// One connection's place in the [`PeerTable`]; dropping it (with the connection) gives the place back.
pub(super) struct PeerSlot {
    table: Arc<PeerTable>,
    pub(super) key: PeerKey,
}

impl PeerSlot {
    /// Counts a new connection of `key`; returns its slot and how many that address now has open.
    pub(super) fn claim(table: &Arc<PeerTable>, key: PeerKey) -> (PeerSlot, usize) {
        let mut counts = lock(&table.0);
        counts.total += 1;
        let n = counts.by_peer.entry(key).or_insert(0);
        *n += 1;
        let open = *n;
        drop(counts);
        let slot = PeerSlot {
            table: Arc::clone(table),
            key,
        };
        (slot, open)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = lock(&self.table.0);
        counts.total -= 1;
        if let Some(n) = counts.by_peer.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.by_peer.remove(&self.key);
            }
        }
    }
}
