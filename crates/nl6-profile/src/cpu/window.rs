//! One profiling window: the ring's samples aggregated by stack and label as the collector drains them,
//! then turned into a [`CpuProfile`]. Runs on the collector and the session's owner, never in a handler.
use super::{Coverage, CpuProfile, CpuSample, LOST, RING};
use crate::unwind::MAX_DEPTH;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

/// The samples of the running window, with what its profile reports besides them.
pub(super) struct Window {
    start: SystemTime,
    began: Instant,
    lost_at_start: u64,
    /// Key: the stack's frames followed by the label as one last word, so a lookup borrows a reusable
    /// scratch buffer as `&[u64]` and only a stack seen for the first time allocates.
    counts: HashMap<Vec<u64>, u64>,
    scratch: Vec<u64>,
    pub(super) coverage: Coverage,
}

impl Window {
    pub(super) fn new() -> Window {
        Window {
            start: SystemTime::now(),
            began: Instant::now(),
            lost_at_start: LOST.load(Ordering::Relaxed),
            counts: HashMap::new(),
            scratch: Vec::with_capacity(MAX_DEPTH + 1),
            coverage: Coverage::default(),
        }
    }

    /// Moves the ring's published samples into this window; returns `(tid, rsp)` of samples taken on
    /// threads whose stack top the handler did not know.
    pub(super) fn drain_ring(&mut self) -> Vec<(i32, u64)> {
        let mut unknown = Vec::new();
        let (counts, scratch) = (&mut self.counts, &mut self.scratch);
        RING.drain(|s| {
            scratch.clear();
            scratch.extend_from_slice(s.stack());
            scratch.push(u64::from(s.label));
            match counts.get_mut(scratch.as_slice()) {
                Some(count) => *count += u64::from(s.weight),
                None => {
                    counts.insert(scratch.clone(), u64::from(s.weight));
                }
            }
            if s.unknown_tid != 0 && !unknown.iter().any(|u: &(i32, u64)| u.0 == s.unknown_tid) {
                unknown.push((s.unknown_tid, s.rsp));
            }
        });
        unknown
    }

    pub(super) fn into_profile(self, period_ns: u64) -> CpuProfile {
        let mut samples: Vec<CpuSample> = self
            .counts
            .into_iter()
            .map(|(mut key, count)| {
                let label = key.pop().unwrap_or(0) as u16;
                CpuSample {
                    stack: key,
                    label,
                    count,
                }
            })
            .collect();
        samples.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.stack.cmp(&b.stack)));
        CpuProfile {
            start: self.start,
            duration: self.began.elapsed(),
            period_ns,
            samples,
            lost: LOST
                .load(Ordering::Relaxed)
                .saturating_sub(self.lost_at_start),
            coverage: self.coverage,
        }
    }
}
