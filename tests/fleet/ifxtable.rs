//! IF-MIB's ifXTable against net-snmp's own tools and the nl6 binary: ifName, ifHighSpeed and the 64-bit
//! ifHC* counters read in one request beside ifTable's 32-bit ones agree modulo 2^32 (the last interface
//! has carried more than 2^32 octets, so its 32-bit counters have wrapped), and walks cross from ifTable
//! into ifXTable in OID order to the end of the view.
use crate::common;
use crate::fleet_common;

use common::{boot, json, Nl6};
use fleet_common::snmp_tool as snmp;
use std::collections::BTreeMap;
use std::time::Duration;

/// Columns of ifEntry and ifXEntry, rows per device.
const IF_COLUMNS: usize = 22;
const IF_X_COLUMNS: usize = 19;
const INTERFACES: usize = 4;

fn device_addr(n: &Nl6, i: usize) -> String {
    let (status, _, body) = n.http("GET", &format!("/api/v1/devices?offset={i}&limit=1"), b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v = json(&body);
    let snmp = &v["data"][0]["snmp"];
    format!(
        "{}:{}",
        snmp["address"].as_str().expect("address"),
        snmp["port"]
    )
}

/// `OID = TYPE: value` lines as OID → (type, value), in the order printed.
fn bindings(out: &str) -> Vec<(String, String, String)> {
    out.lines()
        .filter_map(|l| {
            let (oid, rest) = l.split_once(" = ")?;
            let (ty, value) = rest.split_once(": ").unwrap_or((rest, ""));
            Some((
                oid.to_string(),
                ty.to_string(),
                value.trim_matches('"').to_string(),
            ))
        })
        .collect()
}

/// The unsigned value of `oid` in `b`, which must be of type `ty`.
fn number(b: &BTreeMap<String, (String, String)>, oid: &str, ty: &str) -> u64 {
    let (t, v) = b.get(oid).unwrap_or_else(|| panic!("{oid} missing: {b:?}"));
    assert_eq!(t, ty, "{oid}");
    v.parse()
        .unwrap_or_else(|_| panic!("{oid}: {v:?} is not a number"))
}

#[test]
fn hc_counters_read_with_the_32_bit_ones_agree_modulo_2_to_the_32() {
    let n = boot().args(&["-devices", "3"]).start();
    let target = device_addr(&n, 2);
    // One GET, so both tables are read at the same instant of the device.
    let mut oids = Vec::new();
    for row in 1..=INTERFACES {
        for (narrow, wide) in [(10, 6), (11, 7), (16, 10), (17, 11)] {
            oids.push(format!(".1.3.6.1.2.1.2.2.1.{narrow}.{row}"));
            oids.push(format!(".1.3.6.1.2.1.31.1.1.1.{wide}.{row}"));
        }
    }
    let read = || {
        let args: Vec<&str> = oids.iter().map(String::as_str).collect();
        let out = snmp("snmpget", &target, &args);
        let b: BTreeMap<String, (String, String)> = bindings(&out)
            .into_iter()
            .map(|(o, t, v)| (o, (t, v)))
            .collect();
        assert_eq!(b.len(), oids.len(), "{out}");
        b
    };
    let first = read();
    for row in 1..=INTERFACES {
        for (narrow, wide) in [(10, 6), (11, 7), (16, 10), (17, 11)] {
            let c32 = number(
                &first,
                &format!(".1.3.6.1.2.1.2.2.1.{narrow}.{row}"),
                "Counter32",
            );
            let c64 = number(
                &first,
                &format!(".1.3.6.1.2.1.31.1.1.1.{wide}.{row}"),
                "Counter64",
            );
            assert_eq!(
                c64 % (1 << 32),
                c32,
                "column {wide} against {narrow}, row {row}"
            );
        }
    }
    let hc_in = |b: &BTreeMap<_, _>, row: usize| {
        number(b, &format!(".1.3.6.1.2.1.31.1.1.1.6.{row}"), "Counter64")
    };
    // The last interface has carried more than 2^32 octets: its 32-bit counter has wrapped.
    assert!(hc_in(&first, 4) > 1 << 32, "{first:?}");
    assert!(number(&first, ".1.3.6.1.2.1.2.2.1.10.4", "Counter32") < hc_in(&first, 4));
    std::thread::sleep(Duration::from_millis(300));
    let second = read();
    for row in 1..=INTERFACES {
        assert!(
            hc_in(&second, row) > hc_in(&first, row),
            "ifHCInOctets.{row} grows with traffic"
        );
    }
}

#[test]
fn ifname_and_ifhighspeed_name_the_interfaces() {
    let n = boot().args(&["-devices", "1"]).start();
    let target = device_addr(&n, 0);
    let out = snmp(
        "snmpget",
        &target,
        &[
            ".1.3.6.1.2.1.31.1.1.1.1.1",
            ".1.3.6.1.2.1.31.1.1.1.1.4",
            ".1.3.6.1.2.1.31.1.1.1.15.2",
            ".1.3.6.1.2.1.2.2.1.5.2",
            ".1.3.6.1.2.1.31.1.1.1.1.5",
        ],
    );
    let b = bindings(&out);
    let got: Vec<(&str, &str)> = b.iter().map(|(_, t, v)| (t.as_str(), v.as_str())).collect();
    assert_eq!(
        got[..4],
        [
            ("STRING", "eth0"),
            ("STRING", "eth3"),
            ("Gauge32", "1000"),
            ("Gauge32", "1000000000")
        ],
        "{out}"
    );
    // A fifth interface does not exist; ifName does.
    assert!(
        out.contains(".1.3.6.1.2.1.31.1.1.1.1.5 = No Such Instance"),
        "{out}"
    );
}

#[test]
fn walks_cross_from_iftable_into_ifxtable_in_order() {
    let n = boot().args(&["-devices", "2"]).start();
    let target = device_addr(&n, 1);
    let walk = snmp("snmpwalk", &target, &[".1.3.6.1.2.1"]);
    let bulk = snmp("snmpbulkwalk", &target, &["-Cr7", ".1.3.6.1.2.1"]);
    let oids = |out: &str| -> Vec<String> { bindings(out).into_iter().map(|b| b.0).collect() };
    let (walked, bulked) = (oids(&walk), oids(&bulk));
    // snmpwalk and snmpbulkwalk fail on an OID that does not increase; both end at the view's end.
    for out in [&walk, &bulk] {
        assert!(
            out.trim_end().ends_with(
                "No more variables left in this MIB View (It is past the end of the MIB tree)"
            ),
            "{out}"
        );
    }
    let rows = 7 + 1 + INTERFACES * (IF_COLUMNS + IF_X_COLUMNS);
    assert_eq!(walked.len(), rows + 1, "{walk}");
    assert_eq!(walked, bulked, "GETNEXT and GETBULK walk the same OIDs");
    let last_if = walked
        .iter()
        .position(|o| o == ".1.3.6.1.2.1.2.2.1.22.4")
        .expect("ifSpecific.4");
    assert_eq!(walked[last_if + 1], ".1.3.6.1.2.1.31.1.1.1.1.1", "{walk}");
    assert_eq!(walked[rows - 1], ".1.3.6.1.2.1.31.1.1.1.19.4", "{walk}");
    // ifXTable alone: every column, column-major, nothing after it.
    let x = snmp("snmpwalk", &target, &[".1.3.6.1.2.1.31.1.1"]);
    let x_oids = oids(&x);
    assert_eq!(x_oids.len(), INTERFACES * IF_X_COLUMNS + 1, "{x}");
    for (k, oid) in x_oids.iter().take(INTERFACES * IF_X_COLUMNS).enumerate() {
        let (column, row) = (k / INTERFACES + 1, k % INTERFACES + 1);
        assert_eq!(*oid, format!(".1.3.6.1.2.1.31.1.1.1.{column}.{row}"), "{x}");
    }
    for (oid, ty) in [
        (".1.3.6.1.2.1.31.1.1.1.6.1", "Counter64"),
        (".1.3.6.1.2.1.31.1.1.1.2.1", "Counter32"),
        (".1.3.6.1.2.1.31.1.1.1.14.1", "INTEGER"),
        (".1.3.6.1.2.1.31.1.1.1.19.1", "Timeticks"),
    ] {
        assert!(
            x.lines().any(|l| l.starts_with(&format!("{oid} = {ty}: "))),
            "{oid} is a {ty}: {x}"
        );
    }
}
