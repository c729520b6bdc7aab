//! SNMPv2-Trap and INFORM notifications (linkUp/linkDown) to one trap target.
//!
//! [`TrapSender::fire_link`] is the trap fire funnel, scoped `trap` per fire. With INFORMs on, each fire
//! registers a pending request; the INFORM reader loop ([`TrapSender::run_reader`]) matches the target's
//! Response PDUs and the retry loop ([`TrapSender::run_retries`]) resends after a timeout up to a retry
//! count, then counts the INFORM as failed. Both loops run in threads labelled `trap` at birth, retry on
//! EINTR and poll the stop flag through timeouts. Notification building is a plain function.
#![forbid(unsafe_code)]

use super::device::{Device, DeviceCounters};
use super::send::{send_as, Outbox};
use super::snmp::ber::{Oid, Value};
use super::snmp::mib::{IF_TABLE, SYS_UPTIME_0};
use super::snmp::{pdu, Message, VERSION_2C};
use crate::labels::{self, Subsystem};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// snmpTrapOID.0.
pub const SNMP_TRAP_OID_0: [u32; 11] = [1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];
/// linkDown (IF-MIB, via SNMPv2-MIB snmpTraps).
pub const LINK_DOWN: [u32; 10] = [1, 3, 6, 1, 6, 3, 1, 1, 5, 3];
/// linkUp.
pub const LINK_UP: [u32; 10] = [1, 3, 6, 1, 6, 3, 1, 1, 5, 4];
const SYS_NAME_0: [u32; 9] = [1, 3, 6, 1, 2, 1, 1, 5, 0];

/// The varbinds of a linkUp/linkDown notification: sysUpTime.0, snmpTrapOID.0, then IF-MIB's objects
/// (ifIndex, ifAdminStatus, ifOperStatus) and sysName.0 so a receiver can tell devices apart.
pub fn link_varbinds(uptime: u32, if_index: u32, up: bool, sys_name: &str) -> Vec<(Oid, Value)> {
    let col = |c: u32| {
        let mut v = IF_TABLE.to_vec();
        v.extend_from_slice(&[1, c, if_index]);
        Oid(v)
    };
    let status = Value::Integer(if up { 1 } else { 2 });
    vec![
        (Oid(SYS_UPTIME_0.to_vec()), Value::TimeTicks(uptime)),
        (
            Oid(SNMP_TRAP_OID_0.to_vec()),
            Value::Oid(Oid(if up { LINK_UP } else { LINK_DOWN }.to_vec())),
        ),
        (col(1), Value::Integer(if_index as i64)),
        (col(7), Value::Integer(1)),
        (col(8), status),
        (
            Oid(SYS_NAME_0.to_vec()),
            Value::OctetString(sys_name.as_bytes().to_vec()),
        ),
    ]
}

/// Encodes a notification PDU (`pdu::TRAP_V2` or `pdu::INFORM`).
pub fn notification(
    pdu_type: u8,
    request_id: i32,
    community: &[u8],
    varbinds: Vec<(Oid, Value)>,
) -> Vec<u8> {
    Message {
        version: VERSION_2C,
        community: community.to_vec(),
        pdu_type,
        request_id,
        error_status: 0,
        error_index: 0,
        varbinds,
    }
    .encode()
}

/// How notifications are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapOptions {
    /// Send INFORMs (acknowledged) instead of traps.
    pub inform: bool,
    /// How long to wait for an INFORM's response before resending.
    pub timeout: Duration,
    /// How many times to resend an unanswered INFORM.
    pub retries: u32,
}

#[derive(Debug)]
struct Pending {
    packet: Vec<u8>,
    device: Arc<Device>,
    deadline: Instant,
    retries_left: u32,
}

/// The fleet's notification sender: one UDP socket shared by the funnel (send) and the reader (receive).
#[derive(Debug)]
pub struct TrapSender {
    socket: UdpSocket,
    target: SocketAddr,
    community: Vec<u8>,
    options: TrapOptions,
    next_id: AtomicI32,
    pending: Mutex<HashMap<i32, Pending>>,
}

impl TrapSender {
    /// A sender on `socket` (which must have a read timeout for the reader loop to see stop).
    pub fn new(
        socket: UdpSocket,
        target: SocketAddr,
        community: &str,
        options: TrapOptions,
    ) -> TrapSender {
        TrapSender {
            socket,
            target,
            community: community.as_bytes().to_vec(),
            options,
            next_id: AtomicI32::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    pub fn options(&self) -> TrapOptions {
        self.options
    }

    /// INFORMs awaiting a response.
    pub fn pending_len(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The trap fire funnel: one linkUp/linkDown for `device`'s interface `if_index`, scoped `trap`.
    pub fn fire_link(&self, device: &Arc<Device>, if_index: u32, up: bool, now: Instant) -> bool {
        labels::with(Subsystem::TRAP, || {
            let packet = self.link_packet(device, if_index, up, now);
            let ok = send_as(device, &self.socket, &packet, self.target);
            self.count(device, ok);
            ok
        })
    }

    /// The funnel's batched form: the notification goes into `out`, sent (and counted) at
    /// [`TrapSender::flush`] with the others that fell due together.
    pub fn fire_link_into(
        &self,
        device: &Arc<Device>,
        if_index: u32,
        up: bool,
        now: Instant,
        out: &mut Outbox,
    ) {
        labels::with(Subsystem::TRAP, || {
            let packet = self.link_packet(device, if_index, up, now);
            out.push(device, &packet, self.target);
        })
    }

    /// Sends what [`TrapSender::fire_link_into`] gathered (devices by index in `devices`), counting
    /// each, scoped `trap`.
    pub fn flush(&self, out: &mut Outbox, devices: &[Arc<Device>]) {
        labels::with(Subsystem::TRAP, || {
            out.flush(&self.socket, |d, ok| self.count(&devices[d], ok))
        })
    }

    /// Encodes one notification (and, for an INFORM, registers it as pending).
    fn link_packet(&self, device: &Arc<Device>, if_index: u32, up: bool, now: Instant) -> Vec<u8> {
        crate::lab::probe!("trap.fire");
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) & 0x7fff_ffff;
        let vbs = link_varbinds(device.uptime_ticks(now), if_index, up, &device.name());
        let kind = if self.options.inform {
            pdu::INFORM
        } else {
            pdu::TRAP_V2
        };
        let packet = notification(kind, id, &self.community, vbs);
        if self.options.inform {
            let p = Pending {
                packet: packet.clone(),
                device: device.clone(),
                deadline: now + self.options.timeout,
                retries_left: self.options.retries,
            };
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, p);
        }
        packet
    }

    /// Counts one notification sent, or refused by the OS.
    fn count(&self, device: &Device, ok: bool) {
        let c = &device.counters;
        DeviceCounters::inc(match (ok, self.options.inform) {
            (false, _) => &c.send_errors,
            (true, true) => &c.informs_sent,
            (true, false) => &c.traps_sent,
        });
    }

    /// The INFORM reader loop: matches Response PDUs from the target to pending INFORMs until `stop`.
    pub fn run_reader(&self, stop: &AtomicBool) {
        crate::lab::probe!("inform.reader");
        let mut buf = vec![0u8; 65_535];
        while !stop.load(Ordering::Relaxed) {
            let n = match self.socket.recv_from(&mut buf) {
                Ok((n, from)) if from == self.target => n,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => continue, // timeout: look at stop again
            };
            let Ok(m) = Message::decode(&buf[..n]) else {
                continue;
            };
            if m.pdu_type != pdu::RESPONSE {
                continue;
            }
            let done = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&m.request_id);
            if let Some(p) = done {
                DeviceCounters::inc(&p.device.counters.informs_acked);
            }
        }
    }

    /// The INFORM retry loop: every `tick`, resends INFORMs past their deadline and gives up on those out
    /// of retries. `sleep` returns false when the fleet stops.
    pub fn run_retries(&self, tick: Duration, mut sleep: impl FnMut(Duration) -> bool) {
        crate::lab::probe!("inform.retry");
        while sleep(tick) {
            self.retry_due(Instant::now());
        }
    }

    /// One pass of the retry loop at `now` (plain logic, tested directly).
    pub fn retry_due(&self, now: Instant) {
        let mut resend = Vec::new();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.retain(|_, p| {
                if p.deadline > now {
                    return true;
                }
                if p.retries_left == 0 {
                    DeviceCounters::inc(&p.device.counters.informs_failed);
                    return false;
                }
                p.retries_left -= 1;
                p.deadline = now + self.options.timeout;
                resend.push((p.packet.clone(), p.device.clone()));
                true
            });
        }
        for (packet, device) in resend {
            labels::with(Subsystem::TRAP, || {
                send_as(&device, &self.socket, &packet, self.target)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_down_notification_layout() {
        let vbs = link_varbinds(4242, 3, false, "nl6-dev-0001");
        let bytes = notification(pdu::TRAP_V2, 9, b"public", vbs);
        let m = Message::decode(&bytes).unwrap();
        assert_eq!(m.pdu_type, pdu::TRAP_V2);
        assert_eq!(m.request_id, 9);
        assert_eq!(
            m.varbinds[0],
            (
                Oid::parse("1.3.6.1.2.1.1.3.0").unwrap(),
                Value::TimeTicks(4242)
            )
        );
        assert_eq!(
            m.varbinds[1].1,
            Value::Oid(Oid::parse("1.3.6.1.6.3.1.1.5.3").unwrap())
        );
        assert_eq!(
            m.varbinds[4],
            (
                Oid::parse("1.3.6.1.2.1.2.2.1.8.3").unwrap(),
                Value::Integer(2)
            )
        );
    }

    #[test]
    fn unanswered_informs_are_retried_then_failed() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let opts = TrapOptions {
            inform: true,
            timeout: Duration::from_millis(100),
            retries: 2,
        };
        let s = TrapSender::new(sock, sink.local_addr().unwrap(), "public", opts);
        let d = Arc::new(Device::new(0, Instant::now()));
        let t0 = Instant::now();
        assert!(s.fire_link(&d, 1, false, t0));
        let mut buf = [0u8; 1500];
        let n = sink.recv(&mut buf).unwrap();
        assert_eq!(Message::decode(&buf[..n]).unwrap().pdu_type, pdu::INFORM);
        s.retry_due(t0 + Duration::from_millis(50));
        assert_eq!(s.pending_len(), 1, "not due yet");
        s.retry_due(t0 + Duration::from_millis(150));
        s.retry_due(t0 + Duration::from_millis(300));
        for _ in 0..2 {
            let n = sink.recv(&mut buf).unwrap();
            assert_eq!(
                Message::decode(&buf[..n]).unwrap().pdu_type,
                pdu::INFORM,
                "a resend"
            );
        }
        assert_eq!(d.counters.informs_failed.load(Ordering::Relaxed), 0);
        s.retry_due(t0 + Duration::from_millis(450));
        assert_eq!(s.pending_len(), 0);
        assert_eq!(d.counters.informs_failed.load(Ordering::Relaxed), 1);
    }
}
