//! The lab scheduler (`lab-scheduler`): every device's periodic jobs, syslog status (each device at a
//! random phase, each period jittered ±10%), the link toggle (linkDown, then linkUp a trap interval
//! later, each with its syslog line) on one interface per device, and the flow export every flow
//! interval, in one timer wheel ([`Wheel`]: no thread nor timer per device, no heap walk per turn). The
//! jobs of one slot run together and their packets go out in batches ([`Outbox`], `sendmmsg`), each
//! counted sent or refused. Every turn's lateness is recorded ([`Lateness`]); a job reached late (a
//! stall) skips the periods it missed instead of replaying them ([`catchup`]), with one log line per
//! stall. Takes its parts as plain references ([`Jobs`]), so it needs nothing of the fleet that runs it.
#![forbid(unsafe_code)]

use super::catchup::{self, Skipped, Turn};
use super::device::{mix_fraction, Device, INTERFACES_PER_DEVICE};
use super::lateness::Lateness;
use super::netflow::FlowExporter;
use super::send::Outbox;
use super::syslog::{self, SyslogExporter};
use super::trap::TrapSender;
use super::wheel::Wheel;
use crate::labels::{self, Subsystem};
use crate::netsys::BATCH_MAX;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What the scheduler runs and reports to.
pub struct Jobs<'a> {
    pub devices: &'a [Arc<Device>],
    pub trap: Option<&'a TrapSender>,
    pub syslog: Option<&'a SyslogExporter>,
    pub flow: Option<FlowExporter>,
    /// The syslog, trap and flow periods.
    pub every: [Duration; 3],
    pub lateness: &'a Lateness,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Job {
    Syslog(usize),
    Link(usize),
    Flow(usize),
}

/// A pseudo-random fraction in [0, 1) for `(device, round)`, so devices do not fire in lockstep.
fn jitter(device: usize, round: u64) -> f64 {
    mix_fraction((device as u64) << 32 ^ round)
}

/// Runs the jobs until `sleep_until` returns false (the fleet stops) or `stopping` says so.
pub fn run(mut jobs: Jobs<'_>, sleep_until: impl Fn(Instant) -> bool, stopping: impl Fn() -> bool) {
    let start = Instant::now();
    let [syslog_every, trap_every, flow_every] = jobs.every;
    let mut flow = jobs.flow.take();
    let sh = &jobs;
    // The furthest ahead a job is ever put: a first trap phase (up to 1.5 periods), a jittered syslog.
    let span = (trap_every.mul_f64(1.5))
        .max(syslog_every.mul_f64(1.1))
        .max(flow_every)
        + catchup::LATE_SLACK;
    let mut wheel: Wheel<Job> = Wheel::new(start, span);
    for d in 0..sh.devices.len() {
        if flow.is_some() {
            wheel.add(start + flow_every.mul_f64(jitter(d, 2)), Job::Flow(d));
        }
        if sh.syslog.is_some() {
            wheel.add(start + syslog_every.mul_f64(jitter(d, 0)), Job::Syslog(d));
        }
        if sh.trap.is_some() {
            wheel.add(start + trap_every.mul_f64(0.5 + jitter(d, 1)), Job::Link(d));
        }
    }
    let mut turns = Turns {
        sh,
        round: 0,
        skipped: Skipped::default(),
        every: jobs.every,
    };
    let mut due_now = Vec::new();
    let mut out = Outboxes::default();
    while let Some(ready) = wheel.next_ready() {
        if !sleep_until(ready) {
            return;
        }
        wheel.take(&mut due_now);
        for &(due, job) in &due_now {
            if stopping() {
                // What this slot already built has used its sequence numbers and flow marks: sent.
                out.flush(sh, flow.as_ref(), 1);
                return;
            }
            if let Some(next) = turns.turn(due, job, &mut flow, &mut out) {
                wheel.add(next, job);
            }
            out.flush(sh, flow.as_ref(), BATCH_MAX);
        }
        out.flush(sh, flow.as_ref(), 1);
    }
}

/// The scheduler's batches, one per exporter socket: the packets of jobs that fall due together go out
/// [`BATCH_MAX`] a system call.
#[derive(Debug, Default)]
struct Outboxes {
    trap: Outbox,
    syslog: Outbox,
    flow: Outbox,
}

impl Outboxes {
    /// Sends (and counts) every batch holding at least `at_least` packets.
    fn flush(&mut self, sh: &Jobs<'_>, flow: Option<&FlowExporter>, at_least: usize) {
        let devices = &sh.devices;
        if let Some(t) = sh.trap.filter(|_| self.trap.len() >= at_least) {
            t.flush(&mut self.trap, devices);
        }
        if let Some(s) = sh.syslog.filter(|_| self.syslog.len() >= at_least) {
            s.flush(&mut self.syslog, devices);
        }
        if let Some(f) = flow.filter(|_| self.flow.len() >= at_least) {
            f.flush(&mut self.flow, devices);
        }
    }
}

/// One scheduler turn at a time: what runs a job and keeps the count of skips.
struct Turns<'a> {
    sh: &'a Jobs<'a>,
    round: u64,
    skipped: Skipped,
    /// The syslog, trap and flow periods.
    every: [Duration; 3],
}

impl Turns<'_> {
    /// Runs (or skips) `job`, due at `due`; its next due time.
    fn turn(
        &mut self,
        due: Instant,
        job: Job,
        flow: &mut Option<FlowExporter>,
        out: &mut Outboxes,
    ) -> Option<Instant> {
        let sh = self.sh;
        let now = Instant::now();
        if due > now {
            // Put at the ring's far end (past the span): not due yet.
            return Some(due);
        }
        let [syslog_every, trap_every, flow_every] = self.every;
        let period = match job {
            Job::Syslog(_) => syslog_every,
            Job::Link(_) => trap_every,
            Job::Flow(_) => flow_every,
        };
        sh.lateness.record(now.saturating_duration_since(due));
        if let Turn::Skip { next, missed } = catchup::turn(due, period, now) {
            self.skipped.add(due, now, missed);
            sh.lateness.skipped(missed);
            return Some(next);
        }
        if let Some(line) = self.skipped.take_line(now) {
            eprintln!("{line}");
        }
        self.round += 1;
        let round = self.round;
        // The whole turn runs under the job's subsystem: the device state it advances and the text it
        // formats are that job's work; only the wheel and the waiting stay `scheduler`.
        let next = match job {
            Job::Syslog(d) => labels::with(Subsystem::SYSLOG, || {
                let dev = &sh.devices[d];
                let up = dev
                    .advance(Instant::now())
                    .interfaces
                    .iter()
                    .filter(|i| i.oper_up)
                    .count();
                let text = format!("periodic status: {up}/{INTERFACES_PER_DEVICE} interfaces up");
                if let Some(s) = sh.syslog {
                    let (sev, at) = (syslog::SEVERITY_INFO, SystemTime::now());
                    s.fire_into(dev, sev, "STATUS", &text, at, &mut out.syslog);
                }
                syslog_every.mul_f64(0.9 + 0.2 * jitter(d, round))
            }),
            Job::Link(d) => labels::with(Subsystem::TRAP, || {
                Self::toggle_link(sh, d, out);
                trap_every
            }),
            Job::Flow(d) => labels::with(Subsystem::FLOW, || {
                crate::lab::probe!("flow.ticker");
                if let Some(exporter) = flow.as_mut() {
                    exporter.tick_into(&sh.devices[d], Instant::now(), &mut out.flow);
                }
                flow_every
            }),
        };
        Some(due + next)
    }

    /// The periodic link toggle of device `d`'s one flapping interface: its trap and syslog line go
    /// into the batches (as the fleet's `set_link` announces a change at once).
    fn toggle_link(sh: &Jobs<'_>, d: usize, out: &mut Outboxes) {
        let dev = &sh.devices[d];
        let if_index = (d % INTERFACES_PER_DEVICE) as u32 + 1;
        let now = Instant::now();
        let up = !dev.advance(now).interfaces[if_index as usize - 1].oper_up;
        if !dev.set_oper(if_index, up, now) {
            return;
        }
        if let Some(t) = sh.trap {
            t.fire_link_into(dev, if_index, up, now, &mut out.trap);
        }
        if let Some(s) = sh.syslog {
            let (sev, text) = link_line(if_index, up);
            s.fire_into(dev, sev, "LINK", &text, SystemTime::now(), &mut out.syslog);
        }
    }
}

/// The syslog severity and text of a link change.
pub fn link_line(if_index: u32, up: bool) -> (u8, String) {
    let (sev, state) = if up {
        (syslog::SEVERITY_NOTICE, "up")
    } else {
        (syslog::SEVERITY_WARNING, "down")
    };
    let text = format!("Interface eth{} changed state to {state}", if_index - 1);
    (sev, text)
}
