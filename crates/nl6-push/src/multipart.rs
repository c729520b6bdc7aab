//! The `multipart/form-data` body of one `/ingest` upload, as the server reads it: a file part `profile`
//! (filename `profile.pprof`, the gzip pprof) and, for every kind but CPU, a file part `sample_type_config`
//! (filename `sample_type_config.json`) that puts the profile under the right `__name__` (`memory`,
//! `goroutines`, `fgprof`). Both parts carry a filename because the server only looks among file parts: a part
//! without one is dropped and the upload is answered 200 with nothing stored.
//!
//! Plain bytes in, plain bytes out; never gzips the whole body (the server would not undo it).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The `sample_type_config` JSON for the heap upload: the four Go heap sample types, units and
/// aggregation as pyroscope-go sends them. Every key maps to `memory` on the server.
pub const HEAP_SAMPLE_TYPE_CONFIG: &str = concat!(
    r#"{"alloc_objects":{"units":"objects"},"alloc_space":{"units":"bytes"},"#,
    r#""inuse_objects":{"units":"objects","aggregation":"average"},"#,
    r#""inuse_space":{"units":"bytes","aggregation":"average"}}"#
);

/// The `sample_type_config` JSON for the thread-stack upload: the `goroutine` sample type displayed as
/// `goroutines`, which the server maps to `__name__="goroutines"`.
pub const THREADS_SAMPLE_TYPE_CONFIG: &str =
    r#"{"goroutine":{"display-name":"goroutines","units":"goroutines","aggregation":"average"}}"#;

/// The `sample_type_config` JSON for the wall-clock upload: fgprof's two sample types, both displayed as
/// `fgprof`, the name Grafana Alloy's `profile.fgprof` scrape files them under. The server's rules match
/// no other name in `fgprof` and keep it; without this part its default mapping would read `samples` as
/// `cpu` and file the wall-clock profile as `process_cpu`.
pub const WALL_SAMPLE_TYPE_CONFIG: &str = concat!(
    r#"{"samples":{"display-name":"fgprof","units":"samples"},"#,
    r#""time":{"display-name":"fgprof","units":"nanoseconds"}}"#
);

/// A finished body and the `Content-Type` header that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartBody {
    /// `multipart/form-data; boundary=…`
    pub content_type: String,
    /// The whole body.
    pub bytes: Vec<u8>,
}

/// Builds the body: `profile` then, when given, `sample_type_config`.
pub fn ingest_body(profile_gz: &[u8], sample_type_config: Option<&str>) -> MultipartBody {
    let mut boundary = new_boundary();
    // A boundary must not occur inside a part; with 128 random-ish bits this loop practically never
    // repeats, but the check makes the body correct by construction.
    while contains(profile_gz, boundary.as_bytes())
        || sample_type_config.is_some_and(|c| c.contains(&boundary))
    {
        boundary = new_boundary();
    }
    let mut bytes = Vec::with_capacity(profile_gz.len() + 512);
    push_file_part(
        &mut bytes,
        &boundary,
        "profile",
        "profile.pprof",
        profile_gz,
    );
    if let Some(config) = sample_type_config {
        push_file_part(
            &mut bytes,
            &boundary,
            "sample_type_config",
            "sample_type_config.json",
            config.as_bytes(),
        );
    }
    bytes.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    MultipartBody {
        content_type: format!("multipart/form-data; boundary={boundary}"),
        bytes,
    }
}

fn push_file_part(out: &mut Vec<u8>, boundary: &str, name: &str, filename: &str, data: &[u8]) {
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn new_boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // SplitMix64 over time and a counter: unpredictable enough to never collide with profile bytes.
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    format!(
        "nl6{:016x}{:016x}",
        mix(nanos ^ n.rotate_left(32)),
        mix(n ^ nanos.rotate_left(17))
    )
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small multipart reader (RFC 7578 shape): returns (headers, data) per part.
    pub(crate) fn parse_parts(content_type: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
        let boundary = content_type
            .split("boundary=")
            .nth(1)
            .expect("boundary param");
        let delim = format!("--{boundary}");
        let mut parts = Vec::new();
        let mut rest = body;
        assert!(
            rest.starts_with(delim.as_bytes()),
            "body starts with the boundary"
        );
        loop {
            rest = &rest[delim.len()..];
            if rest.starts_with(b"--") {
                break;
            }
            rest = rest.strip_prefix(b"\r\n").expect("CRLF after boundary");
            let head_end = rest
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("headers end");
            let head = String::from_utf8(rest[..head_end].to_vec()).unwrap();
            rest = &rest[head_end + 4..];
            let next = format!("\r\n{delim}");
            let end = rest
                .windows(next.len())
                .position(|w| w == next.as_bytes())
                .expect("closing boundary");
            parts.push((head, rest[..end].to_vec()));
            rest = &rest[end + 2..];
        }
        parts
    }

    #[test]
    fn cpu_body_has_only_the_profile_file_part() {
        let profile = b"\x1f\x8b\x08\x00binary\r\n--not-a-boundary";
        let body = ingest_body(profile, None);
        assert!(body
            .content_type
            .starts_with("multipart/form-data; boundary=nl6"));
        let parts = parse_parts(&body.content_type, &body.bytes);
        assert_eq!(parts.len(), 1);
        assert!(parts[0].0.contains(
            r#"Content-Disposition: form-data; name="profile"; filename="profile.pprof""#
        ));
        assert_eq!(parts[0].1, profile);
        assert!(body.bytes.ends_with(b"--\r\n"));
    }

    #[test]
    fn heap_and_threads_bodies_carry_a_config_file_part() {
        for config in [
            HEAP_SAMPLE_TYPE_CONFIG,
            THREADS_SAMPLE_TYPE_CONFIG,
            WALL_SAMPLE_TYPE_CONFIG,
        ] {
            let body = ingest_body(b"pprof", Some(config));
            let parts = parse_parts(&body.content_type, &body.bytes);
            assert_eq!(parts.len(), 2);
            assert!(parts[1]
                .0
                .contains(r#"name="sample_type_config"; filename="sample_type_config.json""#));
            assert_eq!(parts[1].1, config.as_bytes());
            let json: serde_json::Value = serde_json::from_slice(&parts[1].1).unwrap();
            assert!(json.is_object());
        }
    }

    #[test]
    fn configs_name_the_types_the_server_maps() {
        let heap: serde_json::Value = serde_json::from_str(HEAP_SAMPLE_TYPE_CONFIG).unwrap();
        for k in [
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space",
        ] {
            assert!(heap.get(k).is_some(), "{k}");
        }
        let threads: serde_json::Value = serde_json::from_str(THREADS_SAMPLE_TYPE_CONFIG).unwrap();
        assert_eq!(threads["goroutine"]["display-name"], "goroutines");
        // fgprof's sample types, as the engine's wall-clock encoder writes them.
        let wall: serde_json::Value = serde_json::from_str(WALL_SAMPLE_TYPE_CONFIG).unwrap();
        for k in ["samples", "time"] {
            assert_eq!(wall[k]["display-name"], "fgprof", "{k}");
        }
    }

    #[test]
    fn boundaries_differ_between_bodies() {
        let a = ingest_body(b"x", None).content_type;
        let b = ingest_body(b"x", None).content_type;
        assert_ne!(a, b);
    }
}
