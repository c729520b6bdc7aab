//! The `fgprof` route: a wall-clock profile for `?seconds=N`, by fgprof's rules (default 30 s; a value
//! that is not a positive integer is a 400, as fgprof's handler answers it) and nl6's limit
//! ([`super::MAX_SECONDS`]), one session at a time, ended early by the request's [`Watch`] like `profile`.
//! `format=folded` (fgprof's other output) is refused by name: only pprof is written.
#![forbid(unsafe_code)]

use super::{attachment, serve_error, wait_out, PullRequest, PullResponse, PullSurface, Watch};
use super::{DEFAULT_CPU_SECONDS, MAX_SECONDS};
use crate::wall;
use std::time::Duration;

impl PullSurface {
    pub(super) fn wall(&self, req: &PullRequest, watch: Watch) -> PullResponse {
        let seconds = match req.query_param("seconds").filter(|s| !s.is_empty()) {
            None => DEFAULT_CPU_SECONDS,
            Some(s) => match s.parse::<i64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return serve_error(
                        400,
                        &format!("bad seconds: {s:?}: must be a positive integer"),
                    )
                }
            },
        };
        if seconds > MAX_SECONDS {
            return serve_error(
                400,
                &format!("seconds={seconds} exceeds the limit of {MAX_SECONDS} seconds"),
            );
        }
        match req.query_param("format").as_deref() {
            None | Some("") | Some("pprof") => {}
            Some(other) => {
                return serve_error(
                    400,
                    &format!("unknown format: {other:?}: the wall-clock profile is written as format=pprof only"),
                )
            }
        }
        let Some(_slot) = self.take_timed_slot() else {
            return Self::too_many();
        };
        crate::sight::tell_once();
        let session = match wall::start() {
            Ok(s) => s,
            Err(e) => {
                return serve_error(500, &format!("Could not enable wall-clock profiling: {e}"))
            }
        };
        if let Err(cut) = wait_out(Duration::from_secs(seconds as u64), watch) {
            drop(session);
            return cut;
        }
        let body = wall::encode(&session.stop());
        if let Some(hook) = &self.on_wall_profile {
            hook(&body);
        }
        let mut r = attachment("fgprof", body);
        r.extra_write_time = Duration::from_secs(seconds as u64);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn get(query: &str) -> PullResponse {
        PullSurface::new().handle(&PullRequest::get("fgprof", query), &|| None)
    }

    #[test]
    fn bad_seconds_and_formats_are_refused_by_name() {
        for (q, says) in [
            ("seconds=0", "bad seconds: \"0\""),
            ("seconds=x", "bad seconds: \"x\""),
            ("seconds=-3", "bad seconds: \"-3\""),
            ("seconds=301", "exceeds the limit of 300"),
            ("seconds=1&format=folded", "unknown format: \"folded\""),
        ] {
            let r = get(q);
            assert_eq!(r.status, 400, "{q}");
            assert!(r.text().contains(says), "{q}: {}", r.text());
            assert_eq!(r.header("X-Go-Pprof"), Some("1"));
        }
    }

    /// A one-second profile in fgprof's shape, handed to the hook as sent; a second request while a
    /// session runs is a 500 that says so, never an empty profile.
    #[test]
    fn a_profile_has_fgprofs_shape_and_one_runs_at_a_time() {
        let _serial = crate::wall::TEST_SESSIONS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = seen.clone();
        let surface = PullSurface::new()
            .on_wall_profile(Box::new(move |b: &[u8]| *keep.lock().unwrap() = b.to_vec()));
        let busy = crate::wall::start().expect("a session");
        let r = surface.handle(&PullRequest::get("fgprof", "seconds=1"), &|| None);
        assert_eq!(r.status, 500, "{}", r.text());
        assert!(r.text().contains("already in use"), "{}", r.text());
        drop(busy);
        let r = surface.handle(&PullRequest::get("fgprof", "seconds=1"), &|| None);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.header("Content-Disposition"),
            Some("attachment; filename=\"fgprof\"")
        );
        assert_eq!(*seen.lock().unwrap(), r.body);
        let p = proto::decode(&r.body).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("time", "nanoseconds")]);
        let pt = p.period_type.as_ref().unwrap();
        assert_eq!((s(pt.r#type), s(pt.unit)), ("wallclock", "nanoseconds"));
        assert_eq!(p.period, 1_000_000_000 / 99);
        assert!(!p.sample.is_empty());
    }
}
