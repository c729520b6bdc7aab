//! Making a `-baseline` diff fair when the two CPU windows differ in length: a 5 s baseline against a
//! 2 s cycle would otherwise show every function "shrinking". The new profile is scaled as
//! `go tool pprof -normalize -diff_base` scales it (pprof's `Profile.Normalize`: every sample type's
//! values multiplied by base total / new total, rounded, all-zero samples dropped), so the diff shows
//! where the time went rather than how long each window was. Equal windows are compared raw, as before.
#![forbid(unsafe_code)]

use crate::timefmt::format_go_duration;
use nl6_profile::proto::Profile;
use std::time::Duration;

/// Windows whose lengths differ by less than this fraction count as equal (a `-cpu-seconds 10` window
/// lasts 10 s give or take the fetch).
const SAME_WINDOW: f64 = 0.05;

/// `new` ready to diff against `base`, and the line saying what was done (empty when nothing was).
pub fn for_diff(base: &Profile, new: &Profile) -> (Profile, String) {
    let (b, n) = (base.duration_nanos, new.duration_nanos);
    if b <= 0 || n <= 0 || ((b - n).abs() as f64) <= SAME_WINDOW * b.max(n) as f64 {
        return (new.clone(), String::new());
    }
    let scales = scales(base, new);
    let mut scaled = new.clone();
    scale(&mut scaled, &scales);
    let window = |ns: i64| format_go_duration(Duration::from_nanos(ns as u64));
    let shown = scales
        .iter()
        .map(|s| format!("{s:.3}"))
        .collect::<Vec<_>>()
        .join(", ");
    let note = format!(
        "Normalized: the windows differ (baseline {}, this profile {}); this profile's values are scaled by \
         {shown} so its totals equal the baseline's, as go tool pprof -normalize does\n",
        window(b),
        window(n)
    );
    (scaled, note)
}

/// Per sample type: base total / new total (0 when the new total is 0), as pprof's `Normalize`.
fn scales(base: &Profile, new: &Profile) -> Vec<f64> {
    let totals = |p: &Profile| {
        let mut t = vec![0i64; new.sample_type.len()];
        for s in &p.sample {
            for (i, v) in s.value.iter().enumerate().take(t.len()) {
                t[i] += v;
            }
        }
        t
    };
    let (bt, nt) = (totals(base), totals(new));
    bt.iter()
        .zip(&nt)
        .map(|(&b, &n)| if n == 0 { 0.0 } else { b as f64 / n as f64 })
        .collect()
}

/// pprof's `ScaleN`: each value × its type's ratio, rounded half away from zero; samples left all zero
/// are dropped.
fn scale(p: &mut Profile, ratios: &[f64]) {
    if ratios.iter().all(|&r| r == 1.0) {
        return;
    }
    p.sample.retain_mut(|s| {
        let mut keep = false;
        for (v, &r) in s.value.iter_mut().zip(ratios) {
            if r != 1.0 {
                *v = (*v as f64 * r).round() as i64;
                keep |= *v != 0;
            }
        }
        keep
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testprofile::cpu_profile;

    #[test]
    fn different_windows_are_normalized_as_pprof_does() {
        // The same shape (70 % work, 30 % idle loop) over 5 s and over 2 s.
        let mut base = cpu_profile(&[(&["work", "main"], 350), (&["idle", "main"], 150)]);
        base.duration_nanos = 5_000_000_000;
        let new = cpu_profile(&[(&["work", "main"], 140), (&["idle", "main"], 60)]);
        let raw = crate::report::default_diff_table(&base, &new).unwrap();
        assert!(
            raw.contains("-2100ms"),
            "raw, work seems to shrink by 2.1 s: {raw}"
        );
        let (scaled, note) = for_diff(&base, &new);
        assert!(note.contains("baseline 5s, this profile 2s"), "{note}");
        assert!(note.contains("2.500, 2.500"), "{note}");
        let values: Vec<Vec<i64>> = scaled.sample.iter().map(|s| s.value.clone()).collect();
        assert_eq!(
            values,
            vec![vec![350, 3_500_000_000], vec![150, 1_500_000_000]]
        );
        let fair = crate::report::default_diff_table(&base, &scaled).unwrap();
        assert!(fair.contains("no change"), "same shape, no change: {fair}");
    }

    #[test]
    fn equal_windows_are_compared_raw_and_rounding_is_pprofs() {
        let base = cpu_profile(&[(&["work", "main"], 100)]);
        let new = cpu_profile(&[(&["work", "main"], 150)]);
        assert_eq!(for_diff(&base, &new), (new.clone(), String::new()));
        // A 1 s baseline of 10 samples against a 20 s window of 1000 + 1: ratio 10/1001 per type.
        let mut short = cpu_profile(&[(&["a"], 10)]);
        short.duration_nanos = 1_000_000_000;
        let mut long = cpu_profile(&[(&["a"], 1000), (&["b"], 1)]);
        long.duration_nanos = 20_000_000_000;
        let (s, note) = for_diff(&short, &long);
        assert!(note.contains("baseline 1s, this profile 20s"), "{note}");
        let values: Vec<Vec<i64>> = s.sample.iter().map(|s| s.value.clone()).collect();
        // round(1000 × 0.00999) = 10, round(1 × 0.00999) = 0; b's nanoseconds stay non-zero, so it is kept.
        assert_eq!(values, vec![vec![10, 99_900_100], vec![0, 99_900]]);
        let mut p = cpu_profile(&[(&["a"], 3), (&["b"], 1)]);
        scale(&mut p, &[0.2, 0.0]);
        assert_eq!(p.sample.len(), 1, "an all-zero sample is dropped");
    }
}
