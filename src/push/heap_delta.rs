//! The push's heap delta: turns an encoded cumulative heap profile (Go's shape: `alloc_objects`,
//! `alloc_space`, `inuse_objects`, `inuse_space`) into the one the server wants, with `alloc_*` as deltas
//! since the previous upload and `inuse_*` absolute, as godeltaprof does.
//!
//! The server never computes heap deltas for `/ingest` pprof (`__delta__="false"`), so a cumulative
//! `alloc_*` would be summed over every upload and grow without bound. Working on the encoded profile keeps
//! this independent of the engine's encoder internals: samples are matched by their stack (location
//! addresses and function names), the previous upload's `alloc_*` subtracted, and samples left all-zero
//! dropped. Pure bytes in, bytes out: no clock, no I/O.
#![forbid(unsafe_code)]

use prost::Message;
use std::collections::HashMap;
use std::io::Write;

type StackKey = Vec<(u64, String)>;

/// The previous upload's cumulative `alloc_*` values, by stack.
#[derive(Debug, Default)]
pub struct HeapDelta {
    previous: HashMap<StackKey, [i64; 2]>,
}

impl HeapDelta {
    /// An empty state: the first [`HeapDelta::apply`] returns allocations since process start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rewrites `heap_gz` (gzip'd or plain pprof) with `alloc_*` as deltas since the previous call and
    /// remembers its cumulative values. Returns gzip'd pprof.
    pub fn apply(&mut self, heap_gz: &[u8]) -> Result<Vec<u8>, String> {
        let mut profile =
            crate::profiling::proto::decode(heap_gz).map_err(|e| format!("heap delta: {e}"))?;
        let type_index = |name: &str| {
            profile.sample_type.iter().position(|vt| {
                profile
                    .string_table
                    .get(vt.r#type as usize)
                    .map(String::as_str)
                    == Some(name)
            })
        };
        let (Some(objects), Some(space)) = (type_index("alloc_objects"), type_index("alloc_space"))
        else {
            return Err("heap delta: profile has no alloc_objects/alloc_space sample types".into());
        };
        let addresses: HashMap<u64, (u64, String)> = profile
            .location
            .iter()
            .map(|loc| {
                let name = loc
                    .line
                    .first()
                    .and_then(|l| profile.function.iter().find(|f| f.id == l.function_id))
                    .and_then(|f| profile.string_table.get(f.name as usize).cloned())
                    .unwrap_or_default();
                (loc.id, (loc.address, name))
            })
            .collect();
        let key_of = |location_ids: &[u64]| -> StackKey {
            location_ids
                .iter()
                .map(|id| addresses.get(id).cloned().unwrap_or((*id, String::new())))
                .collect()
        };

        // Merge samples that share a stack so each key has exactly one cumulative value.
        let mut first_by_key: HashMap<StackKey, usize> = HashMap::new();
        let mut merged: Vec<crate::profiling::proto::Sample> =
            Vec::with_capacity(profile.sample.len());
        let mut keys: Vec<StackKey> = Vec::with_capacity(profile.sample.len());
        for sample in std::mem::take(&mut profile.sample) {
            let key = key_of(&sample.location_id);
            match first_by_key.get(&key) {
                Some(&i) => {
                    for (acc, v) in merged[i].value.iter_mut().zip(&sample.value) {
                        *acc += v;
                    }
                }
                None => {
                    first_by_key.insert(key.clone(), merged.len());
                    merged.push(sample);
                    keys.push(key);
                }
            }
        }

        let mut current = HashMap::with_capacity(merged.len());
        let mut out = Vec::with_capacity(merged.len());
        for (mut sample, key) in merged.into_iter().zip(keys) {
            let cumulative = [
                sample.value.get(objects).copied().unwrap_or(0),
                sample.value.get(space).copied().unwrap_or(0),
            ];
            let before = self.previous.get(&key).copied().unwrap_or([0, 0]);
            if let Some(v) = sample.value.get_mut(objects) {
                *v = (cumulative[0] - before[0]).max(0);
            }
            if let Some(v) = sample.value.get_mut(space) {
                *v = (cumulative[1] - before[1]).max(0);
            }
            current.insert(key, cumulative);
            if sample.value.iter().any(|v| *v != 0) {
                out.push(sample);
            }
        }
        self.previous = current;
        profile.sample = out;
        gzip(&profile.encode_to_vec())
    }
}

fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data)
        .and_then(|_| enc.finish())
        .map_err(|e| format!("heap delta: gzip: {e}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profiling::proto::{Function, Line, Location, Profile, Sample, ValueType};

    /// A Go-shaped heap profile: one sample per `(leaf address, [alloc_objects, alloc_space,
    /// inuse_objects, inuse_space])`.
    pub(crate) fn heap_profile(samples: &[(u64, [i64; 4])]) -> Vec<u8> {
        let strings: Vec<String> = [
            "",
            "alloc_objects",
            "count",
            "alloc_space",
            "bytes",
            "inuse_objects",
            "inuse_space",
            "space",
            "f1",
            "f2",
            "f3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let vt = |t: i64, u: i64| ValueType { r#type: t, unit: u };
        let profile = Profile {
            sample_type: vec![vt(1, 2), vt(3, 4), vt(5, 2), vt(6, 4)],
            sample: samples
                .iter()
                .map(|(addr, v)| Sample {
                    location_id: vec![*addr, 100],
                    value: v.to_vec(),
                    label: vec![],
                })
                .collect(),
            location: [1u64, 2, 3, 100]
                .iter()
                .map(|&id| Location {
                    id,
                    address: 0x1000 + id,
                    line: vec![Line {
                        function_id: id.min(3),
                        line: 0,
                        column: 0,
                    }],
                    ..Default::default()
                })
                .collect(),
            function: (1..=3)
                .map(|id| Function {
                    id,
                    name: 7 + id as i64,
                    ..Default::default()
                })
                .collect(),
            string_table: strings,
            period_type: Some(vt(7, 4)),
            period: 524288,
            time_nanos: 1,
            ..Default::default()
        };
        gzip(&profile.encode_to_vec()).unwrap()
    }

    pub(crate) fn values(gz: &[u8]) -> Vec<(u64, Vec<i64>)> {
        let p = crate::profiling::proto::decode(gz).unwrap();
        p.sample
            .iter()
            .map(|s| (s.location_id[0], s.value.clone()))
            .collect()
    }

    #[test]
    fn first_upload_is_cumulative_then_alloc_is_delta_and_inuse_absolute() {
        let mut d = HeapDelta::new();
        let first = d
            .apply(&heap_profile(&[
                (1, [10, 1000, 4, 400]),
                (2, [5, 50, 5, 50]),
            ]))
            .unwrap();
        assert_eq!(
            values(&first),
            vec![(1, vec![10, 1000, 4, 400]), (2, vec![5, 50, 5, 50])]
        );

        let second = d
            .apply(&heap_profile(&[
                (1, [12, 1200, 3, 300]),
                (2, [5, 50, 0, 0]),
                (3, [1, 8, 1, 8]),
            ]))
            .unwrap();
        // site 1: 2 new allocations, 3 live; site 2: nothing new and nothing live → dropped; site 3 new.
        assert_eq!(
            values(&second),
            vec![(1, vec![2, 200, 3, 300]), (3, vec![1, 8, 1, 8])]
        );

        let third = d.apply(&heap_profile(&[(1, [12, 1200, 3, 300])])).unwrap();
        assert_eq!(values(&third), vec![(1, vec![0, 0, 3, 300])]);
    }

    #[test]
    fn samples_sharing_a_stack_are_merged() {
        let mut d = HeapDelta::new();
        let out = d
            .apply(&heap_profile(&[(1, [1, 10, 1, 10]), (1, [2, 20, 0, 0])]))
            .unwrap();
        assert_eq!(values(&out), vec![(1, vec![3, 30, 1, 10])]);
    }

    #[test]
    fn a_profile_without_alloc_types_is_an_error() {
        let p = Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            string_table: vec!["".into(), "goroutine".into(), "count".into()],
            ..Default::default()
        };
        let err = HeapDelta::new().apply(&p.encode_to_vec()).unwrap_err();
        assert!(err.contains("alloc_objects"), "{err}");
    }
}
