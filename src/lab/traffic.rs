//! The `-traffic PERIOD` load: a built-in scenario that keeps every lab subsystem busy, so that a first
//! CPU profile of a freshly booted lab shows where time goes under each `subsystem` label.
//!
//! One thread, `lab-traffic`, labelled `scenario` from birth (it is the scenario driving the fleet). Every
//! PERIOD it does, for every device:
//! - an SNMP walk of `mib-2` with GETBULK over UDP, as a manager would (the manager side runs here under
//!   `scenario`; the device's agent loop answers under `snmp`);
//! - with gNMI on, a Get of every leaf and a short ONCE subscription (the client side under `scenario`,
//!   the target under `gnmi`; see `gnmi/load.rs`);
//! - [`SENDS_PER_DEVICE`] times: a link toggle (a linkUp/linkDown notification under `trap`, a syslog
//!   line under `syslog`), a syslog message (`syslog`) and a NetFlow export (`flow`);
//!
//! and keeps one short `link-flap` scenario running (listed by `GET /api/v1/scenarios`).
//!
//! Targets left unset get a discard socket on the bind address ([`DiscardSink`]): bound and never read,
//! so the kernel drops what its buffer cannot hold and nothing leaves the machine. Explicit
//! `-trap-target`, `-syslog-target` and `-flow-target` are used as given.
#![forbid(unsafe_code)]

use super::config::FleetConfig;
use super::device::Device;
use super::netflow::FlowExporter;
use super::scenario::{self, Host, Phase, Request, Scenario};
use super::snmp::ber::{Oid, Value};
use super::snmp::{pdu, Message, VERSION_2C};
use super::syslog;
use super::target::{reachable, Transport};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `mib-2`: the subtree a walk covers (system and the IF-MIB interface table).
const WALK_ROOT: &[u32] = &[1, 3, 6, 1, 2, 1];
/// Varbinds asked for per GETBULK.
const BULK_REPETITIONS: i64 = 24;
/// Requests per walk at most (a device's view is far smaller; this bounds a misbehaving agent).
const WALK_REQUESTS_MAX: usize = 64;
/// How long the walk waits for one response before giving up on that device this round.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(200);
/// Link toggles, syslog messages and flow exports per device per round: enough that a 5 s profile at
/// 100 Hz draws several samples of each kind (a flow export is the cheapest: 30–130 ms of 1.7 s here;
/// at 16 a profile could draw none).
const SENDS_PER_DEVICE: usize = 48;
/// Length of each link-flap scenario the load keeps running.
const FLAP_SCENARIO: Duration = Duration::from_secs(2);

/// A UDP socket that receives the load's notifications, syslog and flows and never reads them.
#[derive(Debug)]
pub struct DiscardSink {
    /// Never read: held so the port stays bound while the fleet lives.
    _socket: UdpSocket,
    addr: SocketAddr,
}

impl DiscardSink {
    /// Binds on `ip`, port 0; `addr` is how the lab's senders reach it.
    pub fn bind(ip: IpAddr) -> std::io::Result<DiscardSink> {
        let socket = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let addr = reachable(socket.local_addr()?);
        Ok(DiscardSink {
            _socket: socket,
            addr,
        })
    }
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// What one round did, for the driver's counters and the tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundWork {
    pub snmp_responses: usize,
    pub link_toggles: usize,
    pub syslog_sent: usize,
    pub flow_exports: usize,
    pub gnmi: super::gnmi::load::GnmiWork,
}

/// The driver: its manager socket, its flow exporter and its scenario, on the fleet it loads (reached
/// only through [`Host`], so this module does not depend on the fleet's).
struct Driver<H: Host> {
    shared: Arc<H>,
    manager: UdpSocket,
    /// Receive buffer for responses, reused by every walk.
    buf: Vec<u8>,
    community: Vec<u8>,
    flows: Option<FlowExporter>,
    request_id: i32,
    round: u64,
    scenario: Option<Arc<Scenario>>,
    gnmi: Option<super::gnmi::load::Load>,
}

/// Spawns `lab-traffic` (labelled `scenario`), which runs a round every `period` until the fleet stops;
/// its manager socket binds `manager_ip` and walks with `community`.
pub(crate) fn spawn<H: Host>(
    shared: &Arc<H>,
    period: Duration,
    manager_ip: IpAddr,
    community: &str,
) -> std::io::Result<()> {
    let manager = UdpSocket::bind(SocketAddr::new(manager_ip, 0))?;
    manager.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
    let mut driver = Driver {
        shared: shared.clone(),
        manager,
        buf: vec![0; 65_535],
        community: community.as_bytes().to_vec(),
        flows: shared.flow_exporter(),
        request_id: 0,
        round: 0,
        scenario: None,
        gnmi: match shared.devices().iter().any(|d| d.gnmi_addr().is_some()) {
            true => Some(super::gnmi::load::Load::new()?),
            false => None,
        },
    };
    let sh = shared.clone();
    shared.spawn_labelled(
        crate::labels::Subsystem::SCENARIO,
        "lab-traffic",
        Box::new(move || {
            let mut due = Instant::now();
            loop {
                due += period;
                driver.round();
                // A round that overran starts the next at once rather than piling up missed rounds.
                due = due.max(Instant::now());
                if !sh.sleep_until(due + start_offset(period, driver.round)) {
                    return;
                }
            }
        }),
    )
}

/// How long after its due time round `round` starts: a pseudo-random fraction of half a period.
///
/// A thread's CPU timer fires only on the kernel's tick (4 ms at 250 Hz). Rounds started exactly every
/// period (10 ms is two and a half ticks) would meet the tick at the same few points of every round, and
/// a profile could draw all of a round's samples from its walks and none from its sends; starting each
/// round at a random point leaves no part of a round between the ticks. The due times
/// themselves stay a period apart, so the rate is kept.
fn start_offset(period: Duration, round: u64) -> Duration {
    period.mul_f64(0.5 * super::device::mix_fraction(round))
}

impl<H: Host> Driver<H> {
    fn round(&mut self) -> RoundWork {
        self.round += 1;
        let mut work = RoundWork::default();
        let sh = self.shared.clone();
        for (i, device) in sh.devices().iter().enumerate() {
            if sh.stopping() {
                break;
            }
            if let Some(agent) = device.snmp_addr() {
                work.snmp_responses += self.walk(reachable(agent));
            }
            for k in 0..SENDS_PER_DEVICE {
                self.send_burst(i, device, k, &mut work);
            }
        }
        if let Some(g) = &mut self.gnmi {
            if !sh.stopping() {
                work.gnmi = g.round(sh.devices());
            }
        }
        self.keep_a_flap_running();
        work
    }

    /// One link toggle (trap and syslog), one syslog message and one flow export from device `i`.
    fn send_burst(&mut self, i: usize, device: &Device, k: usize, work: &mut RoundWork) {
        let sh = &self.shared;
        let interfaces = super::device::INTERFACES_PER_DEVICE;
        let if_index = 1 + ((self.round as usize + i + k) % interfaces) as u32;
        let up = !device.advance(Instant::now()).interfaces[if_index as usize - 1].oper_up;
        work.link_toggles += usize::from(sh.set_link(i, if_index, up));
        let text = format!(
            "traffic round {}.{k}: eth{} polled",
            self.round,
            if_index - 1
        );
        work.syslog_sent += usize::from(sh.emit_syslog(i, syslog::SEVERITY_INFO, "TRAFFIC", &text));
        if let Some(flows) = &mut self.flows {
            work.flow_exports += usize::from(flows.tick(device, Instant::now()));
        }
    }

    /// Walks `mib-2` on one agent with GETBULK; returns the responses received.
    fn walk(&mut self, agent: SocketAddr) -> usize {
        let root = Oid(WALK_ROOT.to_vec());
        let mut next = root.clone();
        for answered in 0..WALK_REQUESTS_MAX {
            self.request_id = self.request_id.wrapping_add(1) & 0x7fff_ffff;
            let request = Message {
                version: VERSION_2C,
                community: self.community.clone(),
                pdu_type: pdu::GET_BULK,
                request_id: self.request_id,
                error_status: 0,
                error_index: BULK_REPETITIONS,
                varbinds: vec![(next.clone(), Value::Null)],
            };
            if self.manager.send_to(&request.encode(), agent).is_err() {
                return answered;
            }
            let Some(response) = self.response(agent) else {
                return answered;
            };
            match response.varbinds.last() {
                Some((oid, value)) if oid.starts_with(&root) && *value != Value::EndOfMibView => {
                    next = oid.clone();
                }
                _ => return answered + 1,
            }
        }
        WALK_REQUESTS_MAX
    }

    /// The response to the current request from `agent`, skipping stale datagrams; None once
    /// [`RESPONSE_TIMEOUT`] has passed (a profiler's signal neither ends the wait early nor extends it).
    fn response(&mut self, agent: SocketAddr) -> Option<Message> {
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let (n, from) =
                crate::netsys::recv_from_until(&self.manager, &mut self.buf, deadline).ok()?;
            if from != agent {
                continue;
            }
            match Message::decode(&self.buf[..n]) {
                Ok(m) if m.request_id == self.request_id => return Some(m),
                _ => continue,
            }
        }
    }

    /// Starts a short link-flap on the next device once the previous one has ended.
    fn keep_a_flap_running(&mut self) {
        let running = self
            .scenario
            .as_ref()
            .is_some_and(|s| matches!(s.phase(), Phase::Scheduled | Phase::Running));
        let devices = self.shared.devices();
        if running || devices.is_empty() {
            return;
        }
        let device = &devices[(self.round as usize) % devices.len()];
        let request = Request {
            name: "link-flap".into(),
            device: device.name().to_string(),
            duration: FLAP_SCENARIO,
            start_at: None,
        };
        // Refused only when 64 scenarios are active; the next round tries again.
        self.scenario = scenario::submit(&self.shared, request).ok();
    }
}

/// With `-traffic`, points every unset trap, syslog and flow target at one discard socket on the bind
/// address, so the load exercises every sender without leaving the machine, and turns the gNMI target
/// on (ephemeral ports) when `-gnmi-port` is unset.
pub(crate) fn with_sink(
    config: FleetConfig,
) -> std::io::Result<(FleetConfig, Option<DiscardSink>)> {
    // -traffic also drives gNMI: without -gnmi-port the targets take ephemeral ports.
    let config = match (config.traffic(), config.gnmi().port()) {
        (Some(_), None) => {
            let g = config.gnmi().clone().with_port(Some(0));
            config.with_gnmi(g)
        }
        _ => config,
    };
    let unset = config.trap_target().is_none()
        || config.syslog_target().is_none()
        || config.flow_target().is_none();
    if config.traffic().is_none() || !unset {
        return Ok((config, None));
    }
    let sink = DiscardSink::bind(config.bind())?;
    let to = Some(sink.addr());
    let mut c = config;
    if c.trap_target().is_none() {
        let every = c.trap_interval();
        c = c.with_trap_target(to, every);
    }
    if c.syslog_target().is_none() {
        let every = c.syslog_interval();
        c = c.with_syslog_target(to.map(|a| (Transport::Udp, a)), every);
    }
    if c.flow_target().is_none() {
        let every = c.flow_interval();
        c = c.with_flow_target(to, every);
    }
    Ok((c, Some(sink)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round starts, taken modulo a 4 ms tick, fall all over the tick, not on the two points a
    /// 10 ms period alone gives.
    #[test]
    fn rounds_start_at_every_phase_of_the_kernel_tick() {
        let (period, tick) = (
            Duration::from_millis(10),
            Duration::from_millis(4).as_nanos(),
        );
        let mut bins = [0u32; 10];
        for round in 1..=400u64 {
            let start = period * round as u32 + start_offset(period, round);
            assert!(start - period * round as u32 <= period / 2);
            bins[(start.as_nanos() % tick * 10 / tick) as usize] += 1;
        }
        assert!(
            bins.iter().all(|&n| n >= 10),
            "round starts by tenth of a tick: {bins:?}"
        );
    }
}
