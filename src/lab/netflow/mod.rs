//! NetFlow v9 export (RFC 3954): packet encoding (header, one template flowset, one data flowset) and the
//! per-tick funnel that turns a device's traffic since the last tick into flow records.
//!
//! [`FlowExporter::tick`] is the funnel, scoped `flow`. It reuses one packet buffer and a fixed record
//! array, so once warm it allocates nothing; called from a thread that already carries `flow` (the
//! `lab-scheduler` running a device's flow job, which it runs under `flow`) the scope writes nothing
//! either. Every packet carries the template so a collector that
//! starts late decodes the next packet. Encoding is a plain function into a caller's buffer.
#![forbid(unsafe_code)]

use super::device::{Device, DeviceCounters, INTERFACES_PER_DEVICE};
use super::send::{send_as, Outbox};
use crate::labels::{self, Subsystem};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The template id of our one record layout (ids below 256 are reserved for flowset ids).
pub const TEMPLATE_ID: u16 = 256;

/// (field type, length) of the template, in record order (RFC 3954 section 8 field types).
pub const TEMPLATE: [(u16, u16); 11] = [
    (1, 4),  // IN_BYTES
    (2, 4),  // IN_PKTS
    (4, 1),  // PROTOCOL
    (7, 2),  // L4_SRC_PORT
    (8, 4),  // IPV4_SRC_ADDR
    (10, 2), // INPUT_SNMP
    (11, 2), // L4_DST_PORT
    (12, 4), // IPV4_DST_ADDR
    (14, 2), // OUTPUT_SNMP
    (21, 4), // LAST_SWITCHED
    (22, 4), // FIRST_SWITCHED
];
/// Bytes of one data record.
pub const RECORD_LEN: usize = 33;
/// Most records one device produces per tick (one per direction per interface).
pub const MAX_RECORDS: usize = 2 * INTERFACES_PER_DEVICE;

/// The packet header fields that vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sys_uptime_ms: u32,
    pub unix_secs: u32,
    pub sequence: u32,
    pub source_id: u32,
}

/// One flow record in template order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub bytes: u32,
    pub packets: u32,
    pub protocol: u8,
    pub src_port: u16,
    pub src_addr: [u8; 4],
    pub input_if: u16,
    pub dst_port: u16,
    pub dst_addr: [u8; 4],
    pub output_if: u16,
    pub last_ms: u32,
    pub first_ms: u32,
}

/// Encodes a whole export packet into `out` (cleared first): header, template flowset, data flowset
/// padded to a 4-byte boundary. Allocates only if `out` lacks capacity.
pub fn encode_packet(out: &mut Vec<u8>, h: Header, records: &[Record]) {
    out.clear();
    let count = 1 + records.len() as u16; // template record + data records
    out.extend_from_slice(&9u16.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&h.sys_uptime_ms.to_be_bytes());
    out.extend_from_slice(&h.unix_secs.to_be_bytes());
    out.extend_from_slice(&h.sequence.to_be_bytes());
    out.extend_from_slice(&h.source_id.to_be_bytes());
    // Template flowset (id 0).
    let tlen = 4 + 4 + 4 * TEMPLATE.len() as u16;
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&tlen.to_be_bytes());
    out.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
    out.extend_from_slice(&(TEMPLATE.len() as u16).to_be_bytes());
    for (t, l) in TEMPLATE {
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&l.to_be_bytes());
    }
    if records.is_empty() {
        return;
    }
    // Data flowset.
    let body = records.len() * RECORD_LEN;
    let pad = (4 - (4 + body) % 4) % 4;
    out.extend_from_slice(&TEMPLATE_ID.to_be_bytes());
    out.extend_from_slice(&((4 + body + pad) as u16).to_be_bytes());
    for r in records {
        out.extend_from_slice(&r.bytes.to_be_bytes());
        out.extend_from_slice(&r.packets.to_be_bytes());
        out.push(r.protocol);
        out.extend_from_slice(&r.src_port.to_be_bytes());
        out.extend_from_slice(&r.src_addr);
        out.extend_from_slice(&r.input_if.to_be_bytes());
        out.extend_from_slice(&r.dst_port.to_be_bytes());
        out.extend_from_slice(&r.dst_addr);
        out.extend_from_slice(&r.output_if.to_be_bytes());
        out.extend_from_slice(&r.last_ms.to_be_bytes());
        out.extend_from_slice(&r.first_ms.to_be_bytes());
    }
    out.extend_from_slice(&[0u8; 3][..pad]);
}

/// Fills `records` with device traffic since the last tick and moves the flow marks; returns how many.
/// Sources are in 10.0.0.0/8 (one /24 per device), destinations in 198.51.100.0/24 (RFC 5737).
pub fn collect_records(
    device: &Device,
    now: Instant,
    last_ms: u32,
    records: &mut [Record; MAX_RECORDS],
) -> usize {
    let now_ms = device.uptime_ticks(now).wrapping_mul(10);
    let d = device.index();
    let mut st = device.advance_mut(now);
    let mut n = 0;
    for i in st.interfaces.iter_mut() {
        let din = i.in_octets - i.flow_mark_in;
        let dout = i.out_octets - i.flow_mark_out;
        i.flow_mark_in = i.in_octets;
        i.flow_mark_out = i.out_octets;
        let host = [10, (d >> 8) as u8, d as u8, i.index as u8];
        let peer = [198, 51, 100, i.index as u8 * 10];
        for (delta, inbound) in [(din, true), (dout, false)] {
            if delta == 0 || n == MAX_RECORDS {
                continue;
            }
            let (src, dst, src_port, dst_port) = if inbound {
                (peer, host, 443, 40_000 + i.index as u16)
            } else {
                (host, peer, 40_000 + i.index as u16, 443)
            };
            records[n] = Record {
                bytes: delta.min(u32::MAX as u64) as u32,
                packets: (delta / 600).max(1) as u32,
                protocol: 6,
                src_port,
                src_addr: src,
                input_if: if inbound { i.index as u16 } else { 0 },
                dst_port,
                dst_addr: dst,
                output_if: if inbound { 0 } else { i.index as u16 },
                last_ms: now_ms,
                first_ms: last_ms.min(now_ms),
            };
            n += 1;
        }
    }
    n
}

/// An exporter: the socket, the target and the reused packet buffer. Each ticker owns one.
#[derive(Debug)]
pub struct FlowExporter {
    socket: UdpSocket,
    target: SocketAddr,
    buf: Vec<u8>,
    records: [Record; MAX_RECORDS],
    /// Uptime (ms) of each device's previous tick, for FIRST_SWITCHED; indexed by device index.
    last_ms: Vec<u32>,
}

impl FlowExporter {
    /// An exporter for a fleet of `devices` devices.
    pub fn new(socket: UdpSocket, target: SocketAddr, devices: usize) -> FlowExporter {
        FlowExporter {
            socket,
            target,
            buf: Vec::with_capacity(20 + 52 + 4 + MAX_RECORDS * RECORD_LEN + 4),
            records: [Record::default(); MAX_RECORDS],
            last_ms: vec![0; devices],
        }
    }

    /// The per-tick funnel, scoped `flow`: one export packet for `device`'s traffic since its last tick.
    /// Allocation-free once constructed; no label write when the caller already carries `flow`.
    pub fn tick(&mut self, device: &Device, now: Instant) -> bool {
        labels::with(Subsystem::FLOW, || self.tick_unscoped(device, now))
    }

    /// The funnel's work without the label scope (the label-cost benchmark compares the two).
    pub fn tick_unscoped(&mut self, device: &Device, now: Instant) -> bool {
        crate::lab::probe!("flow.tick");
        self.encode(device, now);
        Self::count(
            device,
            send_as(device, &self.socket, &self.buf, self.target),
        )
    }

    /// Encodes `device`'s export packet (its traffic since its last tick) into the reused buffer.
    fn encode(&mut self, device: &Device, now: Instant) {
        let idx = device.index();
        let last = self.last_ms.get(idx).copied().unwrap_or(0);
        let n = collect_records(device, now, last, &mut self.records);
        let uptime_ms = device.uptime_ticks(now).wrapping_mul(10);
        if let Some(l) = self.last_ms.get_mut(idx) {
            *l = uptime_ms;
        }
        let unix_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(0);
        let sequence = device
            .counters
            .flow_sequence
            .fetch_add(1, Ordering::Relaxed);
        let h = Header {
            sys_uptime_ms: uptime_ms,
            unix_secs,
            sequence,
            source_id: idx as u32,
        };
        encode_packet(&mut self.buf, h, &self.records[..n]);
    }

    /// Counts one export sent, or refused by the OS.
    fn count(device: &Device, ok: bool) -> bool {
        let c = &device.counters;
        DeviceCounters::inc(if ok {
            &c.flow_packets_sent
        } else {
            &c.send_errors
        });
        ok
    }

    /// The tick's batched form, scoped `flow`: the export goes into `out`, sent (and counted) at
    /// [`FlowExporter::flush`] with the others that fell due together.
    pub fn tick_into(&mut self, device: &Device, now: Instant, out: &mut Outbox) {
        labels::with(Subsystem::FLOW, || {
            crate::lab::probe!("flow.tick");
            self.encode(device, now);
            out.push(device, &self.buf, self.target);
        })
    }

    /// Sends what [`FlowExporter::tick_into`] gathered (devices by index in `devices`), counting each,
    /// scoped `flow`.
    pub fn flush(&self, out: &mut Outbox, devices: &[Arc<Device>]) {
        labels::with(Subsystem::FLOW, || {
            out.flush(&self.socket, |d, ok| {
                Self::count(&devices[d], ok);
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::device::CARRIED_OCTETS;

    fn be16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }
    fn be32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn packet_layout_follows_rfc3954() {
        let r = Record {
            bytes: 1000,
            packets: 2,
            protocol: 6,
            src_port: 443,
            src_addr: [198, 51, 100, 10],
            input_if: 1,
            dst_port: 40001,
            dst_addr: [10, 0, 3, 1],
            output_if: 0,
            last_ms: 5000,
            first_ms: 4000,
        };
        let mut out = Vec::new();
        encode_packet(
            &mut out,
            Header {
                sys_uptime_ms: 5000,
                unix_secs: 1_700_000_000,
                sequence: 7,
                source_id: 3,
            },
            &[r, r],
        );
        // Header: version 9, count = 1 template + 2 data records, uptime, secs, sequence, source id.
        assert_eq!(be16(&out, 0), 9);
        assert_eq!(be16(&out, 2), 3);
        assert_eq!(
            (be32(&out, 4), be32(&out, 8), be32(&out, 12), be32(&out, 16)),
            (5000, 1_700_000_000, 7, 3)
        );
        // Template flowset: id 0, length 52, template 256 with 11 fields, first IN_BYTES/4.
        assert_eq!(
            (
                be16(&out, 20),
                be16(&out, 22),
                be16(&out, 24),
                be16(&out, 26)
            ),
            (0, 52, 256, 11)
        );
        assert_eq!((be16(&out, 28), be16(&out, 30)), (1, 4));
        let field_len_sum: u16 = TEMPLATE.iter().map(|(_, l)| l).sum();
        assert_eq!(field_len_sum as usize, RECORD_LEN);
        // Data flowset at 72: id 256, length 4 + 66 + 2 padding = 72.
        assert_eq!((be16(&out, 72), be16(&out, 74)), (256, 72));
        assert_eq!(out.len(), 72 + 72);
        assert_eq!(be32(&out, 76), 1000);
        assert_eq!(out[84], 6);
        assert_eq!(&out[87..91], &[198, 51, 100, 10]);
        assert_eq!(&out[out.len() - 2..], &[0, 0], "padding is zero");
    }

    #[test]
    fn records_cover_traffic_since_the_last_tick_only() {
        let boot = Instant::now();
        let d = Device::new(5, boot);
        let mut recs = [Record::default(); MAX_RECORDS];
        let t1 = boot + std::time::Duration::from_secs(1);
        let n = collect_records(&d, t1, 0, &mut recs);
        assert_eq!(n, MAX_RECORDS);
        let first: u64 = recs.iter().map(|r| r.bytes as u64).sum();
        let st = d.advance(t1);
        let total: u64 = st
            .interfaces
            .iter()
            .map(|i| i.in_octets + i.out_octets)
            .sum::<u64>()
            - 2 * CARRIED_OCTETS;
        drop(st);
        assert_eq!(first, total);
        assert_eq!(
            collect_records(&d, t1, 1000, &mut recs),
            0,
            "nothing new at the same instant"
        );
        assert!(d.set_oper(2, false, t1));
        let n = collect_records(&d, t1 + std::time::Duration::from_secs(1), 1000, &mut recs);
        assert_eq!(n, MAX_RECORDS - 2, "a down interface has no flows");
    }
}
