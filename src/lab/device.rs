//! One simulated device: its identity (name, sysDescr, boot instant), its interface table whose counters
//! grow with simulated traffic, and its message counters.
//!
//! Traffic is simulated lazily: each interface has a steady rate and [`Device::advance`] adds
//! `rate × elapsed` to the counters of interfaces that are up, so nothing ticks per device in the
//! background. No I/O here.
//!
//! A device is small (about 100 bytes) so that ten million fit in one process: its name and sysDescr are
//! derived from the index ([`name`]), its addresses packed in atomics, and what a device nobody touched
//! would hold is computed rather than stored: its interface state (every interface up, the counters
//! carried plus rate × time since boot) until something changes it (a flap, an admin change, a flow
//! mark), and its message counters (zeros) until the first increment. Each is allocated at that moment.
#![forbid(unsafe_code)]

mod addr;
mod name;
use addr::PackedAddr;
pub use name::{index_of, prefix_ranges, DeviceName, NAME_PREFIX};

use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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
/// Interface names, by position.
const IF_NAMES: [&str; INTERFACES_PER_DEVICE] = ["eth0", "eth1", "eth2", "eth3"];

/// One row of the interface table.
#[derive(Debug, Clone)]
pub struct Interface {
    /// ifIndex, from 1.
    pub index: u32,
    pub name: &'static str,
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

    /// Interface `k` of device `index` as nobody changed it, `micros` after boot.
    fn untouched(index: usize, k: usize, micros: u64) -> Interface {
        let h = mix((index as u64) << 8 | k as u64);
        let carried = if k + 1 == INTERFACES_PER_DEVICE {
            CARRIED_OCTETS
        } else {
            0
        };
        // 100 kB/s .. 1.1 MB/s: enough for counters to move visibly between two polls.
        let rate_in = 100_000 + h % 1_000_000;
        let rate_out = 100_000 + (h >> 20) % 1_000_000;
        Interface {
            index: k as u32 + 1,
            name: IF_NAMES[k],
            speed_bps: 1_000_000_000,
            mac: [0x02, 0x6e, 0x6c, (index >> 8) as u8, index as u8, k as u8],
            admin_up: true,
            oper_up: true,
            last_change: 0,
            in_octets: carried + grown(rate_in, micros),
            out_octets: carried + grown(rate_out, micros),
            in_errors: 0,
            out_errors: 0,
            in_discards: 0,
            rate_in,
            rate_out,
            flow_mark_in: carried,
            flow_mark_out: carried,
            flaps: 0,
        }
    }
}

/// Octets a `rate` (bytes per second) carries in `micros`.
fn grown(rate: u64, micros: u64) -> u64 {
    (rate as u128 * micros as u128 / 1_000_000) as u64
}

/// The mutable part of a device.
#[derive(Debug)]
pub struct DeviceState {
    pub interfaces: [Interface; INTERFACES_PER_DEVICE],
    last_advance: Instant,
}

impl DeviceState {
    /// Device `index`'s state at `now` as nobody changed it since `boot`.
    fn untouched(index: usize, boot: Instant, now: Instant) -> DeviceState {
        let micros = now.saturating_duration_since(boot).as_micros() as u64;
        DeviceState {
            interfaces: std::array::from_fn(|k| Interface::untouched(index, k, micros)),
            last_advance: now.max(boot),
        }
    }
}

/// A read of a device's state: the live state, locked, or the state of an untouched device computed on
/// the stack (nothing allocated, nothing stored).
// The computed variant is large on purpose: boxing it would allocate on every read of an untouched device.
#[allow(clippy::large_enum_variant)]
pub enum StateRead<'a> {
    Live(MutexGuard<'a, DeviceState>),
    Untouched(DeviceState),
}

impl Deref for StateRead<'_> {
    type Target = DeviceState;
    fn deref(&self) -> &DeviceState {
        match self {
            StateRead::Live(g) => g,
            StateRead::Untouched(s) => s,
        }
    }
}

/// What a device holds once something changed it.
#[derive(Debug)]
struct Live {
    /// Bumped by every admin or oper status change (what gNMI `ON_CHANGE` subscriptions watch).
    changes: AtomicU64,
    state: Mutex<DeviceState>,
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
    pub flow_sequence: AtomicU32,
    /// gNMI RPCs answered (Capabilities, Get, Set, Subscribe) and notifications streamed to subscribers.
    pub gnmi_rpcs: AtomicU64,
    pub gnmi_updates: AtomicU64,
    /// gNMI RPCs refused (any status but OK: a bad path, a limit, credentials).
    pub gnmi_refused: AtomicU64,
    /// Dial-out: notifications the collector took, notifications dropped (queue full or the collector
    /// away), and connections made again after the collector went away.
    pub dialout_sent: AtomicU64,
    pub dialout_dropped: AtomicU64,
    pub dialout_reconnects: AtomicU64,
}

impl DeviceCounters {
    /// How many counters [`DeviceCounters::named`] lists.
    pub const NAMED: usize = 20;
    /// Every counter at zero (what a device that never counted reads).
    pub const fn zero() -> DeviceCounters {
        DeviceCounters {
            snmp_requests: AtomicU64::new(0),
            snmp_responses: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            bad_community: AtomicU64::new(0),
            bad_version: AtomicU64::new(0),
            not_requests: AtomicU64::new(0),
            traps_sent: AtomicU64::new(0),
            informs_sent: AtomicU64::new(0),
            informs_acked: AtomicU64::new(0),
            informs_failed: AtomicU64::new(0),
            syslog_sent: AtomicU64::new(0),
            syslog_dropped: AtomicU64::new(0),
            flow_packets_sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            syslog_sequence: AtomicU64::new(0),
            flow_sequence: AtomicU32::new(0),
            gnmi_rpcs: AtomicU64::new(0),
            gnmi_updates: AtomicU64::new(0),
            gnmi_refused: AtomicU64::new(0),
            dialout_sent: AtomicU64::new(0),
            dialout_dropped: AtomicU64::new(0),
            dialout_reconnects: AtomicU64::new(0),
        }
    }
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
    /// Every message counter by its name in the API (a device's `counters`, the fleet's `totals`).
    pub fn named(&self) -> [(&'static str, &AtomicU64); Self::NAMED] {
        [
            ("malformed", &self.malformed),
            ("snmp_requests", &self.snmp_requests),
            ("snmp_responses", &self.snmp_responses),
            ("bad_community", &self.bad_community),
            ("bad_version", &self.bad_version),
            ("not_requests", &self.not_requests),
            ("traps_sent", &self.traps_sent),
            ("informs_sent", &self.informs_sent),
            ("informs_acked", &self.informs_acked),
            ("informs_failed", &self.informs_failed),
            ("syslog_sent", &self.syslog_sent),
            ("syslog_dropped", &self.syslog_dropped),
            ("flow_packets_sent", &self.flow_packets_sent),
            ("send_errors", &self.send_errors),
            ("gnmi_rpcs", &self.gnmi_rpcs),
            ("gnmi_updates", &self.gnmi_updates),
            ("gnmi_refused", &self.gnmi_refused),
            ("dialout_sent", &self.dialout_sent),
            ("dialout_dropped", &self.dialout_dropped),
            ("dialout_reconnects", &self.dialout_reconnects),
        ]
    }
    /// A JSON object of every counter plus the totals.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("sent".into(), self.sent().into());
        m.insert("dropped".into(), self.dropped().into());
        for (name, c) in self.named() {
            m.insert(name.into(), Self::get(c).into());
        }
        serde_json::Value::Object(m)
    }
}

/// A device's message counters, allocated at the first use through `Deref` (an increment); [`peek`]
/// reads them without allocating (zeros until then).
///
/// [`peek`]: LazyCounters::peek
#[derive(Debug, Default)]
pub struct LazyCounters(OnceLock<Box<DeviceCounters>>);

/// The counters of a device that never counted anything.
static NO_COUNTS: DeviceCounters = DeviceCounters::zero();

impl LazyCounters {
    /// The counters as they are, without allocating them.
    pub fn peek(&self) -> &DeviceCounters {
        self.0.get().map_or(&NO_COUNTS, |c| c)
    }
}

impl Deref for LazyCounters {
    type Target = DeviceCounters;
    fn deref(&self) -> &DeviceCounters {
        self.0.get_or_init(Box::default)
    }
}

/// A simulated device.
#[derive(Debug)]
pub struct Device {
    index: u32,
    /// The device's own address (`-device-net`): what it answers on and sends everything from; 0 unset.
    own_ip: AtomicU32,
    boot: Instant,
    snmp_addr: PackedAddr,
    gnmi_addr: PackedAddr,
    /// IPv6 addresses (SNMP, gNMI), rare: a fleet bound to `::1`.
    v6: OnceLock<Box<[OnceLock<SocketAddr>; 2]>>,
    /// The state once something changed it; until then reads compute it.
    live: OnceLock<Box<Live>>,
    pub counters: LazyCounters,
}

/// A small deterministic mix, so device `i` always gets the same rates and MAC.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// [`mix`] of `x` as a fraction in [0, 1) (its top 53 bits, all an `f64` holds).
pub(crate) fn mix_fraction(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

impl Device {
    /// Device `index` of a fleet, booted at `boot`.
    pub fn new(index: usize, boot: Instant) -> Device {
        Device {
            index: u32::try_from(index).expect("a fleet holds fewer than 2^32 devices"),
            own_ip: AtomicU32::new(0),
            boot,
            snmp_addr: PackedAddr::default(),
            gnmi_addr: PackedAddr::default(),
            v6: OnceLock::new(),
            live: OnceLock::new(),
            counters: LazyCounters::default(),
        }
    }

    pub fn index(&self) -> usize {
        self.index as usize
    }
    pub fn name(&self) -> DeviceName {
        DeviceName::of(self.index())
    }
    pub fn sys_descr(&self) -> String {
        format!(
            "nl6 simulated router {}, {INTERFACES_PER_DEVICE} x 1GbE",
            self.name()
        )
    }
    fn v6(&self, slot: usize) -> &OnceLock<SocketAddr> {
        &self.v6.get_or_init(Box::default)[slot]
    }
    /// The bound SNMP address (set once by the fleet after binding).
    pub fn snmp_addr(&self) -> Option<SocketAddr> {
        self.snmp_addr.get(self.v6.get().map_or(&NO_V6, |b| &b[0]))
    }
    pub(crate) fn set_snmp_addr(&self, a: SocketAddr) {
        self.snmp_addr.set(a, || self.v6(0));
    }
    /// The device's own address under `-device-net` (set once by the fleet), else `None`.
    pub fn own_ip(&self) -> Option<Ipv4Addr> {
        match self.own_ip.load(Ordering::Acquire) {
            0 => None,
            ip => Some(Ipv4Addr::from(ip)),
        }
    }
    pub(crate) fn set_own_ip(&self, ip: Ipv4Addr) {
        let _ = self
            .own_ip
            .compare_exchange(0, ip.into(), Ordering::AcqRel, Ordering::Acquire);
    }
    /// The gNMI address (set once by the fleet when gNMI is on).
    pub fn gnmi_addr(&self) -> Option<SocketAddr> {
        self.gnmi_addr.get(self.v6.get().map_or(&NO_V6, |b| &b[1]))
    }
    pub(crate) fn set_gnmi_addr(&self, a: SocketAddr) {
        self.gnmi_addr.set(a, || self.v6(1));
    }
    /// When the device booted.
    pub fn boot(&self) -> Instant {
        self.boot
    }
    /// How many admin or oper status changes the device has seen.
    pub fn changes(&self) -> u64 {
        self.live
            .get()
            .map_or(0, |l| l.changes.load(Ordering::Acquire))
    }
    /// Whether something changed the device's state (it holds its own from then on).
    pub fn is_live(&self) -> bool {
        self.live.get().is_some()
    }
    /// sysUpTime at `now`, in centiseconds (wraps like TimeTicks).
    pub fn uptime_ticks(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.boot).as_millis() / 10) as u32
    }

    /// The state at `now`: the live one, locked after bringing its traffic counters up to `now`, or,
    /// for a device nobody changed, computed without storing anything.
    pub fn advance(&self, now: Instant) -> StateRead<'_> {
        match self.live.get() {
            Some(l) => StateRead::Live(Self::bring_up_to(l, now)),
            None => StateRead::Untouched(DeviceState::untouched(self.index(), self.boot, now)),
        }
    }

    /// The live state at `now`, locked, made live first if it was not (what a change needs).
    pub fn advance_mut(&self, now: Instant) -> MutexGuard<'_, DeviceState> {
        let l = self.live.get_or_init(|| {
            // Made live at the clock's present, not the caller's `now`: a caller that took `now`
            // before another thread read the untouched device at a later time would otherwise start
            // the live counters below what that reader answered (a flap would then freeze them there).
            let at = now.max(Instant::now());
            Box::new(Live {
                changes: AtomicU64::new(0),
                state: Mutex::new(DeviceState::untouched(self.index(), self.boot, at)),
            })
        });
        Self::bring_up_to(l, now)
    }

    fn bring_up_to(l: &Live, now: Instant) -> MutexGuard<'_, DeviceState> {
        let mut st = l.state.lock().unwrap_or_else(|e| e.into_inner());
        let dt = now.saturating_duration_since(st.last_advance);
        if !dt.is_zero() {
            let micros = dt.as_micros() as u64;
            for i in st.interfaces.iter_mut().filter(|i| i.oper_up) {
                i.in_octets += grown(i.rate_in, micros);
                i.out_octets += grown(i.rate_out, micros);
            }
            st.last_advance = now;
        }
        st
    }

    fn changed(&self) {
        if let Some(l) = self.live.get() {
            l.changes.fetch_add(1, Ordering::Release);
        }
    }

    /// Sets interface `if_index`'s oper status at `now`; returns whether it changed. A down transition
    /// also bumps the error and discard counters, as a real flap would.
    pub fn set_oper(&self, if_index: u32, up: bool, now: Instant) -> bool {
        let ticks = self.uptime_ticks(now);
        if !(1..=INTERFACES_PER_DEVICE as u32).contains(&if_index) {
            return false;
        }
        if up && !self.is_live() {
            return false; // an untouched device's interfaces are all up: nothing to make live for
        }
        let mut st = self.advance_mut(now);
        let i = &mut st.interfaces[if_index as usize - 1];
        // An interface an operator shut stays down whatever the link does.
        if i.oper_up == up || (up && !i.admin_up) {
            return false;
        }
        Self::flip_oper(i, up, ticks);
        drop(st);
        self.changed();
        true
    }

    /// Sets interface `if_index`'s admin status at `now` (oper status follows it); returns whether the
    /// oper status changed, or `None` for an unknown interface.
    pub fn set_admin(&self, if_index: u32, up: bool, now: Instant) -> Option<bool> {
        let ticks = self.uptime_ticks(now);
        if !(1..=INTERFACES_PER_DEVICE as u32).contains(&if_index) {
            return None;
        }
        if up && !self.is_live() {
            return Some(false); // already up, as every untouched interface is
        }
        let mut st = self.advance_mut(now);
        let i = &mut st.interfaces[if_index as usize - 1];
        if i.admin_up == up {
            return Some(false);
        }
        i.admin_up = up;
        let oper = i.oper_up != up;
        if oper {
            Self::flip_oper(i, up, ticks);
        }
        drop(st);
        self.changed();
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

/// The (never set) IPv6 slot of a device bound to IPv4.
static NO_V6: OnceLock<SocketAddr> = OnceLock::new();

#[cfg(test)]
mod tests;
