//! SNMPv2c messages and the agent: the message codec (RFC 3416 PDUs over the BER codec), the agent's
//! answer to GET, GETNEXT and GETBULK against a [`MibView`](super::mib::MibView), and [`respond`] (one
//! request to one device, counted).
//!
//! [`answer`] is a plain function from request bytes to response bytes, tested without sockets. An answer
//! is never larger than [`response_limit`] of its request: at most [`MAX_AMPLIFICATION`] × the request's
//! size and one unfragmented datagram ([`MAX_DATAGRAM`]), so a spoofed request cannot make a device a
//! reflector (unbounded, a 120-byte GETBULK would get 9–25 KB back). Beyond it a GETBULK answer is
//! truncated at the end (RFC 3416 §4.2.3: the repeated bindings that fit, in order), any other answer
//! becomes `tooBig` with no bindings (§4.2.1). The
//! serving threads ([`super::serve`]) are labelled `snmp` at birth; [`respond`] drops and counts malformed
//! datagrams and wrong communities (an agent stays silent on both). Nothing but responses to the
//! requester is ever sent.
#![forbid(unsafe_code)]

use super::super::device::{Device, DeviceCounters};
use super::ber::{self, tag, BerError, Oid, Reader, Value};
use super::mib::{DeviceMib, MibView};
use std::time::Instant;

/// PDU tags (context-specific, constructed).
pub mod pdu {
    pub const GET: u8 = 0xa0;
    pub const GET_NEXT: u8 = 0xa1;
    pub const RESPONSE: u8 = 0xa2;
    pub const SET: u8 = 0xa3;
    pub const GET_BULK: u8 = 0xa5;
    pub const INFORM: u8 = 0xa6;
    pub const TRAP_V2: u8 = 0xa7;
    pub const REPORT: u8 = 0xa8;
}

/// SNMP version field for v2c.
pub const VERSION_2C: i64 = 1;
/// error-status tooBig.
pub const TOO_BIG: i64 = 1;
/// error-status notWritable, our answer to SET (the lab's MIB is read-only).
pub const NOT_WRITABLE: i64 = 17;
/// The largest UDP payload that crosses a 1500-byte-MTU link unfragmented over IPv6 (1500 − 40 − 8);
/// over IPv4 that leaves 20 bytes to spare (1472).
pub const MAX_DATAGRAM: usize = 1452;
/// An answer is at most this many times its request's size (GET and GETNEXT answers are about their
/// request's size; GETBULK's are what this bounds).
pub const MAX_AMPLIFICATION: usize = 8;
/// Cap on GETBULK repetitions regardless of what the manager asks.
pub const MAX_REPETITIONS: usize = 256;

/// The largest answer to a request of `request_len` bytes.
pub fn response_limit(request_len: usize) -> usize {
    request_len
        .saturating_mul(MAX_AMPLIFICATION)
        .min(MAX_DATAGRAM)
}

/// A decoded SNMP message (v1/v2c community form). For GETBULK, `error_status` carries non-repeaters
/// and `error_index` max-repetitions, as on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub version: i64,
    pub community: Vec<u8>,
    pub pdu_type: u8,
    pub request_id: i32,
    pub error_status: i64,
    pub error_index: i64,
    pub varbinds: Vec<(Oid, Value)>,
}

impl Message {
    /// Decodes a whole datagram; trailing bytes are an error.
    pub fn decode(bytes: &[u8]) -> Result<Message, BerError> {
        let mut outer = Reader::new(bytes);
        let mut msg = outer.read_constructed(tag::SEQUENCE)?;
        if !outer.is_empty() {
            return Err(BerError::TrailingBytes);
        }
        let version = msg.read_integer()?;
        let community = msg.read_octets()?.to_vec();
        let (pdu_type, body) = msg.read_tlv()?;
        if !msg.is_empty() {
            return Err(BerError::TrailingBytes);
        }
        if !(0xa0..=0xa8).contains(&pdu_type) {
            return Err(BerError::BadValue(pdu_type));
        }
        let mut p = Reader::new(body);
        let request_id = i32::try_from(p.read_integer()?).map_err(|_| BerError::BadInteger)?;
        let error_status = p.read_integer()?;
        let error_index = p.read_integer()?;
        let mut list = p.read_constructed(tag::SEQUENCE)?;
        let mut varbinds = Vec::new();
        while !list.is_empty() {
            let mut vb = list.read_constructed(tag::SEQUENCE)?;
            let oid = vb.read_oid()?;
            let value = vb.read_value()?;
            if !vb.is_empty() {
                return Err(BerError::TrailingBytes);
            }
            varbinds.push((oid, value));
        }
        Ok(Message {
            version,
            community,
            pdu_type,
            request_id,
            error_status,
            error_index,
            varbinds,
        })
    }

    /// Encodes the message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.varbinds.len() * 32);
        ber::put_constructed(&mut out, tag::SEQUENCE, |o| {
            ber::put_integer(o, tag::INTEGER, self.version);
            ber::put_tlv(o, tag::OCTET_STRING, &self.community);
            ber::put_constructed(o, self.pdu_type, |o| {
                ber::put_integer(o, tag::INTEGER, self.request_id as i64);
                ber::put_integer(o, tag::INTEGER, self.error_status);
                ber::put_integer(o, tag::INTEGER, self.error_index);
                ber::put_constructed(o, tag::SEQUENCE, |o| {
                    for (oid, v) in &self.varbinds {
                        put_varbind(o, oid, v);
                    }
                });
            });
        });
        out
    }
}

/// What the agent did with one datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A response to send back.
    Reply(Vec<u8>),
    /// Did not decode: dropped.
    Malformed(BerError),
    /// Decoded, but the community is not ours: dropped silently.
    Refused,
    /// Decoded, but the PDU is not a request (a Response, a trap, a Report; the type is given): dropped,
    /// and never answered, whatever the community (answering a response would let two agents loop).
    NotARequest(u8),
    /// An SNMP message of a version we do not speak (v1 is 0, v3 is 3; we answer v2c, 1): dropped. Told
    /// apart from [`Outcome::Refused`] and [`Outcome::Malformed`] by its version field alone, so a v3
    /// message (no community) is not counted as malformed nor a v1 one as a bad community.
    UnsupportedVersion(i64),
}

/// The version field of a datagram shaped like an SNMP message (a SEQUENCE opening with an INTEGER),
/// whatever follows it; `None` when not even that decodes.
fn message_version(bytes: &[u8]) -> Option<i64> {
    Reader::new(bytes)
        .read_constructed(tag::SEQUENCE)
        .ok()?
        .read_integer()
        .ok()
}

/// The agent: the answer to `request` against `mib` for `community`.
pub fn answer<M: MibView + ?Sized>(request: &[u8], community: &[u8], mib: &M) -> Outcome {
    match message_version(request) {
        Some(v) if v != VERSION_2C => return Outcome::UnsupportedVersion(v),
        _ => {}
    }
    let req = match Message::decode(request) {
        Ok(m) => m,
        Err(e) => return Outcome::Malformed(e),
    };
    if !matches!(
        req.pdu_type,
        pdu::GET | pdu::GET_NEXT | pdu::GET_BULK | pdu::SET
    ) {
        return Outcome::NotARequest(req.pdu_type);
    }
    if req.community != community {
        return Outcome::Refused;
    }
    let mut resp = Message {
        version: req.version,
        community: req.community.clone(),
        pdu_type: pdu::RESPONSE,
        request_id: req.request_id,
        error_status: 0,
        error_index: 0,
        varbinds: Vec::with_capacity(req.varbinds.len()),
    };
    match req.pdu_type {
        pdu::GET => {
            for (oid, _) in &req.varbinds {
                let v = match mib.get_value(oid) {
                    Some(v) => v,
                    None if mib.covers(oid) || names_known_object(mib, oid) => {
                        Value::NoSuchInstance
                    }
                    None => Value::NoSuchObject,
                };
                resp.varbinds.push((oid.clone(), v));
            }
        }
        pdu::GET_NEXT => {
            for (oid, _) in &req.varbinds {
                resp.varbinds.push(next_binding(mib, oid));
            }
        }
        pdu::GET_BULK => bulk(&req, mib, request.len(), &mut resp),
        pdu::SET => {
            resp.error_status = NOT_WRITABLE;
            resp.error_index = 1;
            resp.varbinds = req.varbinds.clone();
        }
        other => return Outcome::NotARequest(other),
    }
    Outcome::Reply(fit(resp, &req, response_limit(request.len())))
}

/// GETBULK (RFC 3416 §4.2.3): the non-repeaters' successors, then up to max-repetitions rows of the
/// repeaters' successors, ending early when every repeater has run out of MIB or when the bindings
/// would no longer fit [`response_limit`] (so a large max-repetitions costs no more work than fits).
fn bulk<M: MibView + ?Sized>(req: &Message, mib: &M, request_len: usize, resp: &mut Message) {
    let non_rep = (req.error_status.max(0) as usize).min(req.varbinds.len());
    let max_rep = (req.error_index.max(0) as usize).min(MAX_REPETITIONS);
    for (oid, _) in &req.varbinds[..non_rep] {
        resp.varbinds.push(next_binding(mib, oid));
    }
    // Lengths of lengths grow by at most 2 bytes at each of the 3 enclosing levels.
    let envelope = resp.encode().len() + 6;
    let budget = response_limit(request_len).saturating_sub(envelope);
    let mut scratch = Vec::new();
    let mut used = 0;
    let mut cursors: Vec<Oid> = req.varbinds[non_rep..]
        .iter()
        .map(|(o, _)| o.clone())
        .collect();
    for _ in 0..max_rep {
        let mut all_done = true;
        for c in cursors.iter_mut() {
            let (oid, v) = next_binding(mib, c);
            scratch.clear();
            put_varbind(&mut scratch, &oid, &v);
            used += scratch.len();
            if used > budget {
                return;
            }
            all_done &= v == Value::EndOfMibView;
            *c = oid.clone();
            resp.varbinds.push((oid, v));
        }
        if all_done {
            return;
        }
    }
}

/// Encodes `resp` within `limit` bytes: a GETBULK answer loses repeated bindings from the end (never a
/// non-repeater's); any other answer that does not fit, or a GETBULK whose non-repeaters alone do not,
/// becomes `tooBig` with no bindings (RFC 3416 §4.2.1).
fn fit(mut resp: Message, req: &Message, limit: usize) -> Vec<u8> {
    let mut bytes = resp.encode();
    if req.pdu_type == pdu::GET_BULK {
        let non_rep = (req.error_status.max(0) as usize).min(req.varbinds.len());
        while bytes.len() > limit && resp.varbinds.len() > non_rep {
            resp.varbinds.pop();
            bytes = resp.encode();
        }
    }
    if bytes.len() > limit {
        resp.varbinds.clear();
        resp.error_status = TOO_BIG;
        resp.error_index = 0;
        bytes = resp.encode();
    }
    bytes
}

fn put_varbind(out: &mut Vec<u8>, oid: &Oid, v: &Value) {
    ber::put_constructed(out, tag::SEQUENCE, |o| {
        ber::put_oid(o, oid);
        ber::put_value(o, v);
    });
}

/// An OID naming a scalar object whose instance is missing (`sysDescr` without `.0`) or a column.
/// True when `oid` is an instance of an object the MIB implements (RFC 3416 §4.2.1: then a missing
/// instance is `noSuchInstance`, not `noSuchObject`): some entry's object, the entry less its instance
/// arc (every instance here is one arc: `.0` for scalars, the ifIndex in ifTable), is a prefix of `oid`.
/// The entries under such a prefix sort next to `oid`, so its two neighbours are the only ones to test.
fn names_known_object<M: MibView + ?Sized>(mib: &M, oid: &Oid) -> bool {
    let before = mib.position(oid, false);
    [before.checked_sub(1), Some(before)]
        .into_iter()
        .flatten()
        .filter(|&i| i < mib.len())
        .any(|i| {
            let o = &mib.oid(i).0;
            let object = &o[..o.len().saturating_sub(1)];
            object.len() >= 2 && oid.0.starts_with(object)
        })
}

fn next_binding<M: MibView + ?Sized>(mib: &M, oid: &Oid) -> (Oid, Value) {
    match mib.next_entry(oid) {
        Some(entry) => entry,
        None => (oid.clone(), Value::EndOfMibView),
    }
}

/// The agent's side of one request to `device`: counts it, answers it from the device's MIB, and
/// counts what was dropped (malformed, wrong community, another version). The reply to send, if any.
pub fn respond(device: &Device, request: &[u8], community: &[u8]) -> Option<Vec<u8>> {
    DeviceCounters::inc(&device.counters.snmp_requests);
    let mib = DeviceMib::of(device, Instant::now());
    let counter = match answer(request, community, &mib) {
        Outcome::Reply(bytes) => return Some(bytes),
        Outcome::Malformed(_) => &device.counters.malformed,
        Outcome::Refused => &device.counters.bad_community,
        Outcome::NotARequest(_) => &device.counters.not_requests,
        Outcome::UnsupportedVersion(_) => &device.counters.bad_version,
    };
    DeviceCounters::inc(counter);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::device::Device;
    use crate::lab::snmp::mib::Mib;

    fn o(s: &str) -> Oid {
        Oid::parse(s).unwrap()
    }

    /// GetRequest sysDescr.0, community "public", request-id 0x1234abcd, assembled by hand from RFC 3416's
    /// ASN.1 (tests/fleet/snmp.rs checks that net-snmp's snmpget request re-encodes byte for byte).
    const GET_SYSDESCR: [u8; 43] = [
        0x30, 0x29, 0x02, 0x01, 0x01, 0x04, 0x06, b'p', b'u', b'b', b'l', b'i', b'c', 0xa0, 0x1c,
        0x02, 0x04, 0x12, 0x34, 0xab, 0xcd, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x30, 0x0e, 0x30,
        0x0c, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x02, 0x01, 0x01, 0x01, 0x00, 0x05, 0x00,
    ];

    fn request(pdu_type: u8, es: i64, ei: i64, oids: &[&str]) -> Vec<u8> {
        Message {
            version: 1,
            community: b"public".to_vec(),
            pdu_type,
            request_id: 77,
            error_status: es,
            error_index: ei,
            varbinds: oids.iter().map(|s| (o(s), Value::Null)).collect(),
        }
        .encode()
    }

    fn reply(bytes: &[u8]) -> Message {
        let boot = Instant::now();
        let d = Device::new(0, boot);
        match answer(bytes, b"public", &Mib::of_device(&d, boot)) {
            Outcome::Reply(r) => Message::decode(&r).unwrap(),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn decodes_a_known_get_request_byte_for_byte() {
        let m = Message::decode(&GET_SYSDESCR).unwrap();
        assert_eq!(m.version, 1);
        assert_eq!(m.community, b"public");
        assert_eq!(m.pdu_type, pdu::GET);
        assert_eq!(m.request_id, 0x1234abcd);
        assert_eq!(m.varbinds, vec![(o("1.3.6.1.2.1.1.1.0"), Value::Null)]);
        assert_eq!(
            m.encode(),
            GET_SYSDESCR,
            "re-encoding yields the same bytes"
        );
    }

    #[test]
    fn get_answers_values_and_v2_exceptions() {
        let r = reply(&request(
            pdu::GET,
            0,
            0,
            &["1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.1.5", "1.3.6.1.2.1.99.0"],
        ));
        assert_eq!(r.pdu_type, pdu::RESPONSE);
        assert_eq!(r.request_id, 77);
        assert_eq!(
            r.varbinds[0].1,
            Value::OctetString(b"nl6-dev-0000".to_vec())
        );
        assert_eq!(r.varbinds[1].1, Value::NoSuchInstance);
        assert_eq!(r.varbinds[2].1, Value::NoSuchObject);
    }

    #[test]
    fn an_unknown_instance_of_a_known_object_is_no_such_instance() {
        // sysName.1 (sysName is sysName.0), ifDescr.99 (4 interfaces), ifDescr.1.5 (too deep): the
        // objects exist, the instances do not (RFC 3416 §4.2.1). An unknown column is no such object.
        let r = reply(&request(
            pdu::GET,
            0,
            0,
            &[
                "1.3.6.1.2.1.1.5.1",
                "1.3.6.1.2.1.2.2.1.2.99",
                "1.3.6.1.2.1.2.2.1.2.1.5",
                "1.3.6.1.2.1.2.2.1.99.1",
                "1.3.6.1.2.1.1.99.0",
            ],
        ));
        let got: Vec<&Value> = r.varbinds.iter().map(|(_, v)| v).collect();
        assert_eq!(
            got,
            [
                &Value::NoSuchInstance,
                &Value::NoSuchInstance,
                &Value::NoSuchInstance,
                &Value::NoSuchObject,
                &Value::NoSuchObject
            ]
        );
    }

    #[test]
    fn getnext_steps_and_ends_with_end_of_mib_view() {
        let r = reply(&request(
            pdu::GET_NEXT,
            0,
            0,
            &["1.3.6.1.2.1.1", "1.3.6.1.2.1.31.1.1.1.19.4"],
        ));
        assert_eq!(r.varbinds[0].0, o("1.3.6.1.2.1.1.1.0"));
        assert_eq!(
            r.varbinds[1],
            (o("1.3.6.1.2.1.31.1.1.1.19.4"), Value::EndOfMibView)
        );
    }

    #[test]
    fn getbulk_honours_non_repeaters_and_max_repetitions() {
        let r = reply(&request(
            pdu::GET_BULK,
            1,
            3,
            &[
                "1.3.6.1.2.1.1.3",
                "1.3.6.1.2.1.2.2.1.2",
                "1.3.6.1.2.1.2.2.1.10",
            ],
        ));
        let names: Vec<String> = r.varbinds.iter().map(|(o, _)| o.to_string()).collect();
        assert_eq!(
            names,
            [
                "1.3.6.1.2.1.1.3.0",
                "1.3.6.1.2.1.2.2.1.2.1",
                "1.3.6.1.2.1.2.2.1.10.1",
                "1.3.6.1.2.1.2.2.1.2.2",
                "1.3.6.1.2.1.2.2.1.10.2",
                "1.3.6.1.2.1.2.2.1.2.3",
                "1.3.6.1.2.1.2.2.1.10.3",
            ]
        );
        // Near the end every repeater runs out: endOfMibView ends the response early.
        let r = reply(&request(
            pdu::GET_BULK,
            0,
            50,
            &["1.3.6.1.2.1.31.1.1.1.19.2"],
        ));
        assert_eq!(r.varbinds.len(), 3);
        assert_eq!(r.varbinds[2].1, Value::EndOfMibView);
    }

    #[test]
    fn wrong_community_and_malformed_packets_are_dropped() {
        let boot = Instant::now();
        let mib = Mib::of_device(&Device::new(0, boot), boot);
        assert_eq!(answer(&GET_SYSDESCR, b"private", &mib), Outcome::Refused);
        assert!(matches!(
            answer(&GET_SYSDESCR[..20], b"public", &mib),
            Outcome::Malformed(_)
        ));
        assert!(matches!(
            answer(b"\x30\x03\x02\x01", b"public", &mib),
            Outcome::Malformed(_)
        ));
        // v1 is not served: dropped as another version, not as a bad community.
        let mut v1 = GET_SYSDESCR;
        v1[4] = 0;
        assert_eq!(answer(&v1, b"public", &mib), Outcome::UnsupportedVersion(0));
        // v3 has no community (msgGlobalData follows the version): another version, not malformed.
        let v3 = b"\x30\x11\x02\x01\x03\x30\x0c\x02\x01\x01\x02\x01\x01\x04\x01\x04\x02\x01\x03";
        assert_eq!(answer(v3, b"public", &mib), Outcome::UnsupportedVersion(3));
        // A response, trap or report PDU sent to the agent is not a request, whatever the community,
        // so it is not counted as a bad community.
        for t in [pdu::RESPONSE, pdu::TRAP_V2, pdu::REPORT, pdu::INFORM] {
            let mut other = GET_SYSDESCR;
            other[13] = t;
            assert_eq!(answer(&other, b"public", &mib), Outcome::NotARequest(t));
            assert_eq!(answer(&other, b"private", &mib), Outcome::NotARequest(t));
        }
    }

    #[test]
    fn a_large_getbulk_is_truncated_within_the_limit_in_order() {
        let columns: Vec<String> = (1..=6).map(|c| format!("1.3.6.1.2.1.2.2.1.{c}")).collect();
        let oids: Vec<&str> = columns.iter().map(String::as_str).collect();
        let req = request(pdu::GET_BULK, 0, 1000, &oids);
        let boot = Instant::now();
        let mib = Mib::of_device(&Device::new(0, boot), boot);
        let Outcome::Reply(bytes) = answer(&req, b"public", &mib) else {
            panic!("no reply")
        };
        let limit = response_limit(req.len());
        assert!(
            bytes.len() <= limit && limit <= MAX_DATAGRAM,
            "{} > {limit}",
            bytes.len()
        );
        // Nearly full: truncation stops within one binding of the limit.
        assert!(bytes.len() + 40 > limit, "{} of {limit}", bytes.len());
        let r = Message::decode(&bytes).unwrap();
        assert_eq!(r.error_status, 0);
        assert!(r.varbinds.len() >= 6);
        // Cursor j (column j+1) at repetition k: k steps along ifTable's 4 rows, then the next columns.
        for (i, (oid, _)) in r.varbinds.iter().enumerate() {
            let walked = (i % 6) * 4 + i / 6;
            let want = format!("1.3.6.1.2.1.2.2.1.{}.{}", walked / 4 + 1, walked % 4 + 1);
            assert_eq!(oid.to_string(), want, "binding {i}");
        }
    }

    #[test]
    fn an_answer_over_the_limit_is_too_big_without_bindings() {
        // Forty sysDescr.0 in one GET: each answer binding carries the description (≈ 5× the request).
        let oids = vec!["1.3.6.1.2.1.1.1.0"; 40];
        let req = request(pdu::GET, 0, 0, &oids);
        let r = reply(&req);
        assert_eq!((r.error_status, r.error_index), (TOO_BIG, 0));
        assert!(r.varbinds.is_empty());
        assert_eq!(r.request_id, 77);
        // GETBULK with non-repeaters only: nothing to truncate, so tooBig as well.
        let req = request(pdu::GET_BULK, 40, 5, &vec!["1.3.6.1.2.1.1"; 40]);
        let r = reply(&req);
        assert_eq!(r.error_status, TOO_BIG);
        // A plain GET stays answered.
        let r = reply(&request(pdu::GET, 0, 0, &["1.3.6.1.2.1.1.1.0"]));
        assert_eq!(r.error_status, 0);
        assert_eq!(response_limit(10), 80);
        assert_eq!(response_limit(1000), MAX_DATAGRAM);
    }

    #[test]
    fn set_is_refused_with_not_writable() {
        let r = reply(&request(pdu::SET, 0, 0, &["1.3.6.1.2.1.1.5.0"]));
        assert_eq!((r.error_status, r.error_index), (NOT_WRITABLE, 1));
    }
}
