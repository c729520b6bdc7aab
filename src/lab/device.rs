//! One simulated device: its identity (name, sysDescr, boot instant), its interface table whose counters
//! grow with simulated traffic, and its message counters.
//!
//! Traffic is simulated lazily: each interface has a steady rate and [`Device::advance`] adds
//! `rate × elapsed` to the counters of interfaces that are up, so nothing ticks per device in the
//! background. Everything here is plain state behind one small mutex plus atomics; no I/O.
#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// Interfaces per simulated device.
pub const INTERFACES_PER_DEVICE: usize = 4;
/// Average simulated packet size, to derive packet counters from octets.
const AVG_PACKET_BYTES: u64 = 600;
/// Octets each way the last interface had carried before the device booted (5 GiB): past 2^32, so its
/// 32-bit ifTable counters have wrapped from the start and only ifXTable's 64-bit ones tell the total,
/// as on a real router's busy uplink.
pub const CARRIED_OCTETS: u64 = 5 << 30;

/// One row of the interface table.
#[derive(Debug, Clone)]
pub struct Interface {
    /// ifIndex, from 1.
    pub index: u32,
    pub name: String,
    pub speed_bps: u32,
    pub mac: [u8; 6],
    pub admin_up: bool,
    pub oper_up: bool,
    /// sysUpTime (centiseconds) of the last oper status change.
    pub last_change: u32,
    pub in_octets: u64,
    pub out_octets: u64,
    pub in_errors: u64,
    pub out_errors: u64,
    pub in_discards: u64,
    /// Simulated traffic rate while up, bytes per second.
    pub rate_in: u64,
    pub rate_out: u64,
    /// Octets already reported in flow records (the next flow record covers the rest).
    pub flow_mark_in: u64,
    pub flow_mark_out: u64,
    /// How many times a scenario flapped it.
    pub flaps: u32,
}

impl Interface {
    pub fn in_packets(&self) -> u64 {
        self.in_octets / AVG_PACKET_BYTES
    }
    pub fn out_packets(&self) -> u64 {
        self.out_octets / AVG_PACKET_BYTES
    }
}

/// The mutable part of a device.
#[derive(Debug)]
pub struct DeviceState {
    pub interfaces: Vec<Interface>,
    last_advance: Instant,
}

/// Message counters, read by `GET /api/v1/devices`.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    pub snmp_requests: AtomicU64,
    pub snmp_responses: AtomicU64,
    /// Datagrams that did not decode as SNMP (dropped).
    pub malformed: AtomicU64,
    /// Well-formed v2c requests with the wrong community (dropped).
    pub bad_community: AtomicU64,
    /// SNMP messages of another version (v1, v3: dropped; nl6 speaks v2c).
    pub bad_version: AtomicU64,
    /// v2c messages whose PDU is not a request (a Response, a trap, a Report: dropped).
    pub not_requests: AtomicU64,
    pub traps_sent: AtomicU64,
    pub informs_sent: AtomicU64,
    pub informs_acked: AtomicU64,
    /// INFORMs that got no response after every retry.
    pub informs_failed: AtomicU64,
    pub syslog_sent: AtomicU64,
    /// Syslog messages dropped because the TCP send queue was full.
    pub syslog_dropped: AtomicU64,
    pub flow_packets_sent: AtomicU64,
    /// Sends the OS refused (counted as dropped).
    pub send_errors: AtomicU64,
    /// The last syslog `[meta sequenceId]` used (not a message count).
    pub syslog_sequence: AtomicU64,
    /// The last NetFlow v9 packet sequence number used for this device's source id.
    pub flow_sequence: std::sync::atomic::AtomicU32,
    /// gNMI RPCs answered (Capabilities, Get, Set, Subscribe) and notifications streamed to subscribers.
    pub gnmi_rpcs: AtomicU64,
    pub gnmi_updates: AtomicU64,
    /// Dial-out: notifications the collector took, notifications dropped (queue full or the collector
    /// away), and connections made again after the collector went away.
    pub dialout_sent: AtomicU64,
    pub dialout_dropped: AtomicU64,
    pub dialout_reconnects: AtomicU64,
}

impl DeviceCounters {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    /// Every message the device put on the wire.
    pub fn sent(&self) -> u64 {
        Self::get(&self.snmp_responses)
            + Self::get(&self.traps_sent)
            + Self::get(&self.informs_sent)
            + Self::get(&self.syslog_sent)
            + Self::get(&self.flow_packets_sent)
    }
    /// Every message the device meant to send and could not.
    pub fn dropped(&self) -> u64 {
        Self::get(&self.syslog_dropped) + Self::get(&self.send_errors)
    }
    /// A JSON object of every counter plus the totals.
    pub fn to_json(&self) -> serde_json::Value {
        let g = Self::get;
        serde_json::json!({
            "sent": self.sent(),
            "dropped": self.dropped(),
            "malformed": g(&self.malformed),
            "snmp_requests": g(&self.snmp_requests),
            "snmp_responses": g(&self.snmp_responses),
            "bad_community": g(&self.bad_community),
            "bad_version": g(&self.bad_version),
            "not_requests": g(&self.not_requests),
            "traps_sent": g(&self.traps_sent),
            "informs_sent": g(&self.informs_sent),
            "informs_acked": g(&self.informs_acked),
            "informs_failed": g(&self.informs_failed),
            "syslog_sent": g(&self.syslog_sent),
            "syslog_dropped": g(&self.syslog_dropped),
            "flow_packets_sent": g(&self.flow_packets_sent),
            "send_errors": g(&self.send_errors),
            "gnmi_rpcs": g(&self.gnmi_rpcs),
            "gnmi_updates": g(&self.gnmi_updates),
            "dialout_sent": g(&self.dialout_sent),
            "dialout_dropped": g(&self.dialout_dropped),
            "dialout_reconnects": g(&self.dialout_reconnects),
        })
    }
}

/// A simulated device.
#[derive(Debug)]
pub struct Device {
    index: usize,
    name: String,
    sys_descr: String,
    boot: Instant,
    snmp_addr: OnceLock<SocketAddr>,
    /// The device's own address (`-device-net`): what it answers on and sends everything from.
    own_ip: OnceLock<Ipv4Addr>,
    gnmi_addr: OnceLock<SocketAddr>,
    /// Bumped by every admin or oper status change (what gNMI `ON_CHANGE` subscriptions watch).
    changes: AtomicU64,
    state: Mutex<DeviceState>,
    pub counters: DeviceCounters,
}

/// A small deterministic mix, so device `i` always gets the same rates and MAC.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Device {
    /// Device `index` of a fleet, booted at `boot`.
    pub fn new(index: usize, boot: Instant) -> Device {
        let name = format!("nl6-dev-{index:04}");
        let interfaces = (0..INTERFACES_PER_DEVICE)
            .map(|k| {
                let h = mix((index as u64) << 8 | k as u64);
                let carried = if k + 1 == INTERFACES_PER_DEVICE {
                    CARRIED_OCTETS
                } else {
                    0
                };
                Interface {
                    index: k as u32 + 1,
                    name: format!("eth{k}"),
                    speed_bps: 1_000_000_000,
                    mac: [0x02, 0x6e, 0x6c, (index >> 8) as u8, index as u8, k as u8],
                    admin_up: true,
                    oper_up: true,
                    last_change: 0,
                    in_octets: carried,
                    out_octets: carried,
                    in_errors: 0,
                    out_errors: 0,
                    in_discards: 0,
                    // 100 kB/s .. 1.1 MB/s: enough for counters to move visibly between two polls.
                    rate_in: 100_000 + h % 1_000_000,
                    rate_out: 100_000 + (h >> 20) % 1_000_000,
                    flow_mark_in: carried,
                    flow_mark_out: carried,
                    flaps: 0,
                }
            })
            .collect();
        Device {
            index,
            sys_descr: format!("nl6 simulated router {name}, {INTERFACES_PER_DEVICE} x 1GbE"),
            name,
            boot,
            snmp_addr: OnceLock::new(),
            own_ip: OnceLock::new(),
            gnmi_addr: OnceLock::new(),
            changes: AtomicU64::new(0),
            state: Mutex::new(DeviceState {
                interfaces,
                last_advance: boot,
            }),
            counters: DeviceCounters::default(),
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn sys_descr(&self) -> &str {
        &self.sys_descr
    }
    /// The bound SNMP address (set once by the fleet after binding).
    pub fn snmp_addr(&self) -> Option<SocketAddr> {
        self.snmp_addr.get().copied()
    }
    pub(crate) fn set_snmp_addr(&self, a: SocketAddr) {
        let _ = self.snmp_addr.set(a);
    }
    /// The device's own address under `-device-net` (set once by the fleet), else `None`.
    pub fn own_ip(&self) -> Option<Ipv4Addr> {
        self.own_ip.get().copied()
    }
    pub(crate) fn set_own_ip(&self, ip: Ipv4Addr) {
        let _ = self.own_ip.set(ip);
    }
    /// The gNMI address (set once by the fleet when gNMI is on).
    pub fn gnmi_addr(&self) -> Option<SocketAddr> {
        self.gnmi_addr.get().copied()
    }
    pub(crate) fn set_gnmi_addr(&self, a: SocketAddr) {
        let _ = self.gnmi_addr.set(a);
    }
    /// When the device booted.
    pub fn boot(&self) -> Instant {
        self.boot
    }
    /// How many admin or oper status changes the device has seen.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
    /// sysUpTime at `now`, in centiseconds (wraps like TimeTicks).
    pub fn uptime_ticks(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.boot).as_millis() / 10) as u32
    }

    /// Locks the state after bringing the traffic counters up to `now`.
    pub fn advance(&self, now: Instant) -> MutexGuard<'_, DeviceState> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let dt = now.saturating_duration_since(st.last_advance);
        if !dt.is_zero() {
            let micros = dt.as_micros() as u64;
            for i in st.interfaces.iter_mut().filter(|i| i.oper_up) {
                i.in_octets += i.rate_in * micros / 1_000_000;
                i.out_octets += i.rate_out * micros / 1_000_000;
            }
            st.last_advance = now;
        }
        st
    }

    /// Sets interface `if_index`'s oper status at `now`; returns whether it changed. A down transition
    /// also bumps the error and discard counters, as a real flap would.
    pub fn set_oper(&self, if_index: u32, up: bool, now: Instant) -> bool {
        let ticks = self.uptime_ticks(now);
        let mut st = self.advance(now);
        let Some(i) = st.interfaces.iter_mut().find(|i| i.index == if_index) else {
            return false;
        };
        // An interface an operator shut stays down whatever the link does.
        if i.oper_up == up || (up && !i.admin_up) {
            return false;
        }
        Self::flip_oper(i, up, ticks);
        self.changes.fetch_add(1, Ordering::Release);
        true
    }

    /// Sets interface `if_index`'s admin status at `now` (oper status follows it); returns whether the
    /// oper status changed, or `None` for an unknown interface.
    pub fn set_admin(&self, if_index: u32, up: bool, now: Instant) -> Option<bool> {
        let ticks = self.uptime_ticks(now);
        let mut st = self.advance(now);
        let i = st.interfaces.iter_mut().find(|i| i.index == if_index)?;
        if i.admin_up == up {
            return Some(false);
        }
        i.admin_up = up;
        let oper = i.oper_up != up;
        if oper {
            Self::flip_oper(i, up, ticks);
        }
        self.changes.fetch_add(1, Ordering::Release);
        Some(oper)
    }

    fn flip_oper(i: &mut Interface, up: bool, ticks: u32) {
        i.oper_up = up;
        i.last_change = ticks;
        if !up {
            i.in_errors += 3;
            i.out_errors += 1;
            i.in_discards += 7;
            i.flaps += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counters_grow_only_while_up() {
        let boot = Instant::now();
        let d = Device::new(3, boot);
        let t1 = boot + Duration::from_secs(2);
        let (a, b) = {
            let st = d.advance(t1);
            (st.interfaces[0].in_octets, st.interfaces[1].in_octets)
        };
        assert!(a > 0, "traffic must move the counters");
        assert!(d.set_oper(1, false, t1));
        assert!(!d.set_oper(1, false, t1), "no change the second time");
        let t2 = t1 + Duration::from_secs(5);
        let st = d.advance(t2);
        assert_eq!(
            st.interfaces[0].in_octets, a,
            "a down interface carries no traffic"
        );
        assert!(st.interfaces[1].in_octets > b, "the others keep going");
        assert_eq!(st.interfaces[0].last_change, 200);
        assert_eq!(st.interfaces[0].in_errors, 3);
    }

    #[test]
    fn admin_down_holds_the_link_down() {
        let boot = Instant::now();
        let d = Device::new(1, boot);
        assert_eq!(d.set_admin(2, false, boot), Some(true));
        assert!(
            !d.set_oper(2, true, boot),
            "a shut interface does not come up"
        );
        assert_eq!(d.set_admin(9, false, boot), None);
        assert_eq!(d.changes(), 1);
        assert_eq!(d.set_admin(2, true, boot), Some(true));
        let st = d.advance(boot);
        assert!(st.interfaces[1].admin_up && st.interfaces[1].oper_up);
    }

    #[test]
    fn identity_is_deterministic() {
        let boot = Instant::now();
        assert_eq!(Device::new(7, boot).name(), "nl6-dev-0007");
        let (a, b) = (Device::new(7, boot), Device::new(7, boot));
        assert_eq!(
            a.advance(boot).interfaces[2].rate_in,
            b.advance(boot).interfaces[2].rate_in
        );
        assert_eq!(a.uptime_ticks(boot + Duration::from_millis(1234)), 123);
    }
}
