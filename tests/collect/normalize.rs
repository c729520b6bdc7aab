//! `collect -baseline` over windows of different lengths: the new profile is normalised as
//! `go tool pprof -normalize -diff_base` does, checked against go tool pprof itself on the same files.
use crate::common;

use nl6_profile::proto::{Function, Line, Location, Profile, Sample, ValueType};
use prost::Message;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A Go-shaped CPU profile over `seconds` with (function, sample count) leaf-only stacks under `main`.
fn cpu(seconds: i64, samples: &[(&str, i64)]) -> Profile {
    let mut strings = vec![
        String::new(),
        "samples".into(),
        "count".into(),
        "cpu".into(),
        "nanoseconds".into(),
        "main".into(),
    ];
    let mut p = Profile {
        sample_type: vec![
            ValueType { r#type: 1, unit: 2 },
            ValueType { r#type: 3, unit: 4 },
        ],
        period_type: Some(ValueType { r#type: 3, unit: 4 }),
        period: 10_000_000,
        time_nanos: 1_795_993_200_000_000_000,
        duration_nanos: seconds * 1_000_000_000,
        ..Default::default()
    };
    let add_fn = |p: &mut Profile, strings: &mut Vec<String>, name: &str| -> u64 {
        let id = p.function.len() as u64 + 1;
        let s = strings.iter().position(|x| x == name).unwrap_or_else(|| {
            strings.push(name.to_string());
            strings.len() - 1
        });
        p.function.push(Function {
            id,
            name: s as i64,
            system_name: s as i64,
            ..Default::default()
        });
        p.location.push(Location {
            id,
            line: vec![Line {
                function_id: id,
                line: 1,
                ..Default::default()
            }],
            ..Default::default()
        });
        id
    };
    let main = add_fn(&mut p, &mut strings, "main");
    for (name, n) in samples {
        let leaf = add_fn(&mut p, &mut strings, name);
        p.sample.push(Sample {
            location_id: vec![leaf, main],
            value: vec![*n, n * 10_000_000],
            ..Default::default()
        });
    }
    p.string_table = strings;
    p
}

fn write_gz(path: &Path, p: &Profile) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

/// The rows of a `-top` table (lines after the column header), as pprof prints them.
fn rows(table: &str) -> Vec<String> {
    table
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn a_baseline_of_another_length_is_normalised_as_go_tool_pprof_does() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("normalize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = cpu(5, &[("work", 350), ("idle", 150)]);
    let new = cpu(2, &[("work", 160), ("idle", 40)]);
    let (bp, np) = (dir.join("base.pb.gz"), dir.join("new.pb.gz"));
    write_gz(&bp, &base);
    write_gz(&np, &new);
    let (scaled, note) = nl6::collect::normalize::for_diff(&base, &new);
    assert!(
        note.starts_with("Normalized: the windows differ (baseline 5s, this profile 2s)"),
        "{note}"
    );
    let ours = nl6::report::default_diff_table(&base, &scaled).unwrap();
    let top: &[&std::ffi::OsStr] = &[
        "-top".as_ref(),
        "-normalize".as_ref(),
        "-diff_base".as_ref(),
        bp.as_os_str(),
        np.as_os_str(),
    ];
    let theirs = common::go_pprof_ok(top, &dir);
    assert_eq!(
        rows(&ours),
        rows(&theirs),
        "ours\n{ours}\ngo tool pprof\n{theirs}"
    );
    assert!(
        rows(&ours).iter().any(|r| r.starts_with("500ms")),
        "work grew by 0.5 s per baseline window: {ours}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
