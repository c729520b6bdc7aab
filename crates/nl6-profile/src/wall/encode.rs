//! A [`super::WallProfile`] as fgprof writes one: gzip'd pprof with sample types `samples/count` and
//! `time/nanoseconds`, period type `wallclock/nanoseconds`, period `1e9 / hz`; each sample labelled with
//! its `subsystem` (when it has one) and its `state`. A thread that did not answer is kept, under one
//! frame naming why, so the time adds up.
#![forbid(unsafe_code)]

use super::WallProfile;
use crate::builder::{LabelValue, LeafKind, ProfileBuilder};
use crate::labels;

/// The frame a sample without a stack is shown under.
pub(crate) const UNANSWERED_FUNCTION: &str =
    "[profiler: thread did not answer the wall-clock sampler]";

/// The encoded profile.
pub fn encode(profile: &WallProfile) -> Vec<u8> {
    let mut b = ProfileBuilder::new(&[("samples", "count"), ("time", "nanoseconds")]);
    b.period("wallclock", "nanoseconds", profile.period_ns as i64)
        .time(profile.start)
        .duration(profile.duration);
    if profile.capped_ticks > 0 {
        b.comment(&format!(
            "wall-clock profile: {} of {} ticks sampled a rotating subset of the threads; their time is weighted by threads/sampled",
            profile.capped_ticks, profile.ticks
        ));
    }
    if profile.unanswered > 0 {
        b.comment(&format!(
            "wall-clock profile: {} stacks did not come back in time (shown under \"{UNANSWERED_FUNCTION}\")",
            profile.unanswered
        ));
    }
    for s in &profile.samples {
        let mut labels: Vec<(&str, LabelValue)> = labels::pairs_of(s.label)
            .iter()
            .map(|(k, v)| (*k, LabelValue::Str(v.to_string())))
            .collect();
        labels.push(("state", LabelValue::Str(s.state.to_string())));
        let values = vec![s.count as i64, s.nanos as i64];
        if s.stack.is_empty() {
            let loc = b.synthetic_location(UNANSWERED_FUNCTION);
            b.sample_at(vec![loc], values, &labels);
        } else {
            b.sample(&s.stack, LeafKind::ExactLeaf, values, &labels);
        }
    }
    b.gzip()
}
