//! `meta.json`: what the collector knows about one snapshot — target, program, times, per-profile status,
//! sizes of the files written, errors (a closed nl6 gate's 503 message is kept verbatim), and the baseline
//! used for `cpu.diff.txt`.
//!
//! Plain serde values; written by [`super::cycle`]. Time text comes from [`crate::timefmt`].
#![forbid(unsafe_code)]

use serde::Serialize;
use std::collections::BTreeMap;

/// Per-profile outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fetched and decoded.
    Ok,
    /// Some profiles fetched, some not (whole-snapshot status only).
    Partial,
    /// Not fetched, or not a profile.
    Failed,
}

/// One profile's record.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileMeta {
    pub url: String,
    pub status: Status,
    pub http_status: Option<u16>,
    /// Size of the archived `.pb.gz` (0 when failed).
    pub bytes: u64,
    /// How many pprof `Sample` records the profile holds (one per distinct stack and label set), which
    /// is not how many samples were taken (each record counts many). Named `samples` before; nothing in
    /// nl6 reads meta.json back, so older archives stay as they are.
    pub records: Option<usize>,
    /// The sample type the top table and flame graph show.
    pub sample_type: Option<String>,
    pub fetch_ms: u64,
    pub error: Option<String>,
}

/// The baseline a `cpu.diff.txt` was computed against, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineMeta {
    pub dir: String,
    pub profile: Option<String>,
    pub error: Option<String>,
}

/// The whole meta.json.
#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    pub target: String,
    pub program: String,
    pub fqdn: String,
    pub port: u16,
    pub cycle_start: String,
    pub started: String,
    pub finished: String,
    pub duration_ms: u64,
    pub cpu_seconds: u64,
    pub status: Status,
    pub error: Option<String>,
    pub profiles: BTreeMap<String, ProfileMeta>,
    /// Every file in the snapshot (meta.json excepted) and its size in bytes.
    pub files: BTreeMap<String, u64>,
    pub baseline: Option<BaselineMeta>,
    pub collector: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_count_is_named_for_what_it_counts() {
        let pm = ProfileMeta {
            url: "http://h/debug/pprof/profile".into(),
            status: Status::Ok,
            http_status: Some(200),
            bytes: 10,
            records: Some(3),
            sample_type: Some("cpu".into()),
            fetch_ms: 1,
            error: None,
        };
        let v = serde_json::to_value(&pm).unwrap();
        assert_eq!(v["records"], 3);
        assert!(v.get("samples").is_none(), "{v}");
    }

    #[test]
    fn status_serializes_lowercase() {
        assert_eq!(
            serde_json::to_string(&Status::Partial).unwrap(),
            "\"partial\""
        );
    }
}
