//! The pull surface's calls into the profiling engine, in one place: taking and encoding each profile,
//! the `?seconds=N` deltas, Go's legacy text forms the engine does not produce, and symbol lookup.
//!
//! Two calls are not in the engine's interface yet and are marked `WIRE:` below (the godeltaprof
//! `delta_heap` state and address symbolisation); they panic until wired, which the server answers with a
//! 500. Never touches a socket.
#![forbid(unsafe_code)]

use crate::profiling::cpu::{self, CpuError};
use crate::profiling::encode::{self, HeapView};
use crate::profiling::heap::{self, HeapRecord, HeapSnapshot};
use crate::profiling::threads::{self, ThreadStack};
use crate::profiling::Stack;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

/// How long a thread may take to report its stack for the goroutine profile.
const THREAD_CAPTURE_TIMEOUT: Duration = Duration::from_secs(1);

/// Profiles `seconds` of CPU and encodes them. `Busy` when another CPU profile (or the push's) runs.
pub(super) fn cpu(seconds: u64) -> Result<Vec<u8>, CpuError> {
    let session = cpu::start(cpu::DEFAULT_HZ)?;
    std::thread::sleep(Duration::from_secs(seconds));
    Ok(encode::cpu(&session.stop()))
}

/// What a `?seconds=N` delta subtracts.
pub(super) enum Snapshot {
    Heap(HeapSnapshot),
    Threads(Vec<ThreadStack>),
    Creates(Vec<Stack>),
    Contention,
}

/// The snapshot a delta starts from, for the profile kinds that support `seconds`.
pub(super) fn snapshot(kind: super::pprof::Kind) -> Snapshot {
    use super::pprof::Kind as K;
    match kind {
        K::Heap | K::Allocs => Snapshot::Heap(heap::snapshot()),
        K::Goroutine => Snapshot::Threads(threads::capture_all(THREAD_CAPTURE_TIMEOUT)),
        K::ThreadCreate => Snapshot::Creates(threads::threadcreate_stacks()),
        _ => Snapshot::Contention,
    }
}

/// The profile of what changed between `first` and now (Go's `serveDeltaProfile`): allocation counters
/// subtracted per stack (in-use is the change in in-use, floored at zero by the encoder), goroutine and
/// threadcreate counts subtracted per stack (only growth is representable), contention empty.
pub(super) fn delta_since(kind: super::pprof::Kind, first: Snapshot) -> Vec<u8> {
    use super::pprof::Kind as K;
    match (first, snapshot(kind)) {
        (Snapshot::Heap(a), Snapshot::Heap(b)) => {
            let view = if kind == K::Allocs {
                HeapView::Allocs
            } else {
                HeapView::Heap
            };
            encode::heap(&heap_difference(&a, &b), view)
        }
        (Snapshot::Threads(a), Snapshot::Threads(b)) => {
            let mut before: HashMap<(Stack, u16), usize> = HashMap::new();
            for t in a {
                *before.entry((t.stack, t.label)).or_default() += 1;
            }
            let grown: Vec<ThreadStack> = b
                .into_iter()
                .filter(|t| match before.get_mut(&(t.stack.clone(), t.label)) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        false
                    }
                    _ => true,
                })
                .collect();
            encode::goroutine(&grown)
        }
        (Snapshot::Creates(a), Snapshot::Creates(b)) => {
            let mut before: HashMap<Stack, usize> = HashMap::new();
            for s in a {
                *before.entry(s).or_default() += 1;
            }
            let grown: Vec<Stack> = b
                .into_iter()
                .filter(|s| match before.get_mut(s) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        false
                    }
                    _ => true,
                })
                .collect();
            encode::threadcreate(&grown)
        }
        _ => encode::contention_empty(),
    }
}

/// Per-stack counter differences `b − a` (records aggregated by stack first).
pub(super) fn heap_difference(a: &HeapSnapshot, b: &HeapSnapshot) -> HeapSnapshot {
    let mut before: HashMap<&Stack, (u64, u64, u64, u64)> = HashMap::new();
    for r in &a.records {
        let e = before.entry(&r.stack).or_default();
        e.0 += r.alloc_objects;
        e.1 += r.alloc_bytes;
        e.2 += r.free_objects;
        e.3 += r.free_bytes;
    }
    let mut after: Vec<HeapRecord> = Vec::new();
    let mut index: HashMap<&Stack, usize> = HashMap::new();
    for r in &b.records {
        match index.get(&r.stack) {
            Some(&i) => {
                let e = &mut after[i];
                e.alloc_objects += r.alloc_objects;
                e.alloc_bytes += r.alloc_bytes;
                e.free_objects += r.free_objects;
                e.free_bytes += r.free_bytes;
            }
            None => {
                index.insert(&r.stack, after.len());
                after.push(r.clone());
            }
        }
    }
    let records = after
        .into_iter()
        .filter_map(|mut r| {
            let (ao, ab, fo, fb) = before.get(&r.stack).copied().unwrap_or_default();
            r.alloc_objects = r.alloc_objects.saturating_sub(ao);
            r.alloc_bytes = r.alloc_bytes.saturating_sub(ab);
            r.free_objects = r.free_objects.saturating_sub(fo);
            r.free_bytes = r.free_bytes.saturating_sub(fb);
            (r.alloc_objects | r.alloc_bytes | r.free_objects | r.free_bytes != 0).then_some(r)
        })
        .collect();
    HeapSnapshot {
        rate: b.rate,
        records,
    }
}

/// The encoded profile of a named profile, `debug=0`.
pub(super) fn proto(kind: super::pprof::Kind) -> Vec<u8> {
    use super::pprof::Kind as K;
    match kind {
        K::Heap => encode::heap(&heap::snapshot(), HeapView::Heap),
        K::Allocs => encode::heap(&heap::snapshot(), HeapView::Allocs),
        K::Goroutine => encode::goroutine(&threads::capture_all(THREAD_CAPTURE_TIMEOUT)),
        K::ThreadCreate => encode::threadcreate(&threads::threadcreate_stacks()),
        _ => encode::contention_empty(),
    }
}

/// Go's legacy text form (`debug=N`, N ≠ 0).
pub(super) fn text(kind: super::pprof::Kind, debug: i64) -> String {
    use super::pprof::Kind as K;
    match kind {
        K::Goroutine => {
            let level = if debug >= 2 { 2 } else { 1 };
            encode::goroutine_text(&threads::capture_all(THREAD_CAPTURE_TIMEOUT), level)
        }
        K::Heap | K::Allocs => heap_text(&heap::snapshot()),
        K::ThreadCreate => count_text("threadcreate", &threads::threadcreate_stacks()),
        K::Mutex => "--- mutex:\ncycles/second=1000000000\nsampling period=0\n".to_string(),
        _ => "--- contention:\ncycles/second=1000000000\n".to_string(),
    }
}

/// Go's heap text: a totals header, then one record per site (`inuse: bytes [alloc: bytes] @ pcs`),
/// largest in-use first. Raw (unscaled) counters, as Go prints them.
pub(super) fn heap_text(s: &HeapSnapshot) -> String {
    let inuse = |r: &HeapRecord| {
        (
            r.alloc_objects.saturating_sub(r.free_objects),
            r.alloc_bytes.saturating_sub(r.free_bytes),
        )
    };
    let mut recs: Vec<&HeapRecord> = s.records.iter().collect();
    recs.sort_by_key(|r| std::cmp::Reverse(inuse(r).1));
    let (mut io, mut ib, mut ao, mut ab) = (0u64, 0u64, 0u64, 0u64);
    for r in &recs {
        let (o, b) = inuse(r);
        io += o;
        ib += b;
        ao += r.alloc_objects;
        ab += r.alloc_bytes;
    }
    let mut out = format!(
        "heap profile: {io}: {ib} [{ao}: {ab}] @ heap/{}\n",
        2 * s.rate
    );
    for r in recs {
        let (o, b) = inuse(r);
        let _ = write!(out, "{o}: {b} [{}: {}] @", r.alloc_objects, r.alloc_bytes);
        for pc in &r.stack {
            let _ = write!(out, " {pc:#x}");
        }
        out.push_str("\n\n");
    }
    out
}

/// Go's count-profile text: `<name> profile: total N`, then `count @ pcs` per distinct stack.
pub(super) fn count_text(name: &str, stacks: &[Stack]) -> String {
    let mut counts: Vec<(&Stack, usize)> = Vec::new();
    for s in stacks {
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut out = format!("{name} profile: total {}\n", stacks.len());
    for (stack, n) in counts {
        let _ = write!(out, "{n} @");
        for pc in stack {
            let _ = write!(out, " {pc:#x}");
        }
        out.push_str("\n\n");
    }
    out
}

/// The count the index shows beside a profile.
pub(super) fn count(kind: super::pprof::Kind) -> usize {
    use super::pprof::Kind as K;
    match kind {
        K::Heap | K::Allocs => heap::snapshot().records.len(),
        // Threads are counted from /proc (no signal sent to every thread just to count them).
        K::Goroutine => std::fs::read_dir("/proc/self/task")
            .map(|d| d.count())
            .unwrap_or(0),
        K::ThreadCreate => threads::threadcreate_stacks().len(),
        _ => 0,
    }
}

/// godeltaprof's `delta_heap`: allocations since the previous call to this endpoint (the first call is
/// cumulative), in-use absolute. `state` is this endpoint's own.
pub(super) fn delta_heap(state: &mut Option<HeapSnapshot>) -> Vec<u8> {
    let _ = state;
    // WIRE: crate::profiling::delta::HeapDelta (alloc_* as deltas, inuse_* absolute in one profile) is not
    // in the engine's interface yet; the encoder cannot express it from raw records alone.
    todo!("WIRE: crate::profiling::delta::HeapDelta")
}

/// godeltaprof's `delta_block`/`delta_mutex`: nl6 records no contention, so every delta is the valid
/// empty profile (the per-endpoint state has nothing to remember).
pub(super) fn delta_contention() -> Vec<u8> {
    encode::contention_empty()
}

/// The function containing `addr`, for `/debug/pprof/symbol`.
pub(super) fn symbolize(addr: u64) -> Option<String> {
    let _ = addr;
    // WIRE: crate::profiling::symbols::symbolize(addr) is not in the engine's interface yet.
    todo!("WIRE: crate::profiling::symbols::symbolize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(stack: &[u64], ao: u64, ab: u64, fo: u64, fb: u64) -> HeapRecord {
        HeapRecord {
            stack: stack.to_vec(),
            alloc_objects: ao,
            alloc_bytes: ab,
            free_objects: fo,
            free_bytes: fb,
        }
    }

    #[test]
    fn heap_difference_subtracts_per_stack_and_drops_unchanged() {
        let a = HeapSnapshot {
            rate: 512,
            records: vec![rec(&[1, 2], 10, 1000, 4, 400), rec(&[3], 5, 50, 0, 0)],
        };
        let b = HeapSnapshot {
            rate: 512,
            records: vec![
                rec(&[1, 2], 15, 1500, 9, 900),
                rec(&[3], 5, 50, 0, 0),
                rec(&[4], 1, 8, 0, 0),
            ],
        };
        let d = heap_difference(&a, &b);
        assert_eq!(
            d.records,
            vec![rec(&[1, 2], 5, 500, 5, 500), rec(&[4], 1, 8, 0, 0)]
        );
    }

    #[test]
    fn legacy_texts_have_go_headers() {
        let s = HeapSnapshot {
            rate: 524288,
            records: vec![rec(&[0x10, 0x20], 3, 300, 1, 100)],
        };
        assert_eq!(
            heap_text(&s),
            "heap profile: 2: 200 [3: 300] @ heap/1048576\n2: 200 [3: 300] @ 0x10 0x20\n\n"
        );
        let t = count_text("threadcreate", &[vec![1], vec![2], vec![1]]);
        assert_eq!(t, "threadcreate profile: total 3\n2 @ 0x1\n\n1 @ 0x2\n\n");
    }
}
