//! The fleet: [`Fleet::start`] binds every SNMP socket ([`super::listen`]: per port, or a few sockets for a
//! `-device-net` range; all before any thread starts, so a refusal stops startup with one line naming
//! what was wrong and the remedy), then starts the threads. None is per device:
//!
//! | thread | label at birth | what it does |
//! |---|---|---|
//! | `snmp-<t>` (at most [`SERVING_THREADS`](super::snmp::serve::SERVING_THREADS)) | `snmp` | poll a share of the SNMP sockets and answer (see `snmp/serve.rs`) |
//! | `trap-inform-reader`, `trap-inform-retry` (INFORM mode) | `trap` | match responses, resend |
//! | `syslog-tcp` (TCP target) | `syslog` | the reconnect loop draining the send queue |
//! | `lab-scheduler` (trap, syslog or flow target) | `scheduler` | one timer wheel (`schedule.rs`) for every device's periodic syslog (jittered), link toggles and flow exports (each device at its own phase, every `-flow-interval`); each job runs under its subsystem (`syslog`, `trap`, `flow`) for its whole iteration |
//! | `scenario-<id>` | `scenario` | a running scenario (see `scenario.rs`) |
//! | `gnmi` (`-gnmi-port`), `gnmi-dialout` (`-gnmi-dialout`) | `gnmi`, `gnmi-dialout` | gNMI target and dial-out, each a tokio `current_thread` runtime (see `gnmi/mod.rs`) |
//! | `lab-traffic` (`-traffic`) | `scenario` | the built-in load (see `traffic.rs`); funnels label themselves |
//!
//! [`Fleet::stop`] (also on drop) ends every thread within about one socket timeout: it raises the stop
//! flag, wakes sleepers and writes the SNMP threads' wake-up socket so their polls return at once.
#![forbid(unsafe_code)]

use super::config::FleetConfig;
use super::device::Device;
use super::lateness::Lateness;
use super::netflow::FlowExporter;
use super::scenario::{Book, Host};
use super::schedule;
use super::snmp::serve::{self, Listener, Serving, Waker};
use super::syslog::{self, SendQueue, SyslogExporter, Transport};
use super::traffic::DiscardSink;
use super::trap::{TrapOptions, TrapSender};
use crate::labels::Subsystem;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Read timeout of every blocking socket loop: the longest a loop goes without looking at the stop flag
/// when nothing wakes it.
pub const LOOP_TIMEOUT: Duration = Duration::from_millis(500);

pub use super::fleet_error::{FleetError, NoUring, FD_HEADROOM};

/// A stop flag that sleepers can wait on.
#[derive(Debug, Default)]
pub struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Stop {
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }
    pub fn set(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.flag.store(true, Ordering::Relaxed);
        self.cv.notify_all();
    }
    /// Sleeps `d`; false if the fleet is stopping (at once or during the sleep).
    pub fn sleep(&self, d: Duration) -> bool {
        self.sleep_until(Instant::now() + d)
    }
    /// Sleeps until `t`; false if the fleet is stopping.
    pub fn sleep_until(&self, t: Instant) -> bool {
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.is_set() {
                return false;
            }
            let now = Instant::now();
            if now >= t {
                return true;
            }
            g = self
                .cv
                .wait_timeout(g, t - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// What every fleet thread shares.
#[derive(Debug)]
pub struct Shared {
    pub(crate) config: FleetConfig,
    pub(crate) devices: Vec<Arc<Device>>,
    pub(crate) stop: Stop,
    pub(crate) trap: Option<Arc<TrapSender>>,
    pub(crate) syslog: Option<SyslogExporter>,
    pub(crate) syslog_queue: Option<Arc<SendQueue>>,
    /// A socket to clone for scenario flow exporters.
    pub(crate) flow_socket: Option<UdpSocket>,
    pub(crate) scenarios: Book,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) started: SystemTime,
    /// Where `-traffic` sends what has no target (held so the socket stays bound).
    pub(crate) traffic_sink: Option<DiscardSink>,
    /// Wakes the SNMP serving threads at stop.
    pub(crate) snmp_waker: Waker,
    /// How late the scheduler reaches its jobs, and the periods it skipped (`GET /api/v1/fleet`).
    pub(crate) lateness: Lateness,
    /// SNMP requests the kernel dropped at the serving sockets' full receive buffers (`SO_RXQ_OVFL`).
    pub(crate) snmp_kernel_drops: AtomicU64,
    /// How the SNMP sockets are served: [`SNMP_IO_URING`] or [`SNMP_IO_EPOLL`] (`GET /api/v1/fleet`).
    pub(crate) snmp_io: &'static str,
}

pub const SNMP_IO_URING: &str = "io_uring";
pub const SNMP_IO_EPOLL: &str = "epoll";

/// How this fleet's SNMP sockets will be served: per port through io_uring when `-snmp-io` allows and
/// this kernel can (a probe), else epoll; `-device-net`'s shared sockets always by epoll. Under `auto`
/// a failed probe is said on stderr, not hidden; under `uring` it refuses to start.
fn snmp_io(config: &FleetConfig) -> Result<&'static str, NoUring> {
    use super::config::SnmpIo;
    if config.device_net().is_some() || config.snmp_io() == SnmpIo::Epoll {
        return Ok(SNMP_IO_EPOLL);
    }
    match (crate::netsys::uring::probe(), config.snmp_io()) {
        (Ok(()), _) => Ok(SNMP_IO_URING),
        (Err(why), SnmpIo::Uring) => Err(NoUring(why)),
        (Err(why), _) => {
            eprintln!(
                "nl6: per-port SNMP is served by epoll: io_uring is not available here ({why}); \
                 -snmp-io epoll chooses it without this line"
            );
            Ok(SNMP_IO_EPOLL)
        }
    }
}

impl Shared {
    /// Spawns a fleet thread with a birth label and keeps its handle for stop.
    pub(crate) fn spawn(
        &self,
        label: Subsystem,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        let h = nl6_profile::threads::spawn_labelled(label, name, f)?;
        self.keep(h);
        Ok(())
    }

    /// Spawns a fleet thread that inherits the caller's label (a scheduled scenario start).
    pub(crate) fn spawn_inheriting(
        &self,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        let h = nl6_profile::threads::spawn_inheriting(name, f)?;
        self.keep(h);
        Ok(())
    }

    fn keep(&self, h: JoinHandle<()>) {
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        // Finished scenario threads need no join at stop.
        threads.retain(|t| !t.is_finished());
        threads.push(h);
    }

    /// The syslog fire funnel for device `index` (false when syslog is off or the message was dropped).
    pub fn emit_syslog(&self, index: usize, severity: u8, msgid: &str, text: &str) -> bool {
        match (&self.syslog, self.devices.get(index)) {
            (Some(s), Some(d)) => s.fire(d, severity, msgid, text, SystemTime::now()),
            _ => false,
        }
    }

    /// Changes interface `if_index` of device `index` and announces it: a trap (when on) and a syslog
    /// message (when on). False when the status did not change.
    pub fn set_link(&self, index: usize, if_index: u32, up: bool) -> bool {
        let Some(d) = self.devices.get(index) else {
            return false;
        };
        let now = Instant::now();
        if !d.set_oper(if_index, up, now) {
            return false;
        }
        self.announce_link(index, if_index, up, now);
        true
    }

    /// Sets interface `if_index`'s admin status (a gNMI `Set` of `config/enabled`); when the oper status
    /// follows, announces it as a flap is. `None` for an unknown device or interface.
    pub fn set_admin(&self, index: usize, if_index: u32, up: bool) -> Option<bool> {
        let d = self.devices.get(index)?;
        let now = Instant::now();
        let oper_changed = d.set_admin(if_index, up, now)?;
        if oper_changed {
            self.announce_link(index, if_index, up, now);
        }
        Some(oper_changed)
    }

    /// The trap (when on) and the syslog message (when on) of a link change.
    fn announce_link(&self, index: usize, if_index: u32, up: bool, now: Instant) {
        let d = &self.devices[index];
        if let Some(t) = &self.trap {
            t.fire_link(d, if_index, up, now);
        }
        let (sev, text) = schedule::link_line(if_index, up);
        self.emit_syslog(index, sev, "LINK", &text);
    }
}

impl super::gnmi::Host for Shared {
    fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }
    fn config(&self) -> &dyn super::gnmi::Settings {
        &self.config
    }
    fn stopping(&self) -> bool {
        self.stop.is_set()
    }
    fn set_admin(&self, index: usize, if_index: u32, up: bool) -> Option<bool> {
        Shared::set_admin(self, index, if_index, up)
    }
    fn spawn(
        &self,
        label: Subsystem,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()> {
        Shared::spawn(self, label, name, f)
    }
}

impl Host for Shared {
    fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }
    fn book(&self) -> &Book {
        &self.scenarios
    }
    fn sleep_until(&self, t: Instant) -> bool {
        self.stop.sleep_until(t)
    }
    fn spawn_labelled(
        &self,
        label: Subsystem,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()> {
        self.spawn(label, name, f)
    }
    fn spawn_inheriting_label(
        &self,
        name: &str,
        f: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<()> {
        self.spawn_inheriting(name, f)
    }
    fn set_link(&self, index: usize, if_index: u32, up: bool) -> bool {
        Shared::set_link(self, index, if_index, up)
    }
    fn emit_syslog(&self, index: usize, severity: u8, msgid: &str, text: &str) -> bool {
        Shared::emit_syslog(self, index, severity, msgid, text)
    }
    fn flow_exporter(&self) -> Option<FlowExporter> {
        let (socket, target) = (self.flow_socket.as_ref()?, self.config.flow_target()?);
        let socket = socket.try_clone().ok()?;
        Some(FlowExporter::new(socket, target, self.devices.len()))
    }
    fn flow_interval(&self) -> Duration {
        self.config.flow_interval()
    }
    fn stopping(&self) -> bool {
        self.stop.is_set()
    }
}

/// A running fleet. Dropping it stops it.
#[derive(Debug)]
pub struct Fleet {
    shared: Arc<Shared>,
}

fn bind_udp(ip: IpAddr, port: u16) -> std::io::Result<UdpSocket> {
    UdpSocket::bind(SocketAddr::new(ip, port))
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> FleetError {
    let what = what.to_string();
    move |cause| FleetError::Io { what, cause }
}

/// The exporters' senders and sockets, bound on `ip` (each `None` when its target is off).
struct Exporters {
    trap: Option<Arc<TrapSender>>,
    syslog: Option<SyslogExporter>,
    syslog_queue: Option<Arc<SendQueue>>,
    flow_socket: Option<UdpSocket>,
}

impl Exporters {
    fn bind(config: &FleetConfig, ip: IpAddr) -> Result<Exporters, FleetError> {
        let trap = match config.trap_target() {
            Some(target) => {
                let s = bind_udp(ip, 0).map_err(io("trap socket"))?;
                s.set_read_timeout(Some(LOOP_TIMEOUT))
                    .map_err(io("trap socket timeout"))?;
                let opts = TrapOptions {
                    inform: config.trap_inform(),
                    timeout: config.inform_timeout(),
                    retries: config.inform_retries(),
                };
                Some(Arc::new(TrapSender::new(
                    s,
                    target,
                    config.snmp_community(),
                    opts,
                )))
            }
            None => None,
        };
        let (syslog, syslog_queue) = match config.syslog_target() {
            Some((Transport::Udp, target)) => (
                Some(SyslogExporter::udp(
                    bind_udp(ip, 0).map_err(io("syslog socket"))?,
                    target,
                )),
                None,
            ),
            Some((Transport::Tcp, _)) => {
                let q = Arc::new(SendQueue::new(config.syslog_queue()));
                (Some(SyslogExporter::tcp(q.clone())), Some(q))
            }
            None => (None, None),
        };
        let flow_socket = match config.flow_target() {
            Some(_) => Some(bind_udp(ip, 0).map_err(io("flow socket"))?),
            None => None,
        };
        Ok(Exporters {
            trap,
            syslog,
            syslog_queue,
            flow_socket,
        })
    }
}

impl Fleet {
    /// Binds every socket, then starts every thread.
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        let copy = config.clone();
        Self::bind_and_spawn(config).map_err(|e| e.explain_fd_limit(&copy))
    }

    fn bind_and_spawn(config: FleetConfig) -> Result<Fleet, FleetError> {
        config.validate()?;
        let boot = Instant::now();
        let ip = config.bind();
        let (config, traffic_sink) =
            super::traffic::with_sink(config).map_err(io("traffic sink"))?;
        let devices: Vec<Arc<Device>> = (0..config.devices())
            .map(|i| Arc::new(Device::new(i, boot)))
            .collect();
        let listeners = super::snmp::listen::bind_snmp(
            config.bind(),
            config.snmp_port(),
            config.device_net(),
            &devices,
        )?;
        let snmp_io = snmp_io(&config)?;
        let gnmi = super::gnmi::server::bind(&config, &devices)?;
        // Under -device-net every device sends from its own address (sendmsg with IP_PKTINFO), so the
        // exporters' sockets bind the wildcard address.
        let ip = match config.device_net() {
            Some(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            None => ip,
        };
        let Exporters {
            trap,
            syslog,
            syslog_queue,
            flow_socket,
        } = Exporters::bind(&config, ip)?;
        let shared = Arc::new(Shared {
            config,
            devices,
            stop: Stop::default(),
            trap,
            syslog,
            syslog_queue,
            flow_socket,
            scenarios: Book::default(),
            threads: Mutex::new(Vec::new()),
            started: SystemTime::now(),
            traffic_sink,
            snmp_waker: Waker::new().map_err(io("SNMP wake-up socket"))?,
            lateness: Lateness::default(),
            snmp_kernel_drops: AtomicU64::new(0),
            snmp_io,
        });
        let fleet = Fleet {
            shared: shared.clone(),
        };
        // From here a failure drops `fleet`, which stops what already started.
        fleet
            .spawn_threads(listeners, gnmi)
            .map_err(io("starting fleet threads"))?;
        Ok(fleet)
    }

    fn spawn_threads(
        &self,
        listeners: Vec<Listener>,
        gnmi: Option<super::gnmi::server::Bound>,
    ) -> std::io::Result<()> {
        let sh = &self.shared;
        let ring = sh.snmp_io == SNMP_IO_URING;
        let groups = serve::groups(listeners, serve::threads(ring));
        // Every serving thread's readiness set first: a failure here is a startup error, not a thread
        // that quietly never serves.
        let watches = groups
            .iter()
            .map(|g| serve::watch(g, sh.snmp_waker.watcher()?, ring))
            .collect::<std::io::Result<Vec<_>>>()?;
        for (t, (group, watch)) in groups.into_iter().zip(watches).enumerate() {
            let s = sh.clone();
            sh.spawn(Subsystem::SNMP, &format!("snmp-{t}"), move || {
                let serving = Serving {
                    devices: &s.devices,
                    community: s.config.snmp_community().as_bytes(),
                    stop: s.stop.flag(),
                    kernel_drops: &s.snmp_kernel_drops,
                };
                serve::run(&serving, &group, watch)
            })?;
        }
        if let Some(t) = &sh.trap {
            if t.options().inform {
                let (t1, s1) = (t.clone(), sh.clone());
                sh.spawn(Subsystem::TRAP, "trap-inform-reader", move || {
                    t1.run_reader(s1.stop.flag())
                })?;
                let (t2, s2) = (t.clone(), sh.clone());
                let tick = (t.options().timeout / 4)
                    .clamp(Duration::from_millis(10), Duration::from_millis(250));
                sh.spawn(Subsystem::TRAP, "trap-inform-retry", move || {
                    t2.run_retries(tick, |d| s2.stop.sleep(d))
                })?;
            }
        }
        if let (Some(q), Some((_, target))) = (&sh.syslog_queue, sh.config.syslog_target()) {
            let (q, s) = (q.clone(), sh.clone());
            sh.spawn(Subsystem::SYSLOG, "syslog-tcp", move || {
                syslog::run_tcp_sender(&q, target, &s.devices, s.stop.flag())
            })?;
        }
        if sh.trap.is_some() || sh.syslog.is_some() || sh.config.flow_target().is_some() {
            let s = sh.clone();
            sh.spawn(Subsystem::SCHEDULER, "lab-scheduler", move || {
                let c = &s.config;
                let jobs = schedule::Jobs {
                    devices: &s.devices,
                    trap: s.trap.as_deref(),
                    syslog: s.syslog.as_ref(),
                    flow: Host::flow_exporter(&*s),
                    every: [c.syslog_interval(), c.trap_interval(), c.flow_interval()],
                    lateness: &s.lateness,
                };
                schedule::run(jobs, |t| s.stop.sleep_until(t), || s.stop.is_set())
            })?;
        }
        if let Some(bound) = gnmi {
            let (rt, s) = (super::gnmi::server::runtime()?, sh.clone());
            sh.spawn(Subsystem::GNMI, "gnmi", move || {
                super::gnmi::server::run(rt, s, bound)
            })?;
        }
        if sh.config.gnmi().dialout().is_some() {
            super::gnmi::dialout::spawn(sh.clone())?;
        }
        if let Some(period) = sh.config.traffic() {
            super::traffic::spawn(sh, period, sh.config.bind(), sh.config.snmp_community())?;
        }
        Ok(())
    }

    /// The configuration the fleet runs with.
    pub fn config(&self) -> &FleetConfig {
        &self.shared.config
    }
    pub fn devices(&self) -> &[Arc<Device>] {
        &self.shared.devices
    }
    /// The device named `name`.
    pub fn device(&self, name: &str) -> Option<&Arc<Device>> {
        self.shared.devices.get(super::device::index_of(name)?)
    }
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
    /// When the fleet started.
    pub fn started(&self) -> SystemTime {
        self.shared.started
    }
    /// The discard socket `-traffic` sends unset targets' messages to, when it made one.
    pub fn traffic_sink(&self) -> Option<SocketAddr> {
        self.shared.traffic_sink.as_ref().map(DiscardSink::addr)
    }

    /// Emits one syslog message from device `index` through the fire funnel (false when syslog is off or
    /// the TCP queue was full).
    pub fn emit_syslog(&self, index: usize, text: &str) -> bool {
        self.shared
            .emit_syslog(index, syslog::SEVERITY_INFO, "EVENT", text)
    }

    /// Sets an interface's oper status and announces the change (trap and syslog when on).
    pub fn set_link(&self, index: usize, if_index: u32, up: bool) -> bool {
        self.shared.set_link(index, if_index, up)
    }

    /// Frames waiting in the TCP syslog queue (0 without a TCP target).
    pub fn syslog_queue_len(&self) -> usize {
        self.shared.syslog_queue.as_ref().map_or(0, |q| q.len())
    }

    /// The scheduler's lateness and skipped periods so far.
    pub fn lateness(&self) -> super::lateness::Snapshot {
        self.shared.lateness.snapshot()
    }
    /// How the SNMP sockets are served: "io_uring" or "epoll".
    pub fn snmp_io(&self) -> &'static str {
        self.shared.snmp_io
    }

    /// SNMP requests the kernel dropped before a serving thread could read them (its sockets' receive
    /// buffers were full), as the kernel counted them.
    pub fn snmp_kernel_drops(&self) -> u64 {
        self.shared.snmp_kernel_drops.load(Ordering::Relaxed)
    }

    /// INFORMs awaiting a response.
    pub fn informs_pending(&self) -> usize {
        self.shared.trap.as_ref().map_or(0, |t| t.pending_len())
    }

    /// Stops every thread and waits for them (bounded by the loops' timeouts). Idempotent.
    pub fn stop(&self) {
        let sh = &self.shared;
        sh.stop.set();
        if let Some(q) = &sh.syslog_queue {
            q.wake();
        }
        // Wake every SNMP serving thread now rather than at its next poll timeout.
        sh.snmp_waker.wake();
        let handles: Vec<_> =
            std::mem::take(&mut *sh.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop();
    }
}
