//! Building one pprof `Profile`: the string table, one Mapping per executable mapping of the process (the
//! executable first, then shared objects and the vDSO, as Go's runtime/pprof), Locations keyed by address
//! and pointing at their Mapping, Functions keyed by (name, file), samples with labels, and gzip.
//!
//! What it owns: id assignment (every id nonzero and unique, `string_table[0] == ""`) and the rule for
//! return addresses: a Location stores the real address, but a return address is symbolized at `addr - 1`
//! so the call instruction, not the one after it, names the line (pprof does the same).
//!
//! What it never does: decide a profile's shape (sample types, periods, which labels): that is
//! [`super::encode`]'s job. Symbol lookups go through [`super::symbols::Symbolizer`]; without one (no
//! readable `/proc/self/maps`) locations carry bare addresses and the profile has no Mapping.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::proto;
use super::symbols::{Resolved, Symbolizer};

/// Whether a stack's first address is the interrupted instruction (CPU and thread samples) or every
/// address is a return address (allocation and spawn sites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    /// `stack[0]` is the exact instruction; the rest are return addresses.
    ExactLeaf,
    /// Every entry is a return address.
    AllReturns,
}

/// A sample label: a string value or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelValue {
    Str(String),
    Num(i64),
}

/// Accumulates one profile.
pub struct ProfileBuilder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(i64, i64), u64>,
    locations: Vec<proto::Location>,
    /// Keyed by (address, is return, inlined frames left out).
    location_ids: HashMap<(u64, bool, usize), u64>,
    samples: Vec<proto::Sample>,
    sample_types: Vec<proto::ValueType>,
    period_type: Option<proto::ValueType>,
    period: i64,
    default_sample_type: i64,
    time_nanos: i64,
    duration_nanos: i64,
    /// Free-form notes (`go tool pprof -comments` shows them): what the profile is missing and why.
    comments: Vec<i64>,
    symbolizer: Option<&'static Symbolizer>,
    /// The process's executable mappings (ids 1, 2, …), read from the symbolizer on first need.
    mappings: Option<Vec<proto::Mapping>>,
}

impl ProfileBuilder {
    /// A profile with these `(type, unit)` sample types, symbolized with the process symbolizer.
    pub fn new(sample_types: &[(&str, &str)]) -> ProfileBuilder {
        Self::with_symbolizer(sample_types, Symbolizer::global())
    }

    /// Same, with an explicit symbolizer (`None`: bare addresses).
    pub fn with_symbolizer(
        sample_types: &[(&str, &str)],
        symbolizer: Option<&'static Symbolizer>,
    ) -> ProfileBuilder {
        let mut b = ProfileBuilder {
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            samples: Vec::new(),
            sample_types: Vec::new(),
            period_type: None,
            period: 0,
            default_sample_type: 0,
            time_nanos: unix_nanos(SystemTime::now()),
            duration_nanos: 0,
            comments: Vec::new(),
            symbolizer,
            mappings: None,
        };
        b.sample_types = sample_types
            .iter()
            .map(|(t, u)| b.value_type(t, u))
            .collect();
        b
    }

    /// The Mapping messages, read from the symbolizer the first time they are needed.
    fn mappings(&mut self) -> &mut Vec<proto::Mapping> {
        if self.mappings.is_none() {
            let infos = self.symbolizer.map(|s| s.mappings()).unwrap_or_default();
            let list = infos
                .iter()
                .enumerate()
                .map(|(i, m)| proto::Mapping {
                    id: i as u64 + 1,
                    memory_start: m.start,
                    memory_limit: m.limit,
                    file_offset: m.file_offset,
                    filename: self.string(&m.filename),
                    build_id: self.string(&m.build_id),
                    has_functions: m.has_functions,
                    ..Default::default()
                })
                .collect();
            self.mappings = Some(list);
        }
        self.mappings.get_or_insert_with(Vec::new)
    }

    /// Interns a string; `""` is always 0.
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, t: &str, u: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(t),
            unit: self.string(u),
        }
    }

    /// Sets the period type and period.
    pub fn period(&mut self, ty: &str, unit: &str, period: i64) -> &mut Self {
        self.period_type = Some(self.value_type(ty, unit));
        self.period = period;
        self
    }

    /// Sets the default sample type by name (must be one of the sample types' names).
    pub fn default_sample_type(&mut self, ty: &str) -> &mut Self {
        self.default_sample_type = self.string(ty);
        self
    }

    /// Sets `time_nanos` (defaults to when the builder was made).
    pub fn time(&mut self, at: SystemTime) -> &mut Self {
        self.time_nanos = unix_nanos(at);
        self
    }

    /// Sets `duration_nanos` (omitted when zero, as Go does for non-CPU profiles).
    pub fn duration(&mut self, d: Duration) -> &mut Self {
        self.duration_nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        self
    }

    /// Adds a comment (pprof's `comment` field).
    pub fn comment(&mut self, text: &str) -> &mut Self {
        let id = self.string(text);
        self.comments.push(id);
        self
    }

    /// What the symbolizer knows about a stack entry (looked up at `addr - 1` for return addresses).
    pub fn resolve(&self, addr: u64, is_return: bool) -> Option<std::sync::Arc<Resolved>> {
        let probe = if is_return {
            addr.saturating_sub(1)
        } else {
            addr
        };
        self.symbolizer?.resolve(probe)
    }

    /// The Function id for (name, file); `system_name` is the symbol as the binary spells it.
    fn function(&mut self, name: &str, system_name: &str, file: &str) -> u64 {
        let key = (self.string(name), self.string(file));
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let system_name = if system_name.is_empty() {
            key.0
        } else {
            self.string(system_name)
        };
        let id = self.functions.len() as u64 + 1;
        self.functions.push(proto::Function {
            id,
            name: key.0,
            system_name,
            filename: key.1,
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The Location id for a stack entry whose `skip` innermost inlined frames are left out (the
    /// allocator's, inlined into the allocation site); the function the symbol table names always stays.
    pub fn location_without(&mut self, addr: u64, is_return: bool, skip: usize) -> u64 {
        if let Some(&id) = self.location_ids.get(&(addr, is_return, skip)) {
            return id;
        }
        let mut lines = Vec::new();
        let (mut file_known, mut line_known, mut inlined) = (false, false, false);
        if let Some(r) = self.resolve(addr, is_return) {
            let skip = skip.min(r.frames.len() - 1);
            inlined = r.frames.len() - skip > 1;
            for f in &r.frames[skip..] {
                let file = f.file.as_deref().unwrap_or("");
                file_known |= !file.is_empty();
                line_known |= f.line != 0;
                let function_id = self.function(&f.name, &f.system_name, file);
                lines.push(proto::Line {
                    function_id,
                    line: i64::from(f.line),
                    column: 0,
                });
            }
        }
        let id = self.locations.len() as u64 + 1;
        let mapping = self
            .mappings()
            .iter_mut()
            .find(|m| m.memory_start <= addr && addr < m.memory_limit);
        let mapping_id = match mapping {
            Some(m) => {
                m.has_filenames |= file_known;
                m.has_line_numbers |= line_known;
                m.has_inline_frames |= inlined;
                m.id
            }
            None => 0,
        };
        self.locations.push(proto::Location {
            id,
            mapping_id,
            address: addr,
            line: lines,
            is_folded: false,
        });
        self.location_ids.insert((addr, is_return, skip), id);
        id
    }

    /// A Location with no address standing for a named pseudo-function (e.g. lost samples).
    pub fn synthetic_location(&mut self, name: &str) -> u64 {
        let function_id = self.function(name, "", "");
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![proto::Line {
                function_id,
                line: 0,
                column: 0,
            }],
            is_folded: false,
        });
        id
    }

    /// Adds a sample over Location ids already made.
    pub fn sample_at(
        &mut self,
        location_id: Vec<u64>,
        values: Vec<i64>,
        labels: &[(&str, LabelValue)],
    ) {
        let label = self.labels(labels);
        self.samples.push(proto::Sample {
            location_id,
            value: values,
            label,
        });
    }

    fn labels(&mut self, labels: &[(&str, LabelValue)]) -> Vec<proto::Label> {
        labels
            .iter()
            .filter_map(|(k, v)| {
                let key = self.string(k);
                match v {
                    LabelValue::Str(s) if s.is_empty() => None,
                    LabelValue::Str(s) => Some(proto::Label {
                        key,
                        str: self.string(s),
                        num: 0,
                        num_unit: 0,
                    }),
                    LabelValue::Num(n) => Some(proto::Label {
                        key,
                        str: 0,
                        num: *n,
                        num_unit: 0,
                    }),
                }
            })
            .collect()
    }

    /// Adds a sample: `stack` leaf first, one value per sample type, labels as `(key, value)`.
    pub fn sample(
        &mut self,
        stack: &[u64],
        leaf: LeafKind,
        values: Vec<i64>,
        labels: &[(&str, LabelValue)],
    ) {
        self.sample_without(stack, leaf, 0, values, labels);
    }

    /// [`Self::sample`] with the leaf's `leaf_skip` innermost inlined frames left out.
    pub fn sample_without(
        &mut self,
        stack: &[u64],
        leaf: LeafKind,
        leaf_skip: usize,
        values: Vec<i64>,
        labels: &[(&str, LabelValue)],
    ) {
        let location_id = stack
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let skip = if i == 0 { leaf_skip } else { 0 };
                self.location_without(a, !(i == 0 && leaf == LeafKind::ExactLeaf), skip)
            })
            .collect();
        let label = self.labels(labels);
        self.samples.push(proto::Sample {
            location_id,
            value: values,
            label,
        });
    }

    /// The finished profile message, with a comment for each thing the engine cannot see in this
    /// executable ([`super::sight`]).
    pub fn build(mut self) -> proto::Profile {
        let mapping = std::mem::take(self.mappings());
        super::sight::tell_once();
        for s in super::sight::blind_spots() {
            self.comment(&format!("nl6-profile: {s}"));
        }
        proto::Profile {
            sample_type: self.sample_types,
            sample: self.samples,
            mapping,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            time_nanos: self.time_nanos,
            duration_nanos: self.duration_nanos,
            period_type: self.period_type,
            period: self.period,
            default_sample_type: self.default_sample_type,
            comment: self.comments,
            ..Default::default()
        }
    }

    /// The finished profile, protobuf-encoded and gzip'd at the fastest level (Go uses BestSpeed).
    pub fn gzip(self) -> Vec<u8> {
        gzip_profile(&self.build())
    }
}

/// Encodes and gzips a profile message.
pub fn gzip_profile(p: &proto::Profile) -> Vec<u8> {
    use prost::Message;
    let raw = p.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 3 + 64),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    gz.write_all(&raw).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn builder_leaf() -> u64 {
        std::hint::black_box(builder_leaf as *const () as u64)
    }

    #[test]
    fn string_table_starts_empty_and_dedups() {
        let mut b = ProfileBuilder::with_symbolizer(&[("samples", "count")], None);
        let a = b.string("alpha");
        assert_eq!(b.string("alpha"), a);
        assert_eq!(b.string(""), 0);
        let c = b.string("beta");
        assert_ne!(a, c);
        let p = b.build();
        assert_eq!(p.string_table[0], "");
        let mut seen = std::collections::HashSet::new();
        assert!(
            p.string_table.iter().all(|s| seen.insert(s.clone())),
            "duplicate strings: {:?}",
            p.string_table
        );
    }

    #[test]
    fn ids_are_nonzero_unique_and_functions_dedup() {
        let leaf = builder_leaf();
        let mut b = ProfileBuilder::new(&[("samples", "count")]);
        b.sample(
            &[leaf + 1, leaf + 2],
            LeafKind::ExactLeaf,
            vec![1],
            &[("subsystem", LabelValue::Str("snmp".into()))],
        );
        b.sample(
            &[leaf + 2, leaf + 3],
            LeafKind::AllReturns,
            vec![2],
            &[("bytes", LabelValue::Num(64))],
        );
        let p = b.build();
        let loc_ids: Vec<u64> = p.location.iter().map(|l| l.id).collect();
        assert!(loc_ids.iter().all(|&i| i != 0));
        assert_eq!(
            loc_ids.len(),
            loc_ids
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len()
        );
        // leaf+2 appears as an exact leaf? No: once as a return address in both samples -> one location.
        assert_eq!(p.location.len(), 3);
        assert_eq!(
            p.function.len(),
            1,
            "all addresses are inside one function: {:?}",
            p.function
        );
        assert!(p.function.iter().all(|f| f.id != 0));
        let name = &p.string_table[p.function[0].name as usize];
        assert!(name.ends_with("builder::tests::builder_leaf"), "{name}");
        assert!(!p.mapping.is_empty());
        assert!(p.mapping[0].has_functions);
        assert!(
            p.location
                .iter()
                .all(|l| l.mapping_id == 1 && !l.line.is_empty()),
            "the test binary's own code is in the first mapping"
        );
        assert_eq!(
            p.sample[0].label[0].str,
            p.string_table.iter().position(|s| s == "snmp").unwrap() as i64
        );
        assert_eq!(p.sample[1].label[0].num, 64);
    }

    #[test]
    fn return_addresses_are_looked_up_one_byte_earlier() {
        let leaf = builder_leaf();
        let b = ProfileBuilder::new(&[("samples", "count")]);
        // The entry address as a return address names whatever precedes the function, never the function.
        let before = b
            .resolve(leaf, true)
            .map(|r| r.frames.last().unwrap().name.clone());
        assert!(!before.unwrap_or_default().ends_with("builder_leaf"));
        let exact = b.resolve(leaf, false).unwrap();
        assert!(exact.frames.last().unwrap().name.ends_with("builder_leaf"));
    }

    #[test]
    fn gzip_round_trips() {
        let mut b = ProfileBuilder::with_symbolizer(&[("samples", "count")], None);
        b.period("cpu", "nanoseconds", 10_000_000)
            .duration(Duration::from_secs(1));
        b.sample(&[0x1000], LeafKind::ExactLeaf, vec![3], &[]);
        let bytes = b.gzip();
        let p = proto::decode(&bytes).unwrap();
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.sample[0].value, vec![3]);
        assert_eq!(p.duration_nanos, 1_000_000_000);
        assert!(p.mapping.is_empty());
    }
}
