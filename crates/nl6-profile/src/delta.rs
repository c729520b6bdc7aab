//! Delta views of the heap and contention profiles, as godeltaprof and Go's `?seconds=N` define them.
//!
//! What it provides:
//! - [`HeapDelta`] (`/debug/pprof/delta_heap`): each call returns alloc_* as the change since the previous
//!   call on the same value (the first call: everything since process start) and inuse_* absolute, both
//!   unbiased with Go's formula; all-zero samples are left out. The state is per endpoint, behind a mutex,
//!   so concurrent readers are serialised exactly as godeltaprof's package-level profiler.
//! - [`ContentionDelta`] (`delta_block`, `delta_mutex`): nl6 records no contention, so every call returns a
//!   valid profile with Go's block/mutex header and no samples.
//! - [`heap_between`]: Go's `?seconds=N` delta: the later snapshot minus the earlier one, every value
//!   subtracted (in-use values may be negative, as in Go), with `duration_nanos` set.
//!
//! What it never does: read the heap itself; callers pass [`HeapSnapshot`]s, so the logic is plain values.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::encode::{self, HeapView};
use super::heap::{HeapRecord, HeapSnapshot};
use super::Stack;

type SiteKey = (Stack, u64);

/// godeltaprof's heap delta state for one endpoint.
#[derive(Default)]
pub struct HeapDelta {
    /// Alloc objects per (stack, block size) at the previous call.
    previous: Mutex<HashMap<SiteKey, u64>>,
}

impl std::fmt::Debug for HeapDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sites = self.previous.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("HeapDelta")
            .field("previous_sites", &sites)
            .finish()
    }
}

impl HeapDelta {
    /// A state whose first [`HeapDelta::next`] returns cumulative values.
    pub fn new() -> HeapDelta {
        HeapDelta::default()
    }

    /// The next delta profile (gzip'd pprof, heap header, no default sample type), advancing the state.
    pub fn next(&self, snapshot: &HeapSnapshot) -> Vec<u8> {
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        let mut b = encode::heap_builder(snapshot.rate, HeapView::Heap, snapshot.note.as_deref());
        let rate = snapshot.rate as i64;
        for r in &snapshot.records {
            let block = block_size(r);
            if r.alloc_objects == 0 && r.free_objects == 0 {
                continue; // a fresh record: nothing happened at this site yet
            }
            let key = (r.stack.clone(), block);
            let before = previous.insert(key, r.alloc_objects).unwrap_or(0);
            let alloc_objects = r.alloc_objects.saturating_sub(before) as i64;
            let inuse_objects = r.alloc_objects.saturating_sub(r.free_objects) as i64;
            let (ao, ab) =
                encode::scale_heap_sample(alloc_objects, alloc_objects * block as i64, rate);
            let (io, ib) =
                encode::scale_heap_sample(inuse_objects, inuse_objects * block as i64, rate);
            if ao == 0 && ab == 0 && io == 0 && ib == 0 {
                continue;
            }
            encode::add_heap_sample(&mut b, &r.stack, block, vec![ao, ab, io, ib]);
        }
        b.gzip()
    }
}

/// godeltaprof's block/mutex delta state. The engine records no contention: every call is empty but valid.
#[derive(Debug, Default)]
pub struct ContentionDelta {
    calls: Mutex<u64>,
}

impl ContentionDelta {
    /// A fresh state.
    pub fn new() -> ContentionDelta {
        ContentionDelta::default()
    }

    /// The next delta (gzip'd pprof, contentions/count + delay/nanoseconds, period 1, no samples).
    pub fn next(&self) -> Vec<u8> {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        encode::contention_empty()
    }
}

fn block_size(r: &HeapRecord) -> u64 {
    r.alloc_bytes.checked_div(r.alloc_objects).unwrap_or(r.size)
}

/// Go's `?seconds=N` heap/allocs delta: `after − before` for every value (scaled as Go scales each
/// snapshot), all-zero samples dropped, `time_nanos` now, `duration_nanos` = `duration`.
pub fn heap_between(
    before: &HeapSnapshot,
    after: &HeapSnapshot,
    duration: Duration,
    view: HeapView,
) -> Vec<u8> {
    let earlier: HashMap<(&Stack, u64), &HeapRecord> = before
        .records
        .iter()
        .map(|r| ((&r.stack, block_size(r)), r))
        .collect();
    let mut b = encode::heap_builder(after.rate.max(before.rate), view, after.note.as_deref());
    b.time(SystemTime::now()).duration(duration);
    for r in &after.records {
        let block = block_size(r);
        let now = encode::heap_values(r, after.rate);
        let then = earlier
            .get(&(&r.stack, block))
            .map(|e| encode::heap_values(e, before.rate))
            .unwrap_or([0; 4]);
        let values: Vec<i64> = now.iter().zip(then).map(|(a, b)| a - b).collect();
        if values.iter().all(|v| *v == 0) {
            continue;
        }
        encode::add_heap_sample(&mut b, &r.stack, block, values);
    }
    b.gzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn record(stack: u64, size: u64, allocs: u64, frees: u64) -> HeapRecord {
        HeapRecord {
            stack: vec![stack],
            size,
            alloc_objects: allocs,
            alloc_bytes: allocs * size,
            free_objects: frees,
            free_bytes: frees * size,
        }
    }

    fn values(bytes: &[u8]) -> Vec<Vec<i64>> {
        let p = proto::decode(bytes).unwrap();
        assert_eq!(p.sample_type.len(), 4);
        assert_eq!(p.default_sample_type, 0);
        p.sample.into_iter().map(|s| s.value).collect()
    }

    #[test]
    fn heap_delta_reports_new_allocs_and_absolute_inuse() {
        let d = HeapDelta::new();
        let rate = 1; // unscaled, so the numbers are the raw counters
        let first = HeapSnapshot {
            rate,
            records: vec![record(0x10, 64, 5, 1), record(0x20, 8, 0, 0)],
            note: None,
        };
        assert_eq!(values(&d.next(&first)), vec![vec![5, 320, 4, 256]]);
        let second = HeapSnapshot {
            rate,
            records: vec![record(0x10, 64, 7, 6), record(0x20, 8, 0, 0)],
            note: None,
        };
        assert_eq!(values(&d.next(&second)), vec![vec![2, 128, 1, 64]]);
        let third = HeapSnapshot {
            rate,
            records: vec![record(0x10, 64, 7, 7)],
            note: None,
        };
        assert!(
            values(&d.next(&third)).is_empty(),
            "no new allocs and nothing in use: all-zero, dropped"
        );
    }

    #[test]
    fn heap_between_subtracts_everything_and_sets_duration() {
        let before = HeapSnapshot {
            rate: 1,
            records: vec![record(0x10, 64, 5, 1)],
            note: None,
        };
        let after = HeapSnapshot {
            rate: 1,
            records: vec![record(0x10, 64, 9, 9), record(0x30, 16, 2, 0)],
            note: None,
        };
        let bytes = heap_between(&before, &after, Duration::from_secs(3), HeapView::Allocs);
        let p = proto::decode(&bytes).unwrap();
        assert_eq!(p.duration_nanos, 3_000_000_000);
        assert_eq!(
            p.string_table[p.default_sample_type as usize],
            "alloc_space"
        );
        let vals: Vec<Vec<i64>> = p.sample.iter().map(|s| s.value.clone()).collect();
        assert_eq!(vals, vec![vec![4, 256, -4, -256], vec![2, 32, 2, 32]]);
    }

    #[test]
    fn contention_delta_is_empty_but_valid() {
        let d = ContentionDelta::new();
        let p = proto::decode(&d.next()).unwrap();
        assert!(p.sample.is_empty());
        assert_eq!(p.period, 1);
        let names: Vec<&str> = p
            .sample_type
            .iter()
            .map(|t| p.string_table[t.r#type as usize].as_str())
            .collect();
        assert_eq!(names, ["contentions", "delay"]);
    }
}
