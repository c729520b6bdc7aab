//! Hand-built profiles for the report tests: Go-shaped CPU (`samples/count`, `cpu/nanoseconds`, 10ms
//! period) and heap (`alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`) profiles from
//! (stack, value) pairs, stacks leaf first.
#![forbid(unsafe_code)]

use nl6_profile::proto::{Function, Line, Location, Profile, Sample, ValueType};

/// A profile builder interning strings and one location per function name.
pub struct Synth {
    pub p: Profile,
}

impl Synth {
    pub fn new(types: &[(&str, &str)]) -> Synth {
        let mut s = Synth {
            p: Profile {
                string_table: vec![String::new()],
                ..Default::default()
            },
        };
        for (t, u) in types {
            let vt = ValueType {
                r#type: s.intern(t),
                unit: s.intern(u),
            };
            s.p.sample_type.push(vt);
        }
        s
    }

    pub fn intern(&mut self, text: &str) -> i64 {
        if let Some(i) = self.p.string_table.iter().position(|x| x == text) {
            return i as i64;
        }
        self.p.string_table.push(text.to_string());
        (self.p.string_table.len() - 1) as i64
    }

    /// The location id standing for function `name` (created on first use).
    pub fn location(&mut self, name: &str) -> u64 {
        let name_ix = self.intern(name);
        if let Some(f) = self.p.function.iter().find(|f| f.name == name_ix) {
            let fid = f.id;
            return self
                .p
                .location
                .iter()
                .find(|l| l.line[0].function_id == fid)
                .map(|l| l.id)
                .unwrap_or(0);
        }
        let id = self.p.function.len() as u64 + 1;
        self.p.function.push(Function {
            id,
            name: name_ix,
            system_name: name_ix,
            filename: 0,
            start_line: 0,
        });
        self.p.location.push(Location {
            id,
            mapping_id: 0,
            address: 0x1000 + id,
            line: vec![Line {
                function_id: id,
                line: 1,
                column: 0,
            }],
            is_folded: false,
        });
        id
    }

    pub fn sample(&mut self, stack: &[&str], values: Vec<i64>) {
        let location_id = stack.iter().map(|f| self.location(f)).collect();
        self.p.sample.push(Sample {
            location_id,
            value: values,
            label: vec![],
        });
    }
}

/// A Go-shaped CPU profile: each pair is (stack, sample count); nanoseconds = count × 10ms.
pub fn cpu_profile(samples: &[(&[&str], i64)]) -> Profile {
    let mut s = Synth::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    for (stack, n) in samples {
        s.sample(stack, vec![*n, n * 10_000_000]);
    }
    s.p.period_type = Some(ValueType {
        r#type: s.intern("cpu"),
        unit: s.intern("nanoseconds"),
    });
    s.p.period = 10_000_000;
    s.p.time_nanos = 1_795_993_200_000_000_000;
    s.p.duration_nanos = 2_000_000_000;
    s.p
}

/// A Go-shaped heap profile: each pair is (stack, bytes), one object per sample.
pub fn heap_profile(samples: &[(&[&str], i64)]) -> Profile {
    let mut s = Synth::new(&[
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ]);
    for (stack, bytes) in samples {
        s.sample(stack, vec![1, *bytes, 1, *bytes]);
    }
    s.p.time_nanos = 1_795_993_200_000_000_000;
    s.p
}
