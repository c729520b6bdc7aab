//! The compact device: reads, changes and sizes.
use super::*;
use std::time::Duration;

#[test]
fn a_change_made_with_an_older_clock_never_takes_a_read_counter_back() {
    // A scheduler job took its `now`, then an SNMP answer read the untouched device later, then
    // the job flapped the interface: the counters must not fall below what was answered.
    let boot = Instant::now()
        .checked_sub(Duration::from_secs(10))
        .expect("the clock is past 10 s");
    let d = Device::new(4, boot);
    let job_now = boot + Duration::from_secs(1);
    let answered = d.advance(Instant::now()).interfaces[0].in_octets;
    assert!(d.set_oper(1, false, job_now));
    let later = d.advance(Instant::now()).interfaces[0].in_octets;
    assert!(
        later >= answered,
        "ifHCInOctets went back from {answered} to {later}"
    );
}

#[test]
fn bringing_an_untouched_interface_up_changes_nothing_and_allocates_nothing() {
    let boot = Instant::now();
    let d = Device::new(6, boot);
    assert!(!d.set_oper(2, true, boot));
    assert_eq!(d.set_admin(2, true, boot), Some(false));
    assert!(!d.is_live() && d.changes() == 0);
    assert!(d.set_oper(2, false, boot) && d.is_live());
}

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
fn reads_of_an_untouched_device_store_nothing_and_agree_with_a_live_one() {
    let boot = Instant::now();
    let (quiet, live) = (Device::new(9, boot), Device::new(9, boot));
    drop(live.advance_mut(boot + Duration::from_secs(1)));
    let t = boot + Duration::from_millis(2500);
    let (q, l) = (quiet.advance(t), live.advance(t));
    assert!(!quiet.is_live() && live.is_live());
    for (a, b) in q.interfaces.iter().zip(l.interfaces.iter()) {
        // One step or two: at most a byte apart each way from truncation.
        assert!(a.in_octets.abs_diff(b.in_octets) <= 1, "{a:?} {b:?}");
        assert!(a.out_octets.abs_diff(b.out_octets) <= 1, "{a:?} {b:?}");
        assert!(a.in_octets >= a.rate_in * 2, "2.5 s of traffic: {a:?}");
    }
    assert!(q.interfaces[3].in_octets > CARRIED_OCTETS);
    drop((q, l));
    assert!(quiet.counters.0.get().is_none());
    assert_eq!(quiet.counters.peek().sent(), 0);
    assert!(quiet.counters.0.get().is_none(), "a peek allocates nothing");
    DeviceCounters::inc(&quiet.counters.snmp_responses);
    assert_eq!(quiet.counters.peek().sent(), 1);
    assert_eq!(quiet.changes(), 0);
    assert!(quiet.set_oper(2, false, t));
    assert!(quiet.is_live() && quiet.changes() == 1);
}

#[test]
fn addresses_pack_and_read_back() {
    let d = Device::new(0, Instant::now());
    assert_eq!(
        (d.snmp_addr(), d.gnmi_addr(), d.own_ip()),
        (None, None, None)
    );
    let v4: SocketAddr = "127.152.150.128:16100".parse().unwrap();
    let v6: SocketAddr = "[::1]:50051".parse().unwrap();
    d.set_snmp_addr(v4);
    d.set_gnmi_addr(v6);
    d.set_own_ip(Ipv4Addr::new(127, 152, 150, 128));
    d.set_snmp_addr("127.0.0.9:1".parse().unwrap());
    assert_eq!(d.snmp_addr(), Some(v4), "set once");
    assert_eq!(d.gnmi_addr(), Some(v6));
    assert_eq!(d.own_ip(), Some(Ipv4Addr::new(127, 152, 150, 128)));
    let v4_only = Device::new(1, Instant::now());
    v4_only.set_snmp_addr(v4);
    v4_only.set_gnmi_addr(v4);
    assert!(
        v4_only.v6.get().is_none(),
        "IPv4 addresses allocate nothing"
    );
}

/// Ten million devices in 2.5 GB: the device itself (its `Arc` adds 16 bytes and malloc 8) stays
/// under 100 bytes.
#[test]
fn a_device_is_small() {
    let size = std::mem::size_of::<Device>();
    assert!(size <= 96, "a Device is {size} bytes");
    // What a device holds once changed, and once it counted (docs/scale.md: memory per device).
    eprintln!(
        "Device {size} B, live state {} B, counters {} B",
        std::mem::size_of::<Live>(),
        std::mem::size_of::<DeviceCounters>()
    );
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
