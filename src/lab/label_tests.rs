//! The seed's label rows, one test each, read back with `labels::current()` at named points inside the
//! loops and funnels (the `probe!` macro records every distinct label a point ever ran under, so a wrong
//! label anywhere, in any test running in parallel, fails the row).
use super::label_probe::seen;
use super::netflow::FlowExporter;
use super::syslog::Transport;
use super::{Fleet, FleetConfig};
use crate::labels::{self, Subsystem};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn only(point: &str, label: Subsystem) {
    wait_for(point, || !seen(point).is_empty());
    assert_eq!(seen(point), vec![Some(label)], "labels seen at {point}");
}

fn sink() -> (UdpSocket, SocketAddr) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = s.local_addr().unwrap();
    (s, a)
}

fn base() -> FleetConfig {
    FleetConfig::default().with_devices(2).with_snmp_port(0)
}

#[test]
fn snmp_read_loop_carries_snmp() {
    let fleet = Fleet::start(base()).unwrap();
    let (client, _) = sink();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let req = super::snmp::Message {
        version: 1,
        community: b"public".to_vec(),
        pdu_type: super::snmp::pdu::GET,
        request_id: 5,
        error_status: 0,
        error_index: 0,
        varbinds: vec![(
            super::snmp::ber::Oid::parse("1.3.6.1.2.1.1.5.0").unwrap(),
            super::snmp::ber::Value::Null,
        )],
    };
    client
        .send_to(&req.encode(), fleet.devices()[1].snmp_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 1500];
    client.recv(&mut buf).unwrap();
    only("snmp.loop", Subsystem::SNMP);
    only("snmp.reply", Subsystem::SNMP);
}

#[test]
fn trap_fire_funnel_is_scoped_trap_even_under_another_label() {
    let (_rx, target) = sink();
    let fleet =
        Fleet::start(base().with_trap_target(Some(target), Duration::from_secs(3600))).unwrap();
    assert!(fleet.set_link(0, 2, false));
    std::thread::scope(|s| {
        s.spawn(|| {
            labels::set_thread(Subsystem::SCENARIO);
            assert!(fleet.set_link(0, 2, true));
            assert_eq!(
                labels::current(),
                Some(Subsystem::SCENARIO),
                "the outer label is back after the funnel"
            );
        });
    });
    only("trap.fire", Subsystem::TRAP);
}

#[test]
fn inform_reader_and_retry_loops_carry_trap() {
    let (_rx, target) = sink();
    let cfg = base()
        .with_trap_target(Some(target), Duration::from_secs(3600))
        .with_inform(true, Duration::from_millis(50), 1);
    let _fleet = Fleet::start(cfg).unwrap();
    only("inform.reader", Subsystem::TRAP);
    only("inform.retry", Subsystem::TRAP);
}

#[test]
fn syslog_fire_funnel_is_scoped_syslog() {
    let (_rx, target) = sink();
    let fleet = Fleet::start(
        base().with_syslog_target(Some((Transport::Udp, target)), Duration::from_secs(3600)),
    )
    .unwrap();
    assert!(fleet.emit_syslog(1, "hello"));
    assert_eq!(labels::current(), None);
    only("syslog.fire", Subsystem::SYSLOG);
}

#[test]
fn syslog_tcp_reconnect_loop_carries_syslog() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let _fleet = Fleet::start(
        base().with_syslog_target(Some((Transport::Tcp, target)), Duration::from_secs(3600)),
    )
    .unwrap();
    only("syslog.reconnect", Subsystem::SYSLOG);
}

#[test]
fn flow_tick_funnel_is_scoped_flow() {
    let (_rx, target) = sink();
    let d = super::device::Device::new(0, Instant::now());
    let mut e = FlowExporter::new(UdpSocket::bind("127.0.0.1:0").unwrap(), target, 1);
    assert!(e.tick(&d, Instant::now()));
    assert_eq!(labels::current(), None);
    only("flow.tick", Subsystem::FLOW);
}

#[test]
fn fleet_flow_ticker_carries_flow() {
    let (_rx, target) = sink();
    let fleet =
        Fleet::start(base().with_flow_target(Some(target), Duration::from_millis(20))).unwrap();
    wait_for("flow packets", || {
        fleet.devices()[1]
            .counters
            .flow_packets_sent
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    });
    only("flow.ticker", Subsystem::FLOW);
    only("flow.tick", Subsystem::FLOW);
}

fn scenario_fleet() -> (Fleet, UdpSocket) {
    let (rx, target) = sink();
    let cfg = base()
        .with_flow_target(Some(target), Duration::from_millis(30))
        .with_syslog_target(Some((Transport::Udp, target)), Duration::from_secs(3600));
    (Fleet::start(cfg).unwrap(), rx)
}

fn post(fleet: &Fleet, body: &str) -> serde_json::Value {
    let r = super::api::route(
        &crate::http::Request::new("POST", "/api/v1/scenarios").with_body(body.to_string()),
        fleet,
    )
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

fn wait_finished(fleet: &Fleet, id: u64) {
    wait_for("scenario finish", || {
        fleet
            .shared()
            .scenarios
            .list()
            .iter()
            .any(|s| s.id == id && s.phase() == super::scenario::Phase::Finished)
    });
}

#[test]
fn scenario_ticker_is_scenario_between_ticks_and_after_ticks_flow_inside() {
    let (fleet, _rx) = scenario_fleet();
    let v = post(
        &fleet,
        r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"250ms"}"#,
    );
    wait_finished(&fleet, v["data"]["id"].as_u64().unwrap());
    only("scenario.between_ticks", Subsystem::SCENARIO);
    only("scenario.after_tick", Subsystem::SCENARIO);
    only("flow.tick", Subsystem::FLOW);
}

#[test]
fn scenario_start_and_finish_are_scoped_scenario() {
    let (fleet, _rx) = scenario_fleet();
    let v = post(
        &fleet,
        r#"{"name":"link-flap","device":"nl6-dev-0001","duration":"100ms"}"#,
    );
    wait_finished(&fleet, v["data"]["id"].as_u64().unwrap());
    only("scenario.start", Subsystem::SCENARIO);
    only("scenario.finish", Subsystem::SCENARIO);
    // The request thread (this one) is unlabelled again after the scoped start.
    assert_eq!(labels::current(), None);
}

#[test]
fn scheduled_start_thread_inherits_scenario() {
    let (fleet, _rx) = scenario_fleet();
    let at = std::time::SystemTime::now() + Duration::from_millis(300);
    let mut start_at = String::new();
    crate::timefmt::Timestamp::utc_millis(at)
        .write_to(&mut start_at)
        .unwrap();
    let body = format!(
        r#"{{"name":"link-flap","device":"nl6-dev-0000","duration":"100ms","start_at":"{start_at}"}}"#
    );
    let v = post(&fleet, &body);
    assert_eq!(v["data"]["state"], "scheduled");
    wait_finished(&fleet, v["data"]["id"].as_u64().unwrap());
    only("scenario.scheduled", Subsystem::SCENARIO);
}

#[test]
fn nesting_rule_birth_label_survives_funnels_inherited_one_does_not_leak_in() {
    let (_rx, target) = sink();
    let fleet = Fleet::start(
        base().with_syslog_target(Some((Transport::Udp, target)), Duration::from_secs(3600)),
    )
    .unwrap();
    let shared = fleet.shared().clone();
    // Birth label: a thread born `scenario` is `syslog` inside the funnel and `scenario` again after it.
    let h = nl6_profile::threads::spawn_labelled(Subsystem::SCENARIO, "t-birth", move || {
        let inside = labels::with(Subsystem::SYSLOG, labels::current);
        assert!(shared.emit_syslog(0, 5, "T", "x"));
        (inside, labels::current())
    })
    .unwrap();
    assert_eq!(
        h.join().unwrap(),
        (Some(Subsystem::SYSLOG), Some(Subsystem::SCENARIO))
    );
    // Inherited label: a thread spawned under `scenario` inherits it, and a syslog fire inside it is
    // syslog work (the funnel's own scope wins).
    let shared = fleet.shared().clone();
    let h = labels::with(Subsystem::SCENARIO, || {
        nl6_profile::threads::spawn_inheriting("t-inherit", move || {
            let before = labels::current();
            assert!(shared.emit_syslog(1, 5, "T", "y"));
            (before, labels::current())
        })
        .unwrap()
    });
    assert_eq!(
        h.join().unwrap(),
        (Some(Subsystem::SCENARIO), Some(Subsystem::SCENARIO))
    );
    only("syslog.fire", Subsystem::SYSLOG);
}
