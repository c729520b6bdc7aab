//! The hostile profiles, generated rather than stored: a 1.7 KB profile
//! whose one 1 MiB function name fills 200 samples × 200 frames, a 1 KB profile with one
//! 1 000 000-frame sample, a 1 MB gzip bomb and a 520 KB bomb behind a valid profile prefix.
//!
//! Shared by `tests/harden/profiles.rs` and `examples/hostile_profiles.rs` (which writes them to files
//! for `/usr/bin/time -v nl6 report …`).
#![allow(dead_code)]

use std::io::Write;

use nl6_profile::proto::{Function, Line, Location, Profile, Sample, ValueType};
use prost::Message;

pub fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(raw).unwrap();
    gz.finish().unwrap()
}

/// A CPU-shaped profile with one function (`name`) at location 1, and `samples` stacks of `frames`
/// copies of that location.
pub fn one_function_profile(name: String, samples: usize, frames: usize) -> Profile {
    Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        string_table: vec!["".into(), "cpu".into(), "nanoseconds".into(), name],
        function: vec![Function {
            id: 1,
            name: 3,
            system_name: 3,
            filename: 0,
            start_line: 0,
        }],
        location: vec![Location {
            id: 1,
            line: vec![Line {
                function_id: 1,
                line: 1,
                column: 0,
            }],
            ..Default::default()
        }],
        sample: (0..samples)
            .map(|_| Sample {
                location_id: vec![1; frames],
                value: vec![10_000_000],
                label: vec![],
            })
            .collect(),
        ..Default::default()
    }
}

/// A gzip stream of `prefix` followed by `pattern` repeated to about `inflated` bytes, built without
/// compressing all of it: after a sync flush, every further MiB of the pattern compresses to the same
/// bytes, so that block is repeated. The stream has no trailer (a decoder stops at its limit first).
pub fn bomb(prefix: &[u8], pattern: &[u8], inflated: usize) -> Vec<u8> {
    const MIB: usize = 1 << 20;
    let chunk: Vec<u8> = pattern.iter().copied().cycle().take(MIB).collect();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(prefix).unwrap();
    for _ in 0..2 {
        enc.write_all(&chunk).unwrap();
        enc.flush().unwrap();
    }
    let head_len = enc.get_ref().len();
    enc.write_all(&chunk).unwrap();
    enc.flush().unwrap();
    let block = enc.get_ref()[head_len..].to_vec();
    enc.write_all(&chunk).unwrap();
    enc.flush().unwrap();
    assert_eq!(
        &enc.get_ref()[head_len + block.len()..],
        &block[..],
        "steady state"
    );
    let mut out = enc.get_ref()[..head_len].to_vec();
    for _ in 0..inflated / MIB {
        out.extend_from_slice(&block);
    }
    out
}

/// The four hostile inputs of the issue, by name.
pub fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    let big_name = one_function_profile("A".repeat(1 << 20), 200, 200);
    let deep = one_function_profile("main.f".into(), 1, 1_000_000);
    let valid = one_function_profile("main.f".into(), 3, 2).encode_to_vec();
    // `0x38 0x00` is field 7 (drop_frames) = 0: valid protobuf however often it repeats.
    let fixtures = vec![
        ("1 MiB name × 200 × 200", gzip(&big_name.encode_to_vec())),
        ("1 000 000-frame sample", gzip(&deep.encode_to_vec())),
        ("1 MB gzip bomb", bomb(&[], &[0], 1000 << 20)),
        (
            "520 KB bomb after a valid profile",
            bomb(&valid, &[0x38, 0x00], 520 << 20),
        ),
    ];
    let sizes: Vec<usize> = fixtures.iter().map(|(_, b)| b.len()).collect();
    assert!(sizes[0] < 4 << 10 && sizes[1] < 4 << 10, "{sizes:?}");
    assert!(sizes[2] < 2 << 20 && sizes[3] < 1 << 20, "{sizes:?}");
    fixtures
}

/// A CPU-shaped profile over `names` (function i at location i+1) with the given stacks of location
/// indices (0-based, leaf first), each sample worth 10ms.
pub fn profile_of(names: Vec<String>, stacks: Vec<Vec<u64>>) -> Profile {
    let mut string_table: Vec<String> = vec!["".into(), "cpu".into(), "nanoseconds".into()];
    let first = string_table.len() as i64;
    string_table.extend(names);
    let n = string_table.len() as i64 - first;
    Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        function: (0..n)
            .map(|i| Function {
                id: i as u64 + 1,
                name: first + i,
                system_name: first + i,
                filename: 0,
                start_line: 0,
            })
            .collect(),
        location: (0..n)
            .map(|i| Location {
                id: i as u64 + 1,
                line: vec![Line {
                    function_id: i as u64 + 1,
                    line: 1,
                    column: 0,
                }],
                ..Default::default()
            })
            .collect(),
        sample: stacks
            .into_iter()
            .map(|s| Sample {
                location_id: s.into_iter().map(|i| i + 1).collect(),
                value: vec![10_000_000],
                label: vec![],
            })
            .collect(),
        string_table,
        ..Default::default()
    }
}

/// Profiles just inside nl6's limits, shaped to cost the most: long distinct names on deep stacks
/// (the flame graph refused, the top table printed), a flame graph at its size limit, and as many
/// distinct samples as the decoded-size limit lets through.
pub fn at_limits() -> Vec<(&'static str, Vec<u8>)> {
    let long = |i: usize, len: usize| format!("{i:08}{}", "x".repeat(len - 8));
    let deep_names: Vec<String> = (0..1000).map(|i| long(i, 16 << 10)).collect();
    let deep = profile_of(deep_names, vec![(0..4096).map(|i| i % 1000).collect()]);
    let wide_names: Vec<String> = (0..2000).map(|i| long(i, 8000)).collect();
    let wide = profile_of(wide_names, vec![(0..2000).collect()]);
    let many_names: Vec<String> = (0..4096).map(|i| format!("pkg.function{i}")).collect();
    let many_stacks: Vec<Vec<u64>> = (0..350_000u64)
        .map(|s| {
            (0..8)
                .map(|k| match k {
                    0 => s % 4096,
                    1 => s / 4096,
                    k => (s + k * 613) % 4096,
                })
                .collect()
        })
        .collect();
    let many = profile_of(many_names, many_stacks);
    vec![
        (
            "1000 16 KiB names on a 4096-frame stack",
            gzip(&deep.encode_to_vec()),
        ),
        ("2000 8 KB names on one stack", gzip(&wide.encode_to_vec())),
        (
            "350 000 distinct 8-frame samples",
            gzip(&many.encode_to_vec()),
        ),
    ]
}
