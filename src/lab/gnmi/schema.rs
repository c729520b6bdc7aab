//! The OpenConfig view of one device: every leaf nl6 serves over gNMI, read from the same device state
//! (and at the same instant) as SNMP's MIB view, so an SNMP counter and its gNMI leaf agree:
//!
//! | path | value | SNMP |
//! |---|---|---|
//! | `/system/state/hostname` | string | sysName |
//! | `/system/state/boot-time` | uint64, ns since the epoch | sysUpTime's zero |
//! | `/interfaces/interface[name=…]/config/enabled` | bool (writable) | ifAdminStatus |
//! | `…/state/{name,ifindex,admin-status,oper-status,last-change}` | string, uint32, `UP`/`DOWN`, uint64 ns | ifName, ifIndex, ifAdminStatus, ifOperStatus, ifLastChange |
//! | `…/state/counters/{in,out}-octets`, `{in,out}-pkts`, `{in,out}-errors`, `in-discards` | uint64 | ifHCInOctets… |
//!
//! Plain values; selecting leaves is [`super::path::selects`]'.
#![forbid(unsafe_code)]

use super::path::Elem;
use crate::lab::device::Device;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A leaf's value, typed as the model types it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    Str(String),
    U32(u32),
    U64(u64),
    Bool(bool),
}

/// One leaf: its absolute path and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub path: Vec<Elem>,
    pub val: Val,
}

/// Converts a device's monotonic instants to wall-clock nanoseconds (one anchor for the whole target).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall: SystemTime,
    mono: Instant,
}

impl Clock {
    pub fn now() -> Clock {
        Clock {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }
    /// `t` in nanoseconds since the epoch.
    pub fn nanos(&self, t: Instant) -> u64 {
        let wall = match t.checked_duration_since(self.mono) {
            Some(after) => self.wall + after,
            None => self.wall - self.mono.saturating_duration_since(t),
        };
        wall.duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
    /// The wall-clock time of device `d`'s sysUpTime `ticks` (centiseconds), in ns since the epoch.
    pub fn ticks_nanos(&self, d: &Device, ticks: u32) -> u64 {
        self.nanos(d.boot() + Duration::from_millis(u64::from(ticks) * 10))
    }
}

fn elem(name: &str) -> Elem {
    Elem {
        name: name.into(),
        keys: Default::default(),
    }
}

fn keyed(name: &str, key: &str, value: &str) -> Elem {
    let mut e = elem(name);
    e.keys.insert(key.into(), value.into());
    e
}

fn status(up: bool) -> Val {
    Val::Str(if up { "UP" } else { "DOWN" }.into())
}

/// Where a leaf hangs: `/system/state` or one interface (by name), then its tail.
#[derive(Clone, Copy)]
enum Base<'a> {
    System,
    Interface(&'a str),
}

/// Visits every leaf of device `d` at `now`, in path order: its base, tail and value. The one place
/// that order is written, so [`leaves`] and [`values`] agree index for index.
fn walk(d: &Device, clock: &Clock, now: Instant, mut visit: impl FnMut(Base<'_>, &[&str], Val)) {
    visit(Base::System, &["hostname"], Val::Str(d.name().to_string()));
    visit(
        Base::System,
        &["boot-time"],
        Val::U64(clock.nanos(d.boot())),
    );
    let st = d.advance(now);
    for i in &st.interfaces {
        let at = Base::Interface(i.name);
        visit(at, &["name"], Val::Str(i.name.to_string()));
        visit(at, &["config", "name"], Val::Str(i.name.to_string()));
        visit(at, &["config", "enabled"], Val::Bool(i.admin_up));
        visit(at, &["state", "name"], Val::Str(i.name.to_string()));
        visit(at, &["state", "ifindex"], Val::U32(i.index));
        visit(at, &["state", "admin-status"], status(i.admin_up));
        visit(at, &["state", "oper-status"], status(i.oper_up));
        let changed = clock.ticks_nanos(d, i.last_change);
        visit(at, &["state", "last-change"], Val::U64(changed));
        let counters = [
            ("in-octets", i.in_octets),
            ("out-octets", i.out_octets),
            ("in-pkts", i.in_packets()),
            ("out-pkts", i.out_packets()),
            ("in-errors", i.in_errors),
            ("out-errors", i.out_errors),
            ("in-discards", i.in_discards),
        ];
        for (name, v) in counters {
            visit(at, &["state", "counters", name], Val::U64(v));
        }
    }
}

/// Every leaf of device `d` at `now`, in path order.
pub fn leaves(d: &Device, clock: &Clock, now: Instant) -> Vec<Leaf> {
    let mut out = Vec::new();
    walk(d, clock, now, |base, tail, val| {
        let mut path = match base {
            Base::System => vec![elem("system"), elem("state")],
            Base::Interface(name) => vec![elem("interfaces"), keyed("interface", "name", name)],
        };
        path.extend(tail.iter().map(|n| elem(n)));
        out.push(Leaf { path, val });
    });
    out
}

/// The values of [`leaves`] at `now`, in the same order, without building their paths: what a
/// stream's sample reads each period once it knows which leaves it serves.
pub fn values(d: &Device, clock: &Clock, now: Instant) -> Vec<Val> {
    let mut out = Vec::new();
    walk(d, clock, now, |_, _, val| out.push(val));
    out
}

/// The interface a writable `config/enabled` path names (`/interfaces/interface[name=X]/config/enabled`),
/// as its ifIndex; `None` when the path is not that leaf of a known interface.
pub fn enabled_leaf(d: &Device, path: &[Elem]) -> Option<u32> {
    let [a, b, c, e] = path else { return None };
    if a.name != "interfaces" || b.name != "interface" || c.name != "config" || e.name != "enabled"
    {
        return None;
    }
    let name = b.keys.get("name")?;
    let st = d.advance(Instant::now());
    st.interfaces
        .iter()
        .find(|i| i.name == name.as_str())
        .map(|i| i.index)
}

/// The wall-clock time of the device's latest status change (the timestamp of an `ON_CHANGE` update).
pub fn last_change_nanos(d: &Device, clock: &Clock) -> u64 {
    let ticks = d
        .advance(Instant::now())
        .interfaces
        .iter()
        .map(|i| i.last_change)
        .max()
        .unwrap_or(0);
    clock.ticks_nanos(d, ticks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::gnmi::path::{parse, selects};

    #[test]
    fn counters_are_the_device_counters_snmp_serves() {
        let boot = Instant::now();
        let d = Device::new(2, boot);
        let clock = Clock::now();
        let t = boot + Duration::from_secs(3);
        let all = leaves(&d, &clock, t);
        let want = parse("/interfaces/interface[name=eth1]/state/counters/in-octets").unwrap();
        let got: Vec<_> = all.iter().filter(|l| selects(&want, &l.path)).collect();
        assert_eq!(got.len(), 1);
        let snmp = d.advance(t).interfaces[1].in_octets;
        assert!(snmp > 0);
        assert_eq!(got[0].val, Val::U64(snmp));
        let vals: Vec<Val> = all.iter().map(|l| l.val.clone()).collect();
        assert_eq!(values(&d, &clock, t), vals, "values() in leaves()' order");
        let host = all.iter().find(|l| l.path[2].name == "hostname").unwrap();
        assert_eq!(host.val, Val::Str("nl6-dev-0002".into()));
        let p = parse("/interfaces/interface[name=eth3]/config/enabled").unwrap();
        assert_eq!(enabled_leaf(&d, &p), Some(4));
        assert_eq!(
            enabled_leaf(
                &d,
                &parse("/interfaces/interface[name=eth9]/config/enabled").unwrap()
            ),
            None
        );
    }
}
