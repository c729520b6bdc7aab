//! Reading a profile nl6 did not write (a file given to `nl6 report`, a scrape target's answer in
//! `nl6 collect`): gunzip with a cap on the inflated size, a pass over the protobuf wire that counts
//! samples, frames and the memory decoding would take before anything is decoded, then checks of
//! what the reports will walk (name lengths, frames per sample, frames in all).
//!
//! Every refusal is one line naming the limit and the value found. The limits are far above real
//! profiles (a busy Go service's 30 s CPU profile has a few thousand samples of at most a few hundred
//! frames) and low enough that the worst input costs well under 256 MB and a second or two.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::Read;

use nl6_profile::proto::Profile;

/// What nl6 accepts from an untrusted profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes after gunzip (or of an uncompressed profile).
    pub inflated_bytes: u64,
    /// Memory the decoded profile would take, estimated from the wire before decoding.
    pub decoded_bytes: u64,
    /// Samples.
    pub samples: usize,
    /// Frames of one sample, inlined frames included.
    pub frames_per_sample: usize,
    /// Frames of all samples together, inlined frames included.
    pub frames_total: usize,
    /// Bytes of one function name, file name, build id or comment.
    pub name_bytes: usize,
    /// Bytes of all distinct function and mapping file names together (the reports keep copies).
    pub names_total_bytes: usize,
}

/// The limits `nl6 report`, `nl6 collect` and the console use.
pub const LIMITS: Limits = Limits {
    inflated_bytes: 64 << 20,
    decoded_bytes: 96 << 20,
    samples: 1_000_000,
    frames_per_sample: 4096,
    frames_total: 8_000_000,
    name_bytes: 16 << 10,
    names_total_bytes: 16 << 20,
};

/// Why an untrusted profile was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not a profile: bad gzip, bad protobuf, no string table.
    Malformed(String),
    /// A profile bigger than a [`Limits`] field (the message names it and the value found).
    TooLarge(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Malformed(m) => write!(f, "malformed profile: {m}"),
            ReadError::TooLarge(m) => write!(f, "profile refused: {m}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Memory a caller accounts for while a profile is read: called with each increase (inflated bytes as
/// they arrive, then the decoded estimate). An `Err` (the caller's own error) stops the read with its
/// message.
pub type Charge<'a> = &'a mut dyn FnMut(u64) -> Result<(), Refusal>;

/// A caller's refusal of a charge, whatever its type.
pub type Refusal = Box<dyn std::error::Error + Send + Sync>;

/// Decodes an untrusted profile within [`LIMITS`].
pub fn decode_untrusted(bytes: &[u8]) -> Result<Profile, ReadError> {
    decode_within(bytes, &LIMITS, &mut |_| Ok(()))
}

/// Decodes an untrusted profile within `limits`, charging memory to `charge` as it goes.
pub fn decode_within(bytes: &[u8], limits: &Limits, charge: Charge) -> Result<Profile, ReadError> {
    use prost::Message;
    if bytes.is_empty() {
        return Err(ReadError::Malformed("empty input".into()));
    }
    let inflated;
    let body = if bytes.starts_with(&[0x1f, 0x8b]) {
        inflated = gunzip(bytes, limits.inflated_bytes, charge)?;
        &inflated[..]
    } else {
        if bytes.len() as u64 > limits.inflated_bytes {
            return Err(too_large(format!(
                "{} bytes; the limit is {}",
                bytes.len(),
                mib(limits.inflated_bytes)
            )));
        }
        bytes
    };
    let estimate = scan(body, limits)?;
    charge(estimate).map_err(|e| ReadError::TooLarge(e.to_string()))?;
    let p = Profile::decode(body).map_err(|e| ReadError::Malformed(format!("protobuf: {e}")))?;
    if p.string_table.first().map(String::as_str) != Some("") {
        return Err(ReadError::Malformed("string_table[0] must be ''".into()));
    }
    check_names(&p, limits)?;
    check_frames(&p, limits)?;
    Ok(p)
}

fn too_large(m: String) -> ReadError {
    ReadError::TooLarge(m)
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// Inflates `gz`, refusing past `cap` bytes; charges each MiB as it arrives.
fn gunzip(gz: &[u8], cap: u64, charge: Charge) -> Result<Vec<u8>, ReadError> {
    const STEP: usize = 1 << 20;
    let mut decoder = flate2::read::GzDecoder::new(gz);
    // Address space for the whole cap up front: pages are only touched as bytes arrive, and the buffer
    // is never moved, so resident memory follows the inflated size (growing by doubling copied it).
    let mut out = Vec::with_capacity(cap as usize + 1);
    let mut charged = 0usize;
    loop {
        if out.len() as u64 > cap {
            return Err(too_large(format!(
                "it inflates beyond {} (nl6's limit for a decompressed profile; {} bytes compressed)",
                mib(cap),
                gz.len()
            )));
        }
        let want = (cap as usize + 1 - out.len()).min(STEP);
        if out.len() + want > charged {
            charge(STEP as u64).map_err(|e| ReadError::TooLarge(e.to_string()))?;
            charged += STEP;
        }
        let start = out.len();
        out.resize(start + want, 0);
        let n = read_full(&mut decoder, &mut out[start..])
            .map_err(|e| ReadError::Malformed(format!("gunzip: {e}")))?;
        out.truncate(start + n);
        if n < want {
            return Ok(out);
        }
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The protobuf wire, read just far enough to count (no allocation).
struct Wire<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Result<u64, ReadError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or_else(truncated)?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ReadError::Malformed("protobuf: varint too long".into()))
    }

    /// The next field: (field number, wire type, payload of a length-delimited field).
    fn field(&mut self) -> Result<(u64, u8, &'a [u8]), ReadError> {
        let key = self.varint()?;
        let wire = (key & 7) as u8;
        let payload: &'a [u8] = match wire {
            0 => {
                self.varint()?;
                &[]
            }
            1 => self.take(8)?,
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                self.take(n)?
            }
            5 => self.take(4)?,
            w => {
                return Err(ReadError::Malformed(format!(
                    "protobuf: unsupported wire type {w}"
                )))
            }
        };
        Ok((key >> 3, wire, payload))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self.i.checked_add(n).filter(|e| *e <= self.b.len());
        let end = end.ok_or_else(truncated)?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
}

fn truncated() -> ReadError {
    ReadError::Malformed("protobuf: truncated field".into())
}

/// Varints in a packed payload (each ends with a byte below 0x80).
fn packed_count(payload: &[u8]) -> u64 {
    payload.iter().filter(|b| **b < 0x80).count() as u64
}

/// How many elements of a repeated scalar a field carries (packed or not).
fn scalar_count(wire: u8, payload: &[u8]) -> u64 {
    if wire == 2 {
        packed_count(payload)
    } else {
        1
    }
}

/// Counts what decoding `body` would allocate; refuses past the sample, frame and memory limits.
/// Returns the estimated decoded size in bytes.
fn scan(body: &[u8], limits: &Limits) -> Result<u64, ReadError> {
    use nl6_profile::proto::{Function, Label, Line, Location, Mapping, Sample, ValueType};
    use std::mem::size_of;
    let mut w = Wire { b: body, i: 0 };
    let (mut bytes, mut samples) = (0u64, 0usize);
    while !w.done() {
        let (field, wire, payload) = w.field()?;
        bytes += match (field, wire) {
            (2, 2) => {
                let (frames, values, labels) = sample_counts(payload)?;
                if frames > limits.frames_per_sample as u64 {
                    return Err(too_large(format!(
                        "sample {samples} has {frames} frames; the limit is {} a sample",
                        limits.frames_per_sample
                    )));
                }
                samples += 1;
                if samples > limits.samples {
                    return Err(too_large(format!("more than {} samples", limits.samples)));
                }
                element::<Sample>()
                    + vec_bytes(frames, 8)
                    + vec_bytes(values, 8)
                    + vec_bytes(labels, size_of::<Label>() as u64)
            }
            (4, 2) => {
                let mut lw = Wire { b: payload, i: 0 };
                let mut lines = 0u64;
                while !lw.done() {
                    if lw.field()?.0 == 4 {
                        lines += 1;
                    }
                }
                element::<Location>() + vec_bytes(lines, size_of::<Line>() as u64)
            }
            (6, 2) => element::<String>() + heap_block(payload.len() as u64),
            (13, _) => 2 * 8 * scalar_count(wire, payload),
            (1 | 11, 2) => element::<ValueType>(),
            (3, 2) => element::<Mapping>(),
            (5, 2) => element::<Function>(),
            _ => 0,
        };
        if bytes > limits.decoded_bytes {
            return Err(too_large(format!(
                "decoding it would take more than {} (nl6's limit for a decoded profile)",
                mib(limits.decoded_bytes)
            )));
        }
    }
    Ok(bytes)
}

/// One element of a repeated field: twice its size, as the vector holding it may have doubled.
fn element<T>() -> u64 {
    2 * std::mem::size_of::<T>() as u64
}

/// A vector of `n` elements of `size` bytes as prost builds it (grown by doubling from 4) on the heap.
fn vec_bytes(n: u64, size: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    heap_block(n.max(4).next_power_of_two() * size)
}

/// What the allocator takes for a block of `n` bytes (a 16-byte granule with its header; 32 at least).
fn heap_block(n: u64) -> u64 {
    ((n + 8).div_ceil(16) * 16).max(32)
}

/// (location ids, values, labels) of one sample on the wire.
fn sample_counts(payload: &[u8]) -> Result<(u64, u64, u64), ReadError> {
    let mut w = Wire { b: payload, i: 0 };
    let (mut ids, mut values, mut labels) = (0, 0, 0);
    while !w.done() {
        let (field, wire, p) = w.field()?;
        match field {
            1 => ids += scalar_count(wire, p),
            2 => values += scalar_count(wire, p),
            3 => labels += 1,
            _ => {}
        }
    }
    Ok((ids, values, labels))
}

/// Refuses a function name, file name, build id or comment longer than `limits.name_bytes`.
fn check_names(p: &Profile, limits: &Limits) -> Result<(), ReadError> {
    let len = |i: i64| super::nodes::string(p, i).len();
    let over = |what: String, n: usize| {
        too_large(format!(
            "{what} is {n} bytes; the limit is {} (a function name, file name or comment)",
            limits.name_bytes
        ))
    };
    // Each string index counted once, however many functions share it.
    let mut shown: HashMap<i64, usize> = HashMap::new();
    for f in &p.function {
        shown.insert(f.name, len(f.name));
        shown.insert(f.system_name, len(f.system_name));
        for (what, i) in [
            ("name", f.name),
            ("system name", f.system_name),
            ("file name", f.filename),
        ] {
            if len(i) > limits.name_bytes {
                return Err(over(format!("function {}'s {what}", f.id), len(i)));
            }
        }
    }
    for m in &p.mapping {
        for (what, i) in [("file name", m.filename), ("build id", m.build_id)] {
            if len(i) > limits.name_bytes {
                return Err(over(format!("mapping {}'s {what}", m.id), len(i)));
            }
        }
        shown.insert(m.filename, len(m.filename));
    }
    let total: usize = shown.values().sum();
    if total > limits.names_total_bytes {
        return Err(too_large(format!(
            "its function and file names take {} MiB together; the limit is {} MiB",
            total >> 20,
            limits.names_total_bytes >> 20
        )));
    }
    for (k, &c) in p.comment.iter().enumerate() {
        if len(c) > limits.name_bytes {
            return Err(over(format!("comment {k}"), len(c)));
        }
    }
    for t in &p.sample_type {
        for i in [t.r#type, t.unit] {
            if len(i) > limits.name_bytes {
                return Err(over("a sample type".into(), len(i)));
            }
        }
    }
    Ok(())
}

/// Refuses a sample whose frames (each location's lines, inlined ones included) exceed the per-sample
/// limit, or samples whose frames together exceed the total.
fn check_frames(p: &Profile, limits: &Limits) -> Result<(), ReadError> {
    let mut lines = super::nodes::ById::for_ids(p.location.iter().map(|l| l.id));
    for l in &p.location {
        lines.insert(l.id, l.line.len().max(1));
    }
    let mut total = 0usize;
    for (k, s) in p.sample.iter().enumerate() {
        let frames: usize = s
            .location_id
            .iter()
            .map(|id| lines.get(*id).copied().unwrap_or(0))
            .fold(0usize, usize::saturating_add);
        if frames > limits.frames_per_sample {
            return Err(too_large(format!(
                "sample {k} has {frames} frames with inlined ones; the limit is {} a sample",
                limits.frames_per_sample
            )));
        }
        total += frames;
        if total > limits.frames_total {
            return Err(too_large(format!(
                "its samples have more than {} frames in all",
                limits.frames_total
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testprofile::cpu_profile;
    use prost::Message;
    use std::io::Write;

    fn gz(raw: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(raw).unwrap();
        e.finish().unwrap()
    }

    fn small() -> Limits {
        Limits {
            inflated_bytes: 4 << 20,
            decoded_bytes: 8 << 20,
            samples: 10,
            frames_per_sample: 8,
            frames_total: 30,
            name_bytes: 16,
            names_total_bytes: 40,
        }
    }

    /// A CPU profile of `samples` copies of a stack of `frames` frames, all of function `a`.
    fn repeated(samples: usize, frames: usize) -> Vec<u8> {
        let stack = vec!["a"; frames];
        let list: Vec<(&[&str], i64)> = (0..samples).map(|_| (&stack[..], 1)).collect();
        cpu_profile(&list).encode_to_vec()
    }

    fn refusal(bytes: &[u8], limits: &Limits) -> String {
        match decode_within(bytes, limits, &mut |_| Ok(())) {
            Err(ReadError::TooLarge(m)) => m,
            other => panic!("not refused as too large: {other:?}"),
        }
    }

    #[test]
    fn a_good_profile_decodes_compressed_or_not() {
        let p = cpu_profile(&[(&["a", "main"], 3), (&["b", "main"], 1)]);
        let raw = p.encode_to_vec();
        assert_eq!(
            decode_within(&raw, &small(), &mut |_| Ok(())),
            Ok(p.clone())
        );
        assert_eq!(decode_untrusted(&gz(&raw)), Ok(p));
        assert!(matches!(
            decode_untrusted(b""),
            Err(ReadError::Malformed(_))
        ));
        assert!(matches!(
            decode_untrusted(&[0x1f, 0x8b, 1, 2]),
            Err(ReadError::Malformed(_))
        ));
    }

    #[test]
    fn each_limit_is_named() {
        let l = small();
        let inflated = gz(&vec![0u8; 5 << 20]);
        assert!(refusal(&inflated, &l).contains("inflates beyond 4 MiB"));
        let deep = repeated(1, 9);
        assert!(refusal(&deep, &l).contains("sample 0 has 9 frames"));
        let many = repeated(11, 1);
        assert!(refusal(&many, &l).contains("more than 10 samples"));
        let total = repeated(4, 8);
        assert!(refusal(&total, &l).contains("more than 30 frames"));
        let long = cpu_profile(&[(&["a_function_name_of_17"], 1)]).encode_to_vec();
        assert!(refusal(&long, &l).contains("function 1's name is 21 bytes"));
        let names: Vec<String> = (0..5).map(|i| format!("function_{i}")).collect();
        let stack: Vec<&str> = names.iter().map(String::as_str).collect();
        let wide = cpu_profile(&[(&stack, 1)]).encode_to_vec();
        let m = refusal(
            &wide,
            &Limits {
                names_total_bytes: 49,
                ..l
            },
        );
        assert!(m.contains("function and file names take"), "{m}");
        let fits = Limits {
            names_total_bytes: 50,
            ..l
        };
        assert!(decode_within(&wide, &fits, &mut |_| Ok(())).is_ok());
        let tight = Limits {
            decoded_bytes: 100,
            ..l
        };
        let m = refusal(&repeated(3, 1), &tight);
        assert!(m.contains("decoding it would take more than"), "{m}");
    }

    #[test]
    fn memory_is_charged_and_a_refused_charge_stops_the_read() {
        let raw = cpu_profile(&[(&["a", "main"], 3)]).encode_to_vec();
        let mut charged = 0;
        decode_within(&gz(&raw), &small(), &mut |n| {
            charged += n;
            Ok(())
        })
        .unwrap();
        assert!(charged >= 1 << 20, "{charged}");
        let e = decode_within(&gz(&raw), &small(), &mut |_| Err("budget spent".into()));
        assert_eq!(e, Err(ReadError::TooLarge("budget spent".into())));
    }
}
