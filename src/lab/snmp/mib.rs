//! A device's MIB view as an ordered table of (OID, value): the system group (1.3.6.1.2.1.1), ifNumber,
//! the IF-MIB ifTable (1.3.6.1.2.1.2.2) and ifXTable (1.3.6.1.2.1.31.1.1): `ifName`, the multicast and
//! broadcast packet counters, the 64-bit `ifHC*` counters (Counter64) and `ifHighSpeed` (Mbit/s).
//!
//! Both tables read the same 64-bit device counters: an ifTable Counter32 is its ifXTable Counter64
//! modulo 2^32 (`ifInOctets` = `ifHCInOctets` mod 2^32), so a manager polling either sees one device.
//!
//! Every device has the same objects, so their OIDs are sorted once per process (`layout`) and a
//! request reads a [`DeviceMib`]: that shared layout over the device's state, locked and brought up to
//! date once for the request. Only the values a request asks for are made, so a GET neither rebuilds
//! nor sorts anything (building and sorting the whole table would cost about 22 KB a request).
//!
//! Lookups ([`MibView`]) are binary searches on the sorted OIDs: `get` for GET, `next` for GETNEXT and
//! GETBULK (the first entry strictly after an OID, which handles OIDs that are prefixes, gaps or past
//! the end). [`Mib`] is an owned table with the same lookups. Plain values; no I/O, no clocks (the
//! caller passes `now`).
#![forbid(unsafe_code)]

use super::super::device::{Device, Interface, StateRead, INTERFACES_PER_DEVICE};
use super::ber::{Oid, Value};
use std::sync::OnceLock;
use std::time::Instant;

/// system (1.3.6.1.2.1.1).
pub const SYSTEM: [u32; 7] = [1, 3, 6, 1, 2, 1, 1];
/// ifTable (1.3.6.1.2.1.2.2).
pub const IF_TABLE: [u32; 8] = [1, 3, 6, 1, 2, 1, 2, 2];
/// ifEntry columns: 1.3.6.1.2.1.2.2.1.<column>.<ifIndex>.
const IF_ENTRY: [u32; 9] = [1, 3, 6, 1, 2, 1, 2, 2, 1];
/// ifXTable (1.3.6.1.2.1.31.1.1).
pub const IF_X_TABLE: [u32; 10] = [1, 3, 6, 1, 2, 1, 31, 1, 1, 1];
/// ifXEntry columns: 1.3.6.1.2.1.31.1.1.1.<column>.<ifIndex>; ifName (1) to ifCounterDiscontinuityTime
/// (19), every column of RFC 2863's ifXEntry.
const IF_X_COLUMNS: u32 = 19;
/// ifEntry columns: ifIndex (1) to ifSpecific (22).
const IF_COLUMNS: u32 = 22;
/// sysUpTime.0, the first varbind of every v2 trap.
pub const SYS_UPTIME_0: [u32; 9] = [1, 3, 6, 1, 2, 1, 1, 3, 0];
/// The sysObjectID we report: under enterprise 32473, which RFC 5612 reserves for documentation.
pub const SYS_OBJECT_ID: [u32; 9] = [1, 3, 6, 1, 4, 1, 32473, 1, 6];

/// Ordered lookups over a MIB: entry `i` has OID [`MibView::oid`] and value [`MibView::value`], OIDs
/// strictly increasing.
pub trait MibView {
    fn len(&self) -> usize;
    fn oid(&self, i: usize) -> &Oid;
    fn value(&self, i: usize) -> Value;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The index of the first entry whose OID is not below `oid` (`strictly_after`: not at or below).
    fn position(&self, oid: &Oid, strictly_after: bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let o = self.oid(mid);
            if o < oid || (strictly_after && o == oid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
    /// The value at exactly `oid`.
    fn get_value(&self, oid: &Oid) -> Option<Value> {
        let i = self.position(oid, false);
        (i < self.len() && self.oid(i) == oid).then(|| self.value(i))
    }
    /// The first entry strictly after `oid` in OID order.
    fn next_entry(&self, oid: &Oid) -> Option<(Oid, Value)> {
        let i = self.position(oid, true);
        (i < self.len()).then(|| (self.oid(i).clone(), self.value(i)))
    }
    /// Whether any entry lies at or under `prefix`.
    fn covers(&self, prefix: &Oid) -> bool {
        let i = self.position(prefix, false);
        i < self.len() && self.oid(i).starts_with(prefix)
    }
}

/// What one entry of the shared layout reads from a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// A system scalar, by its leaf arc (sysDescr is 1, sysName 5).
    System(u32),
    IfNumber,
    /// An ifEntry column of the interface at `row` (0-based).
    If {
        column: u32,
        row: usize,
    },
    /// An ifXEntry column of the interface at `row` (0-based).
    IfX {
        column: u32,
        row: usize,
    },
}

/// The OIDs every device answers, sorted once per process, with what each reads.
fn layout() -> &'static [(Oid, Field)] {
    static LAYOUT: OnceLock<Vec<(Oid, Field)>> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let mut e: Vec<(Oid, Field)> = (1..=7)
            .map(|leaf| {
                let mut v = SYSTEM.to_vec();
                v.extend_from_slice(&[leaf, 0]);
                (Oid(v), Field::System(leaf))
            })
            .collect();
        e.push((Oid(vec![1, 3, 6, 1, 2, 1, 2, 1, 0]), Field::IfNumber));
        for row in 0..INTERFACES_PER_DEVICE {
            let instance = |entry: &[u32], column: u32| {
                let mut v = entry.to_vec();
                v.extend_from_slice(&[column, row as u32 + 1]);
                Oid(v)
            };
            for column in 1..=IF_COLUMNS {
                e.push((instance(&IF_ENTRY, column), Field::If { column, row }));
            }
            for column in 1..=IF_X_COLUMNS {
                e.push((instance(&IF_X_TABLE, column), Field::IfX { column, row }));
            }
        }
        e.sort_by(|a, b| a.0.cmp(&b.0));
        e
    })
}

/// One device's MIB for the length of a request: the shared layout over the device's state, locked
/// and brought up to date once.
pub struct DeviceMib<'a> {
    device: &'a Device,
    state: StateRead<'a>,
    uptime: u32,
    layout: &'static [(Oid, Field)],
}

impl<'a> DeviceMib<'a> {
    /// `device`'s view at `now` (holds the device's state lock until dropped).
    pub fn of(device: &'a Device, now: Instant) -> DeviceMib<'a> {
        DeviceMib {
            uptime: device.uptime_ticks(now),
            state: device.advance(now),
            device,
            layout: layout(),
        }
    }
}

impl MibView for DeviceMib<'_> {
    fn len(&self) -> usize {
        self.layout.len()
    }
    fn oid(&self, i: usize) -> &Oid {
        &self.layout[i].0
    }
    fn value(&self, i: usize) -> Value {
        match self.layout[i].1 {
            Field::System(1) => text(&self.device.sys_descr()),
            Field::System(2) => Value::Oid(Oid(SYS_OBJECT_ID.to_vec())),
            Field::System(3) => Value::TimeTicks(self.uptime),
            Field::System(4) => text("lab@nl6.invalid"),
            Field::System(5) => text(&self.device.name()),
            Field::System(6) => text("nl6 lab rack"),
            Field::System(_) => Value::Integer(72),
            Field::IfNumber => Value::Integer(self.state.interfaces.len() as i64),
            Field::If { column, row } => match self.state.interfaces.get(row) {
                Some(i) => if_entry(i, column),
                None => Value::NoSuchInstance,
            },
            Field::IfX { column, row } => match self.state.interfaces.get(row) {
                Some(i) => if_x_entry(i, column),
                None => Value::NoSuchInstance,
            },
        }
    }
}

fn text(s: &str) -> Value {
    Value::OctetString(s.as_bytes().to_vec())
}

/// A 32-bit ifTable counter: the device's 64-bit count modulo 2^32, as Counter32 wraps.
fn c32(v: u64) -> Value {
    Value::Counter32(v as u32)
}

/// The non-unicast share of `packets` (ifTable's ifInNUcastPkts), split as ifXTable reports it:
/// (multicast, broadcast), a fifth of them broadcast.
fn non_unicast(packets: u64) -> (u64, u64) {
    let n = packets / 50;
    (n - n / 5, n / 5)
}

/// ifEntry `column` of interface `i`.
fn if_entry(i: &Interface, column: u32) -> Value {
    let status = |up: bool| Value::Integer(if up { 1 } else { 2 });
    let nucast = |p: u64| {
        let (m, b) = non_unicast(p);
        c32(m + b)
    };
    match column {
        1 => Value::Integer(i.index as i64),
        2 => text(i.name),
        3 => Value::Integer(6), // ethernetCsmacd
        4 => Value::Integer(1500),
        5 => Value::Gauge32(i.speed_bps),
        6 => Value::OctetString(i.mac.to_vec()),
        7 => status(i.admin_up),
        8 => status(i.oper_up),
        9 => Value::TimeTicks(i.last_change),
        10 => c32(i.in_octets),
        11 => c32(i.in_packets()),
        12 => nucast(i.in_packets()),
        13 => c32(i.in_discards),
        14 => c32(i.in_errors),
        16 => c32(i.out_octets),
        17 => c32(i.out_packets()),
        18 => nucast(i.out_packets()),
        20 => c32(i.out_errors),
        21 => Value::Gauge32(0),
        22 => Value::Oid(Oid(vec![0, 0])),
        _ => c32(0), // ifInUnknownProtos (15), ifOutDiscards (19)
    }
}

/// ifXEntry `column` of interface `i` (RFC 2863): the same counters as [`if_entry`], 64 bits wide.
fn if_x_entry(i: &Interface, column: u32) -> Value {
    let truth = |yes: bool| Value::Integer(if yes { 1 } else { 2 });
    let (in_multicast, in_broadcast) = non_unicast(i.in_packets());
    let (out_multicast, out_broadcast) = non_unicast(i.out_packets());
    match column {
        1 => text(i.name),
        2 => c32(in_multicast),
        3 => c32(in_broadcast),
        4 => c32(out_multicast),
        5 => c32(out_broadcast),
        6 => Value::Counter64(i.in_octets),
        7 => Value::Counter64(i.in_packets()),
        8 => Value::Counter64(in_multicast),
        9 => Value::Counter64(in_broadcast),
        10 => Value::Counter64(i.out_octets),
        11 => Value::Counter64(i.out_packets()),
        12 => Value::Counter64(out_multicast),
        13 => Value::Counter64(out_broadcast),
        14 => truth(true), // ifLinkUpDownTrapEnable: enabled, the device sends linkUp/linkDown
        15 => Value::Gauge32(i.speed_bps / 1_000_000),
        16 => truth(false), // ifPromiscuousMode
        17 => truth(true),  // ifConnectorPresent
        18 => text(""),     // ifAlias: none configured
        // ifCounterDiscontinuityTime (19): no discontinuity since the device booted.
        _ => Value::TimeTicks(0),
    }
}

impl MibView for Mib {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn oid(&self, i: usize) -> &Oid {
        &self.entries[i].0
    }
    fn value(&self, i: usize) -> Value {
        self.entries[i].1.clone()
    }
}

/// The ordered table.
#[derive(Debug, Clone, Default)]
pub struct Mib {
    entries: Vec<(Oid, Value)>,
}

impl Mib {
    /// A table from unordered entries (sorted here; a later duplicate OID replaces an earlier one).
    pub fn from_entries(mut entries: Vec<(Oid, Value)>) -> Mib {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                std::mem::swap(&mut earlier.1, &mut later.1);
                true
            } else {
                false
            }
        });
        Mib { entries }
    }

    /// Every entry of `device`'s view at `now`, as an owned table (tests and tools; requests read a
    /// [`DeviceMib`] instead, which copies nothing).
    pub fn of_device(device: &Device, now: Instant) -> Mib {
        let view = DeviceMib::of(device, now);
        Mib {
            entries: (0..view.len())
                .map(|i| (view.oid(i).clone(), view.value(i)))
                .collect(),
        }
    }

    /// The value at exactly `oid`.
    pub fn get(&self, oid: &Oid) -> Option<&Value> {
        self.entries
            .binary_search_by(|(o, _)| o.cmp(oid))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// The first entry strictly after `oid` in OID order.
    pub fn next(&self, oid: &Oid) -> Option<&(Oid, Value)> {
        let i = self.entries.partition_point(|(o, _)| o <= oid);
        self.entries.get(i)
    }

    /// Whether any entry lies under `prefix` (GET answers noSuchObject vs noSuchInstance on this).
    pub fn has_subtree(&self, prefix: &Oid) -> bool {
        self.next(prefix)
            .is_some_and(|(o, _)| o.starts_with(prefix))
            || self.get(prefix).is_some()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn entries(&self) -> &[(Oid, Value)] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> Oid {
        Oid::parse(s).unwrap()
    }

    #[test]
    fn oid_order_is_numeric_per_arc_with_prefixes_first() {
        let mut v = [
            o("1.3.6.1.2.1.2.2.1.10.1"),
            o("1.3.6.1.2.1.2.2.1.2.1"),
            o("1.3.6.1.2.1.2"),
            o("1.3.6.1.2.1.1.9"),
        ];
        v.sort();
        let want = [
            "1.3.6.1.2.1.1.9",
            "1.3.6.1.2.1.2",
            "1.3.6.1.2.1.2.2.1.2.1",
            "1.3.6.1.2.1.2.2.1.10.1",
        ];
        assert_eq!(v.iter().map(|x| x.to_string()).collect::<Vec<_>>(), want);
    }

    #[test]
    fn getnext_walks_the_device_table_in_order() {
        let boot = Instant::now();
        let d = Device::new(1, boot);
        let mib = Mib::of_device(&d, boot);
        assert_eq!(mib.len(), 8 + 4 * (22 + 19));
        // From the system prefix to sysDescr.0.
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.1")).unwrap().0,
            o("1.3.6.1.2.1.1.1.0")
        );
        // From an exact entry to the following one.
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.1.1.0")).unwrap().0,
            o("1.3.6.1.2.1.1.2.0")
        );
        // From a gap to the next column's first row: ifTable is column-major.
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.2.2.1.1.4")).unwrap().0,
            o("1.3.6.1.2.1.2.2.1.2.1")
        );
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.2.2.1.9.99")).unwrap().0,
            o("1.3.6.1.2.1.2.2.1.10.1")
        );
        // ifTable's last entry is followed by ifXTable's first (ifName.1), which is also column-major.
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.2.2.1.22.4")).unwrap().0,
            o("1.3.6.1.2.1.31.1.1.1.1.1")
        );
        assert_eq!(
            mib.next(&o("1.3.6.1.2.1.31.1.1.1.6.4")).unwrap().0,
            o("1.3.6.1.2.1.31.1.1.1.7.1")
        );
        // Past the last entry: nothing (endOfMibView).
        assert!(mib.next(&o("1.3.6.1.2.1.31.1.1.1.19.4")).is_none());
        assert!(mib.next(&o("1.3.6.1.4")).is_none());
        // From before everything: the first entry.
        assert_eq!(mib.next(&o("0.0")).unwrap().0, o("1.3.6.1.2.1.1.1.0"));
        // A full walk visits every entry once, strictly increasing.
        let mut at = o("0.0");
        let mut seen = 0;
        while let Some((next, _)) = mib.next(&at) {
            assert!(*next > at);
            at = next.clone();
            seen += 1;
        }
        assert_eq!(seen, mib.len());
    }

    #[test]
    fn get_finds_exact_instances_only() {
        let boot = Instant::now();
        let d = Device::new(2, boot);
        let mib = Mib::of_device(&d, boot);
        assert_eq!(
            mib.get(&o("1.3.6.1.2.1.1.5.0")),
            Some(&Value::OctetString(b"nl6-dev-0002".to_vec()))
        );
        assert_eq!(
            mib.get(&o("1.3.6.1.2.1.2.2.1.8.3")),
            Some(&Value::Integer(1))
        );
        assert_eq!(mib.get(&o("1.3.6.1.2.1.1.5")), None);
        assert!(mib.has_subtree(&o("1.3.6.1.2.1.1.5")));
        assert!(!mib.has_subtree(&o("1.3.6.1.2.1.1.99")));
    }

    /// The value at `oid` as an unsigned number (Counter32, Counter64, Gauge32).
    fn number(mib: &Mib, oid: &str) -> u64 {
        match mib.get(&o(oid)) {
            Some(Value::Counter32(v) | Value::Gauge32(v)) => u64::from(*v),
            Some(Value::Counter64(v)) => *v,
            other => panic!("{oid}: not a number: {other:?}"),
        }
    }

    #[test]
    fn ifxtable_counters_are_the_iftable_ones_64_bits_wide() {
        let boot = Instant::now();
        let d = Device::new(3, boot);
        let mib = Mib::of_device(&d, boot + std::time::Duration::from_secs(90));
        for row in 1..=4 {
            let if_ = |c: u32| format!("1.3.6.1.2.1.2.2.1.{c}.{row}");
            let ifx = |c: u32| format!("1.3.6.1.2.1.31.1.1.1.{c}.{row}");
            // ifInOctets/ifHCInOctets, ifInUcastPkts/ifHCInUcastPkts, and the same outbound.
            for (narrow, wide) in [(10, 6), (11, 7), (16, 10), (17, 11)] {
                assert!(
                    matches!(mib.get(&o(&ifx(wide))), Some(Value::Counter64(_))),
                    "{}",
                    ifx(wide)
                );
                assert_eq!(
                    number(&mib, &ifx(wide)) % (1 << 32),
                    number(&mib, &if_(narrow)),
                    "{} against {}",
                    ifx(wide),
                    if_(narrow)
                );
            }
            // Multicast + broadcast is ifTable's non-unicast count, in 32 and in 64 bits.
            for (nucast, multi, broad, hc_multi, hc_broad) in [(12, 2, 3, 8, 9), (18, 4, 5, 12, 13)]
            {
                let split = number(&mib, &ifx(multi)) + number(&mib, &ifx(broad));
                assert_eq!(split, number(&mib, &if_(nucast)));
                assert_eq!(
                    number(&mib, &ifx(hc_multi)) + number(&mib, &ifx(hc_broad)),
                    split
                );
            }
            assert_eq!(
                mib.get(&o(&ifx(1))),
                mib.get(&o(&if_(2))),
                "ifName is ifDescr"
            );
            assert_eq!(
                number(&mib, &ifx(15)) * 1_000_000,
                number(&mib, &if_(5)),
                "ifHighSpeed is ifSpeed in Mbit/s"
            );
        }
        // The last interface carried more than 2^32 octets before boot: the 32-bit counter has wrapped.
        let hc = number(&mib, "1.3.6.1.2.1.31.1.1.1.6.4");
        assert!(hc > 1 << 32, "ifHCInOctets.4 = {hc}");
        assert!(number(&mib, "1.3.6.1.2.1.2.2.1.10.4") < hc);
    }

    #[test]
    fn duplicates_keep_the_later_value() {
        let m = Mib::from_entries(vec![
            (o("1.1"), Value::Integer(1)),
            (o("1.0"), Value::Null),
            (o("1.1"), Value::Integer(2)),
        ]);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get(&o("1.1")), Some(&Value::Integer(2)));
    }
}
