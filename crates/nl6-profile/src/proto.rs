//! The pprof wire format: `perftools.profiles.Profile` from google/pprof's `profile.proto`, written out as
//! prost messages by hand (derive only, no protoc, no build script).
//!
//! Field numbers and types follow profile.proto exactly; `go tool pprof` and Pyroscope decode what these
//! encode. Building a profile (string table, ids) is the crate-private `builder`'s job; this module holds
//! only the types and a bounded decoder, public for programs that read profiles back (nl6 merges, checks
//! and reports them). The types derive `prost::Message`, so the prost version is part of this API.
#![forbid(unsafe_code)]

/// A whole profile. `string_table[0]` must be `""`.
// Fields: google/pprof's proto/profile.proto, message Profile.
#[allow(missing_docs)]
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
    #[prost(int64, tag = "15")]
    pub doc_url: i64,
}

/// A (type, unit) pair, both string-table indices.
// Fields: google/pprof's proto/profile.proto, message ValueType.
#[allow(missing_docs)]
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack (leaf first) with one value per sample type and its labels.
// Fields: google/pprof's proto/profile.proto, message Sample.
#[allow(missing_docs)]
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A string label (`str` set) or a numeric one (`num`, optional `num_unit`).
// Fields: google/pprof's proto/profile.proto, message Label.
#[allow(missing_docs)]
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A mapped object (the main binary).
// Fields: google/pprof's proto/profile.proto, message Mapping.
#[allow(missing_docs)]
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// An instruction address and the (possibly inlined) source lines it stands for.
// Fields: google/pprof's proto/profile.proto, message Location.
#[allow(missing_docs)]
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and line; for inlined frames the innermost comes first.
// Fields: google/pprof's proto/profile.proto, message Line.
#[allow(missing_docs)]
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function: names and file are string-table indices.
// Fields: google/pprof's proto/profile.proto, message Function.
#[allow(missing_docs)]
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// The most bytes [`decode`] inflates a gzip'd profile to (or accepts uncompressed): far above any
/// profile this engine writes (its largest, a goroutine profile of 10 000 threads, is a few MiB).
pub const MAX_INFLATED_BYTES: u64 = 64 << 20;

/// Decodes a profile, gunzipping it first when it starts with the gzip magic (as google/pprof does), at
/// most [`MAX_INFLATED_BYTES`] of it: see [`decode_bounded`].
pub fn decode(bytes: &[u8]) -> Result<Profile, DecodeError> {
    decode_bounded(bytes, MAX_INFLATED_BYTES)
}

/// [`decode`] with the bound as a parameter: a profile larger than `max_inflated` bytes after gunzip
/// (or as given, uncompressed) is refused before prost sees it, and no more than `max_inflated + 1`
/// bytes are ever inflated. (Profiles from outside the process need more checks than size: nl6's
/// `report::limits` also counts samples and frames on the wire.)
pub fn decode_bounded(bytes: &[u8], max_inflated: u64) -> Result<Profile, DecodeError> {
    use prost::Message;
    use std::io::Read;
    if bytes.is_empty() {
        return Err(DecodeError("empty input".into()));
    }
    let too_large = |what: &str| {
        DecodeError(format!(
            "{what} exceeds the limit of {max_inflated} bytes (decode_bounded)"
        ))
    };
    let raw;
    let body = if bytes.len() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(max_inflated.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| DecodeError(format!("gunzip: {e}")))?;
        if out.len() as u64 > max_inflated {
            return Err(too_large("the gunzipped profile"));
        }
        raw = out;
        &raw[..]
    } else if bytes.len() as u64 > max_inflated {
        return Err(too_large("the profile"));
    } else {
        bytes
    };
    let p = Profile::decode(body).map_err(|e| DecodeError(format!("protobuf: {e}")))?;
    if p.string_table.first().map(String::as_str) != Some("") {
        return Err(DecodeError("string_table[0] must be ''".into()));
    }
    Ok(p)
}

/// Why [`decode`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed profile: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}
