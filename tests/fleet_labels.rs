//! The long-lived loops' birth labels read back from the thread-stack profile: each loop thread is found
//! by name, its stack is inside its loop function, and it carries its subsystem label.
mod common;
mod fleet_common;

use common::wait_for;
use nl6::lab::syslog::Transport;
use nl6::lab::{Fleet, FleetConfig};
use nl6::labels::Subsystem;
use nl6_profile::symbols::symbolize;
use nl6_profile::threads::{capture_all, ThreadStack};
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

fn functions(t: &ThreadStack) -> Vec<String> {
    // Return addresses point after the call: look one byte back.
    t.stack
        .iter()
        .filter_map(|a| symbolize(a.saturating_sub(1)))
        .collect()
}

fn assert_label<'a>(stacks: &'a [ThreadStack], name: &str, label: Subsystem) -> &'a ThreadStack {
    let t = stacks.iter().find(|t| t.name == name).unwrap_or_else(|| {
        panic!(
            "no thread {name} among {:?}",
            stacks.iter().map(|t| &t.name).collect::<Vec<_>>()
        )
    });
    assert_eq!(
        Subsystem::name_of(t.label),
        Some(label.name()),
        "label of {name}"
    );
    t
}

/// Asserts thread `name` carries `label` and its stack goes through `function`.
fn assert_loop(stacks: &[ThreadStack], name: &str, label: Subsystem, function: &str) {
    let t = assert_label(stacks, name, label);
    let f = functions(t);
    assert!(
        f.iter().any(|n| n.contains(function)),
        "{name} is inside {function}: {f:#?}"
    );
}

#[test]
fn long_lived_loops_carry_their_birth_labels_in_the_thread_profile() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let cfg = FleetConfig::default()
        .with_devices(2)
        .with_snmp_port(0)
        .with_trap_target(Some(udp.local_addr().unwrap()), Duration::from_secs(3600))
        .with_inform(true, Duration::from_secs(1), 1)
        .with_syslog_target(
            Some((Transport::Tcp, tcp.local_addr().unwrap())),
            Duration::from_secs(3600),
        )
        .with_flow_target(Some(udp.local_addr().unwrap()), Duration::from_secs(3600));
    let f = Fleet::start(cfg).unwrap();
    let (_conn, _) = tcp.accept().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stacks = capture_all(Duration::from_secs(2));
    // The UDP read loops are blocked in recvfrom inside libc (no frame pointers there): the unwinder
    // resynchronises from the stack pointer, so their stacks still reach the loop functions.
    assert_loop(&stacks, "snmp-1", Subsystem::SNMP, "nl6::lab::snmp::serve");
    assert_loop(&stacks, "trap-inform-rea", Subsystem::TRAP, "run_reader");
    assert_loop(
        &stacks,
        "trap-inform-ret",
        Subsystem::TRAP,
        "TrapSender::run_retries",
    );
    assert_loop(
        &stacks,
        "syslog-tcp",
        Subsystem::SYSLOG,
        "nl6::lab::syslog::run_tcp_sender",
    );
    // Flow exports are jobs of the scheduler's heap: between jobs it waits as `scheduler`.
    assert_loop(
        &stacks,
        "lab-scheduler",
        Subsystem::SCHEDULER,
        "nl6::lab::schedule::run",
    );
    drop(f);
}

#[test]
fn scenario_flow_ticker_is_labelled_scenario_between_ticks() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = FleetConfig::default()
        .with_devices(1)
        .with_snmp_port(0)
        .with_flow_target(Some(udp.local_addr().unwrap()), Duration::from_millis(50));
    let f = Fleet::start(cfg).unwrap();
    let req = nl6::http::Request::new("POST", "/api/v1/scenarios")
        .with_body(r#"{"name":"link-flap","device":"nl6-dev-0000","duration":"5s"}"#);
    let r = nl6::lab::api::route(&req, &f).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    // Let ticks run, then look at the runner between two of them.
    wait_for("flow ticks", 5, || {
        f.devices()[0]
            .counters
            .flow_packets_sent
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 3
    });
    let stacks = capture_all(Duration::from_secs(2));
    assert_loop(
        &stacks,
        "scenario-1",
        Subsystem::SCENARIO,
        "nl6::lab::scenario::run",
    );
    drop(f);
}
