//! A device's MIB view as an ordered table of (OID, value): the system group (1.3.6.1.2.1.1), ifNumber and
//! the IF-MIB ifTable (1.3.6.1.2.1.2.2), built from a device snapshot at request time.
//!
//! Lookups are binary searches on the sorted table: [`Mib::get`] for GET, [`Mib::next`] for GETNEXT and
//! GETBULK (the first entry strictly after an OID, which handles OIDs that are prefixes, gaps or past the
//! end). Plain values; no I/O, no clocks (the caller passes `now`).
#![forbid(unsafe_code)]

use super::ber::{Oid, Value};
use super::device::Device;
use std::time::Instant;

/// system (1.3.6.1.2.1.1).
pub const SYSTEM: [u32; 7] = [1, 3, 6, 1, 2, 1, 1];
/// ifTable (1.3.6.1.2.1.2.2).
pub const IF_TABLE: [u32; 8] = [1, 3, 6, 1, 2, 1, 2, 2];
/// ifEntry columns: 1.3.6.1.2.1.2.2.1.<column>.<ifIndex>.
const IF_ENTRY: [u32; 9] = [1, 3, 6, 1, 2, 1, 2, 2, 1];
/// sysUpTime.0, the first varbind of every v2 trap.
pub const SYS_UPTIME_0: [u32; 9] = [1, 3, 6, 1, 2, 1, 1, 3, 0];
/// The sysObjectID we report: under enterprise 32473, which RFC 5612 reserves for documentation.
pub const SYS_OBJECT_ID: [u32; 9] = [1, 3, 6, 1, 4, 1, 32473, 1, 6];

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

    /// The view of `device` at `now`.
    pub fn of_device(device: &Device, now: Instant) -> Mib {
        let uptime = device.uptime_ticks(now);
        let st = device.advance(now);
        let mut e: Vec<(Oid, Value)> = Vec::with_capacity(8 + st.interfaces.len() * 22);
        let sys = |leaf: u32| {
            let mut v = SYSTEM.to_vec();
            v.extend_from_slice(&[leaf, 0]);
            Oid(v)
        };
        let text = |s: &str| Value::OctetString(s.as_bytes().to_vec());
        e.push((sys(1), text(device.sys_descr())));
        e.push((sys(2), Value::Oid(Oid(SYS_OBJECT_ID.to_vec()))));
        e.push((sys(3), Value::TimeTicks(uptime)));
        e.push((sys(4), text("lab@nl6.invalid")));
        e.push((sys(5), text(device.name())));
        e.push((sys(6), text("nl6 lab rack")));
        e.push((sys(7), Value::Integer(72)));
        e.push((
            Oid(vec![1, 3, 6, 1, 2, 1, 2, 1, 0]),
            Value::Integer(st.interfaces.len() as i64),
        ));
        for i in &st.interfaces {
            let col = |c: u32| {
                let mut v = IF_ENTRY.to_vec();
                v.extend_from_slice(&[c, i.index]);
                Oid(v)
            };
            let status = |up: bool| Value::Integer(if up { 1 } else { 2 });
            let c32 = |v: u64| Value::Counter32(v as u32);
            e.push((col(1), Value::Integer(i.index as i64)));
            e.push((col(2), text(&i.name)));
            e.push((col(3), Value::Integer(6))); // ethernetCsmacd
            e.push((col(4), Value::Integer(1500)));
            e.push((col(5), Value::Gauge32(i.speed_bps)));
            e.push((col(6), Value::OctetString(i.mac.to_vec())));
            e.push((col(7), status(i.admin_up)));
            e.push((col(8), status(i.oper_up)));
            e.push((col(9), Value::TimeTicks(i.last_change)));
            e.push((col(10), c32(i.in_octets)));
            e.push((col(11), c32(i.in_packets())));
            e.push((col(12), c32(i.in_packets() / 50)));
            e.push((col(13), c32(i.in_discards)));
            e.push((col(14), c32(i.in_errors)));
            e.push((col(15), c32(0)));
            e.push((col(16), c32(i.out_octets)));
            e.push((col(17), c32(i.out_packets())));
            e.push((col(18), c32(i.out_packets() / 50)));
            e.push((col(19), c32(0)));
            e.push((col(20), c32(i.out_errors)));
            e.push((col(21), Value::Gauge32(0)));
            e.push((col(22), Value::Oid(Oid(vec![0, 0]))));
        }
        Mib::from_entries(e)
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
        assert_eq!(mib.len(), 8 + 4 * 22);
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
        // Past the last entry: nothing (endOfMibView).
        assert!(mib.next(&o("1.3.6.1.2.1.2.2.1.22.4")).is_none());
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
