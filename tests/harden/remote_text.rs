//! Remote text is inert: a hostile profile (built here) whose function names, comment and file name hold
//! ESC sequences (set the window title, clear the screen), BEL, CR, a right-to-left override, NUL, XML's
//! forbidden U+FFFE and markup reaches neither a terminal nor a text file raw, and every SVG made of it is
//! valid XML: `nl6 report` (stdout and `-svg`) and `nl6 collect` (`*.top.txt`, `*.svg`) of the real binary.
//! The SVGs are checked by a real XML parser (python3's `xml.etree`, expat underneath).

use crate::collect_support;
use crate::common;

use nl6_profile::proto::{Function, Line, Location, Mapping, Profile, Sample, ValueType};
use prost::Message;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Names a hostile profile may carry, each with what it would do to a terminal or an XML reader.
const HOSTILE: &[&str] = &[
    "\u{1b}]0;pwned\u{7}title",
    "\u{1b}[2J\u{1b}[Hclear",
    "over\rwrite",
    "\u{202e}evil_reversed",
    "nul\0byte",
    "non\u{fffe}char",
    "markup<&>\"']]>",
    "line\nbreak",
];

fn hostile_profile() -> Vec<u8> {
    hostile_profile_of("samples")
}

/// The hostile profile with its one sample type named `kind`.
fn hostile_profile_of(kind: &str) -> Vec<u8> {
    let mut strings: Vec<String> = vec!["".into(), kind.into(), "count".into()];
    let first_name = strings.len() as i64;
    strings.extend(HOSTILE.iter().map(|s| s.to_string()));
    let file = strings.len() as i64;
    strings.push("/tmp/\u{1b}[31mbin".into());
    let comment = strings.len() as i64;
    strings.push("comment \u{1b}[2J\u{7}".into());
    let functions: Vec<Function> = (0..HOSTILE.len())
        .map(|i| Function {
            id: i as u64 + 1,
            name: first_name + i as i64,
            system_name: first_name + i as i64,
            filename: 0,
            start_line: 0,
        })
        .collect();
    let locations: Vec<Location> = (0..HOSTILE.len())
        .map(|i| Location {
            id: i as u64 + 1,
            mapping_id: 1,
            line: vec![Line {
                function_id: i as u64 + 1,
                line: 1,
                column: 0,
            }],
            ..Default::default()
        })
        .collect();
    let p = Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        string_table: strings,
        mapping: vec![Mapping {
            id: 1,
            filename: file,
            ..Default::default()
        }],
        function: functions,
        location: locations,
        // One stack of every name, and each name as a leaf of its own.
        sample: std::iter::once(Sample {
            location_id: (1..=HOSTILE.len() as u64).collect(),
            value: vec![10],
            label: vec![],
        })
        .chain((1..=HOSTILE.len() as u64).map(|l| Sample {
            location_id: vec![l],
            value: vec![5],
            label: vec![],
        }))
        .collect(),
        comment: vec![comment],
        ..Default::default()
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

/// Control characters (but `\n`), DEL, C1 controls and the bidi controls found in `text`.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
        })
        .collect()
}

fn assert_inert(what: &str, text: &str) {
    let raw = raw_controls(text);
    assert!(raw.is_empty(), "{what} holds raw {raw:?}:\n{text:?}");
    assert!(
        text.contains("\\x1b"),
        "{what}: the escapes are shown: {text:?}"
    );
}

/// Parses `svg` with python3's XML parser: Ok, or the parser's complaint.
fn xml_parse(svg: &Path) -> Result<(), String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
        ])
        .arg(svg)
        .output()
        .expect("python3 (scripts/setup.sh installs it)");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn nl6_report_prints_hostile_names_escaped_and_writes_a_valid_svg() {
    let work = collect_support::scratch("remote-text-report");
    let profile = work.join("hostile.pb.gz");
    std::fs::write(&profile, hostile_profile()).unwrap();
    let svg = work.join("hostile.svg");
    let out = common::boot()
        .args(&[
            "report",
            "-svg",
            svg.to_str().unwrap(),
            profile.to_str().unwrap(),
        ])
        .run_within(Duration::from_secs(20));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert("nl6 report's table", &stdout);
    assert!(
        stdout.contains("evil_reversed") && stdout.contains("markup"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("evil_reversed"), "the SVG draws the names");
    assert_eq!(
        raw_controls(&text),
        Vec::<char>::new(),
        "raw controls in the SVG"
    );
    xml_parse(&svg).unwrap_or_else(|e| panic!("the SVG is not valid XML: {e}"));
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn nl6_collect_archives_hostile_names_escaped_and_valid_svgs() {
    let work = collect_support::scratch("remote-text-collect");
    let body = hostile_profile();
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    let target = collect_support::fake_server(Some(reply));
    let targets = work.join("targets.txt");
    std::fs::write(
        &targets,
        format!("hostile http://127.0.0.1:{}\n", target.port),
    )
    .unwrap();
    let out_dir = work.join("out");
    let run = common::boot()
        .args(&[
            "collect",
            "-targets",
            targets.to_str().unwrap(),
            "-out",
            out_dir.to_str().unwrap(),
            "-once",
            "-cpu-seconds",
            "1",
            "-timeout",
            "10s",
        ])
        .run_within(Duration::from_secs(30));
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (dated, _) = collect_support::only_dated_dir(&out_dir, "hostile");
    let dir = dated.join("127.0.0.1").join(target.port.to_string());
    let mut checked = 0;
    for kind in ["cpu", "heap"] {
        let top = std::fs::read_to_string(dir.join(format!("{kind}.top.txt")))
            .unwrap_or_else(|e| panic!("{kind}.top.txt: {e}"));
        assert_inert(&format!("{kind}.top.txt"), &top);
        let svg = dir.join(format!("{kind}.svg"));
        xml_parse(&svg).unwrap_or_else(|e| panic!("{kind}.svg is not valid XML: {e}"));
        checked += 1;
    }
    assert_eq!(checked, 2);
    let _ = std::fs::remove_dir_all(&work);
}

/// A diff base whose sample type is itself hostile: the refusal quotes it on stderr, escaped.
#[test]
fn nl6_report_refusing_a_hostile_diff_base_quotes_it_escaped() {
    let work = collect_support::scratch("remote-text-diff");
    let (base, now) = (work.join("base.pb.gz"), work.join("now.pb.gz"));
    std::fs::write(
        &base,
        hostile_profile_of("evil\u{1b}]0;pwned\u{7}\u{202e}kind"),
    )
    .unwrap();
    std::fs::write(&now, hostile_profile()).unwrap();
    let out = common::boot()
        .args(&[
            "report",
            "-diff-base",
            base.to_str().unwrap(),
            now.to_str().unwrap(),
        ])
        .run_within(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(
        out.status.code(),
        Some(0),
        "incompatible profiles: {stderr}"
    );
    assert!(
        stderr.contains("evil"),
        "the refusal names the sample type: {stderr}"
    );
    assert_inert("nl6 report's refusal", &stderr);
    let _ = std::fs::remove_dir_all(&work);
}
