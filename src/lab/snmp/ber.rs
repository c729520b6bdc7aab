//! A small BER codec (X.690) covering exactly what SNMPv2c needs: INTEGER, OCTET STRING, NULL, OBJECT
//! IDENTIFIER, SEQUENCE, the SNMP application types (IpAddress, Counter32, Gauge32, TimeTicks, Counter64),
//! the v2 exception values and context-tagged PDUs.
//!
//! Encoding produces definite, minimal lengths (DER-shaped). Decoding borrows from the input, accepts the
//! long length form up to four octets and rejects everything else (indefinite lengths, truncation,
//! over-long integers, malformed OIDs) with a [`BerError`]; it never panics on any input.
//! This module does no I/O and knows nothing of SNMP messages (see [`super::agent`]).
#![forbid(unsafe_code)]

use std::fmt;

/// Universal and SNMP application tags used by the agent.
pub mod tag {
    pub const INTEGER: u8 = 0x02;
    pub const OCTET_STRING: u8 = 0x04;
    pub const NULL: u8 = 0x05;
    pub const OID: u8 = 0x06;
    pub const SEQUENCE: u8 = 0x30;
    pub const IP_ADDRESS: u8 = 0x40;
    pub const COUNTER32: u8 = 0x41;
    pub const GAUGE32: u8 = 0x42;
    pub const TIMETICKS: u8 = 0x43;
    pub const OPAQUE: u8 = 0x44;
    pub const COUNTER64: u8 = 0x46;
    pub const NO_SUCH_OBJECT: u8 = 0x80;
    pub const NO_SUCH_INSTANCE: u8 = 0x81;
    pub const END_OF_MIB_VIEW: u8 = 0x82;
}

/// Why a BER input could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BerError {
    /// The input ended inside a tag, a length or a value.
    Truncated,
    /// A length used the indefinite form or more than four length octets.
    BadLength,
    /// The tag was not the one the caller expected (expected, found).
    UnexpectedTag { expected: u8, found: u8 },
    /// An INTEGER was empty or did not fit the target type.
    BadInteger,
    /// An OBJECT IDENTIFIER was empty, had a truncated or over-long arc, or a non-minimal arc.
    BadOid,
    /// A value of a known tag had an impossible length (NULL with content, IpAddress not 4 octets).
    BadValue(u8),
    /// Bytes were left after the outermost value.
    TrailingBytes,
}

impl fmt::Display for BerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BerError::Truncated => f.write_str("BER: input truncated"),
            BerError::BadLength => f.write_str("BER: unsupported or invalid length"),
            BerError::UnexpectedTag { expected, found } => {
                write!(f, "BER: expected tag 0x{expected:02x}, found 0x{found:02x}")
            }
            BerError::BadInteger => f.write_str("BER: invalid INTEGER"),
            BerError::BadOid => f.write_str("BER: invalid OBJECT IDENTIFIER"),
            BerError::BadValue(t) => write!(f, "BER: invalid value for tag 0x{t:02x}"),
            BerError::TrailingBytes => f.write_str("BER: trailing bytes after value"),
        }
    }
}

impl std::error::Error for BerError {}

/// Dotted text that is no OID (the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidSyntaxError(pub String);

impl fmt::Display for OidSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid OID {:?}: want dotted numbers with at least two arcs",
            self.0
        )
    }
}

impl std::error::Error for OidSyntaxError {}

/// An OBJECT IDENTIFIER. Ordering is SNMP's lexicographic order on arcs (a prefix sorts first).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Oid(pub Vec<u32>);

impl Oid {
    /// Parses dotted text (`1.3.6.1.2.1.1.1.0`, a leading dot allowed).
    pub fn parse(text: &str) -> Result<Oid, OidSyntaxError> {
        let t = text.strip_prefix('.').unwrap_or(text);
        let arcs: Result<Vec<u32>, _> = t.split('.').map(str::parse::<u32>).collect();
        match arcs {
            Ok(a) if a.len() >= 2 => Ok(Oid(a)),
            _ => Err(OidSyntaxError(text.into())),
        }
    }

    /// The arcs.
    pub fn arcs(&self) -> &[u32] {
        &self.0
    }

    /// This OID with `more` arcs appended.
    pub fn child(&self, more: &[u32]) -> Oid {
        let mut v = self.0.clone();
        v.extend_from_slice(more);
        Oid(v)
    }

    /// Whether `self` lies at or under `prefix`.
    pub fn starts_with(&self, prefix: &Oid) -> bool {
        self.0.starts_with(&prefix.0)
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oid({self})")
    }
}

/// An SNMP variable value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Integer(i64),
    OctetString(Vec<u8>),
    Null,
    Oid(Oid),
    IpAddress([u8; 4]),
    Counter32(u32),
    Gauge32(u32),
    TimeTicks(u32),
    Opaque(Vec<u8>),
    Counter64(u64),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

/// Appends a definite length in the shortest form.
pub fn put_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = (len as u64).to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push(0x80 | (8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// Appends tag, length and `content`.
pub fn put_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    put_length(out, content.len());
    out.extend_from_slice(content);
}

/// Appends a constructed value whose content `fill` writes; the length is patched in afterwards.
pub fn put_constructed(out: &mut Vec<u8>, tag: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    out.push(tag);
    let len_at = out.len();
    out.push(0);
    let start = out.len();
    fill(out);
    let len = out.len() - start;
    if len >= 0x80 {
        let mut l = Vec::with_capacity(5);
        put_length(&mut l, len);
        out.splice(len_at..len_at + 1, l);
    } else {
        out[len_at] = len as u8;
    }
}

/// Appends a signed INTEGER (two's complement, minimal octets) under `tag`.
pub fn put_integer(out: &mut Vec<u8>, tag: u8, v: i64) {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    // Drop leading octets that only repeat the sign bit of the next octet.
    while start < 7 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    put_tlv(out, tag, &bytes[start..]);
}

/// Appends an unsigned value (Counter32, Gauge32, TimeTicks, Counter64) under `tag`: a leading zero octet
/// is added when the top bit is set, as BER integers are signed.
pub fn put_unsigned(out: &mut Vec<u8>, tag: u8, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count().min(7);
    let body = &bytes[skip..];
    out.push(tag);
    if body[0] & 0x80 != 0 {
        put_length(out, body.len() + 1);
        out.push(0);
    } else {
        put_length(out, body.len());
    }
    out.extend_from_slice(body);
}

/// Appends an OBJECT IDENTIFIER. OIDs with fewer than two arcs encode their one arc as `arc.0`.
pub fn put_oid(out: &mut Vec<u8>, oid: &Oid) {
    let mut content = Vec::with_capacity(oid.0.len() + 4);
    let a = oid.0.first().copied().unwrap_or(0) as u64;
    let b = oid.0.get(1).copied().unwrap_or(0) as u64;
    put_base128(&mut content, a * 40 + b);
    for arc in oid.0.iter().skip(2) {
        put_base128(&mut content, *arc as u64);
    }
    put_tlv(out, tag::OID, &content);
}

fn put_base128(out: &mut Vec<u8>, v: u64) {
    let mut groups = [0u8; 10];
    let mut n = 0;
    let mut x = v;
    loop {
        groups[n] = (x & 0x7f) as u8;
        n += 1;
        x >>= 7;
        if x == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        out.push(groups[i] | if i > 0 { 0x80 } else { 0 });
    }
}

/// Appends a value with its SNMP tag.
pub fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Integer(i) => put_integer(out, tag::INTEGER, *i),
        Value::OctetString(s) => put_tlv(out, tag::OCTET_STRING, s),
        Value::Null => put_tlv(out, tag::NULL, &[]),
        Value::Oid(o) => put_oid(out, o),
        Value::IpAddress(a) => put_tlv(out, tag::IP_ADDRESS, a),
        Value::Counter32(c) => put_unsigned(out, tag::COUNTER32, *c as u64),
        Value::Gauge32(g) => put_unsigned(out, tag::GAUGE32, *g as u64),
        Value::TimeTicks(t) => put_unsigned(out, tag::TIMETICKS, *t as u64),
        Value::Opaque(b) => put_tlv(out, tag::OPAQUE, b),
        Value::Counter64(c) => put_unsigned(out, tag::COUNTER64, *c),
        Value::NoSuchObject => put_tlv(out, tag::NO_SUCH_OBJECT, &[]),
        Value::NoSuchInstance => put_tlv(out, tag::NO_SUCH_INSTANCE, &[]),
        Value::EndOfMibView => put_tlv(out, tag::END_OF_MIB_VIEW, &[]),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Decoding

/// A cursor over BER bytes; every read either consumes one whole TLV or fails without panicking.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next tag without consuming it.
    pub fn peek_tag(&self) -> Result<u8, BerError> {
        self.buf.first().copied().ok_or(BerError::Truncated)
    }

    /// Reads one TLV: its tag and content.
    pub fn read_tlv(&mut self) -> Result<(u8, &'a [u8]), BerError> {
        let (&tag, rest) = self.buf.split_first().ok_or(BerError::Truncated)?;
        if tag & 0x1f == 0x1f {
            // High-tag-number form: nothing in SNMP uses it.
            return Err(BerError::BadValue(tag));
        }
        let (&first, mut rest) = rest.split_first().ok_or(BerError::Truncated)?;
        let len = if first < 0x80 {
            first as usize
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 {
                return Err(BerError::BadLength);
            }
            if rest.len() < n {
                return Err(BerError::Truncated);
            }
            let mut len = 0usize;
            for b in &rest[..n] {
                len = (len << 8) | *b as usize;
            }
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return Err(BerError::Truncated);
        }
        let (content, after) = rest.split_at(len);
        self.buf = after;
        Ok((tag, content))
    }

    /// Reads a TLV that must carry `expected`.
    pub fn read_expect(&mut self, expected: u8) -> Result<&'a [u8], BerError> {
        let (tag, content) = self.read_tlv()?;
        if tag != expected {
            return Err(BerError::UnexpectedTag {
                expected,
                found: tag,
            });
        }
        Ok(content)
    }

    /// Reads a constructed value of `tag` and returns a reader over its content.
    pub fn read_constructed(&mut self, tag: u8) -> Result<Reader<'a>, BerError> {
        self.read_expect(tag).map(Reader::new)
    }

    /// Reads a signed INTEGER that fits an i64.
    pub fn read_integer(&mut self) -> Result<i64, BerError> {
        decode_integer(self.read_expect(tag::INTEGER)?)
    }

    /// Reads an OCTET STRING.
    pub fn read_octets(&mut self) -> Result<&'a [u8], BerError> {
        self.read_expect(tag::OCTET_STRING)
    }

    /// Reads an OBJECT IDENTIFIER.
    pub fn read_oid(&mut self) -> Result<Oid, BerError> {
        decode_oid(self.read_expect(tag::OID)?)
    }

    /// Reads any SNMP value.
    pub fn read_value(&mut self) -> Result<Value, BerError> {
        let (t, c) = self.read_tlv()?;
        decode_value(t, c)
    }
}

/// Decodes a two's complement INTEGER body.
pub fn decode_integer(c: &[u8]) -> Result<i64, BerError> {
    if c.is_empty() || c.len() > 8 {
        return Err(BerError::BadInteger);
    }
    let mut v: i64 = if c[0] & 0x80 != 0 { -1 } else { 0 };
    for b in c {
        v = (v << 8) | *b as i64;
    }
    Ok(v)
}

/// Decodes an unsigned body (a leading zero octet allowed) that fits `bits`.
pub fn decode_unsigned(c: &[u8], bits: u32) -> Result<u64, BerError> {
    if c.is_empty() || c[0] & 0x80 != 0 {
        return Err(BerError::BadInteger);
    }
    let body = if c.len() > 1 && c[0] == 0 { &c[1..] } else { c };
    if body.len() > 8 {
        return Err(BerError::BadInteger);
    }
    let mut v: u64 = 0;
    for b in body {
        v = (v << 8) | *b as u64;
    }
    if bits < 64 && v >> bits != 0 {
        return Err(BerError::BadInteger);
    }
    Ok(v)
}

/// Decodes an OBJECT IDENTIFIER body.
pub fn decode_oid(c: &[u8]) -> Result<Oid, BerError> {
    if c.is_empty() {
        return Err(BerError::BadOid);
    }
    let mut arcs = Vec::with_capacity(c.len() + 1);
    let mut acc: u64 = 0;
    let mut in_arc = false;
    for (i, b) in c.iter().enumerate() {
        if !in_arc && *b == 0x80 {
            // A leading 0x80 octet is a non-minimal encoding (X.690 8.19.2).
            return Err(BerError::BadOid);
        }
        acc = (acc << 7) | (*b & 0x7f) as u64;
        if acc > u32::MAX as u64 * 40 + 39 {
            return Err(BerError::BadOid);
        }
        in_arc = b & 0x80 != 0;
        if !in_arc {
            if arcs.is_empty() {
                let (a, b) = match acc {
                    0..=39 => (0, acc),
                    40..=79 => (1, acc - 40),
                    _ => (2, acc - 80),
                };
                arcs.push(a as u32);
                arcs.push(u32::try_from(b).map_err(|_| BerError::BadOid)?);
            } else {
                arcs.push(u32::try_from(acc).map_err(|_| BerError::BadOid)?);
            }
            acc = 0;
        } else if i == c.len() - 1 {
            return Err(BerError::BadOid);
        }
    }
    Ok(Oid(arcs))
}

/// Decodes an SNMP value from its tag and content.
pub fn decode_value(t: u8, c: &[u8]) -> Result<Value, BerError> {
    Ok(match t {
        tag::INTEGER => Value::Integer(decode_integer(c)?),
        tag::OCTET_STRING => Value::OctetString(c.to_vec()),
        tag::NULL if c.is_empty() => Value::Null,
        tag::OID => Value::Oid(decode_oid(c)?),
        tag::IP_ADDRESS => Value::IpAddress(c.try_into().map_err(|_| BerError::BadValue(t))?),
        tag::COUNTER32 => Value::Counter32(decode_unsigned(c, 32)? as u32),
        tag::GAUGE32 => Value::Gauge32(decode_unsigned(c, 32)? as u32),
        tag::TIMETICKS => Value::TimeTicks(decode_unsigned(c, 32)? as u32),
        tag::OPAQUE => Value::Opaque(c.to_vec()),
        tag::COUNTER64 => Value::Counter64(decode_unsigned(c, 64)?),
        tag::NO_SUCH_OBJECT if c.is_empty() => Value::NoSuchObject,
        tag::NO_SUCH_INSTANCE if c.is_empty() => Value::NoSuchInstance,
        tag::END_OF_MIB_VIEW if c.is_empty() => Value::EndOfMibView,
        _ => return Err(BerError::BadValue(t)),
    })
}

#[cfg(test)]
#[path = "ber_tests.rs"]
mod tests;
