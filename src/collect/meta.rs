//! `meta.json`: what the collector knows about one snapshot — target, program, times, per-profile status,
//! sizes of the files written, errors (a closed nl6 gate's 503 message is kept verbatim), and the baseline
//! used for `cpu.diff.txt`.
//!
//! Plain serde values; written by [`super::cycle`].
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::archive::Stamp;

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

/// `t` as RFC 3339 UTC with milliseconds (`2026-11-29T23:15:00.123Z`).
pub fn rfc3339_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let s = Stamp::from_unix(d.as_secs() as i64).rfc3339();
    format!("{}.{:03}Z", s.trim_end_matches('Z'), d.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn millis_timestamps() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_994_107_042);
        assert_eq!(rfc3339_millis(t), "2026-11-29T23:15:07.042Z");
    }

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
