//! The pull surface's calls into the rest of the engine, in one place: what each profile kind is,
//! taking and encoding each profile, the `?seconds=N` deltas, Go's legacy text forms the encoder does not
//! produce, and symbol lookup. Knows nothing of requests or responses ([`super`] does).

use crate::cpu::{self, CpuError};
use crate::delta;
use crate::encode::{self, HeapView};
use crate::heap::{self, HeapSnapshot};
use crate::symbols;
use crate::threads::{self, ThreadStack};
use crate::Stack;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

/// What a profile path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Cpu,
    Wall,
    Heap,
    Allocs,
    Goroutine,
    ThreadCreate,
    Block,
    Mutex,
    DeltaHeap,
    DeltaBlock,
    DeltaMutex,
    Symbol,
}

/// How long a thread may take to report its stack for the goroutine profile.
const THREAD_CAPTURE_TIMEOUT: Duration = Duration::from_secs(1);

/// Starts a CPU profile at the default rate. `Busy` when another CPU profile (or the push's) runs.
/// Dropping the session stops it.
pub(super) fn cpu_start() -> Result<cpu::CpuSession, CpuError> {
    // An executable the engine cannot see well is told at the start, not when the profile is done.
    crate::sight::tell_once();
    cpu::start(cpu::DEFAULT_HZ)
}

/// Stops a CPU profile and encodes what it sampled.
pub(super) fn cpu_encode(session: cpu::CpuSession) -> Vec<u8> {
    encode::cpu(&session.stop())
}

/// What a `?seconds=N` delta subtracts.
pub(super) enum Snapshot {
    Heap(HeapSnapshot),
    Threads(Vec<ThreadStack>),
    Creates(Vec<Stack>),
    Contention,
}

/// The snapshot a delta starts from, for the profile kinds that support `seconds`.
pub(super) fn snapshot(kind: Kind) -> Snapshot {
    use Kind as K;
    match kind {
        K::Heap | K::Allocs => Snapshot::Heap(heap::snapshot()),
        K::Goroutine => Snapshot::Threads(threads::capture_all(THREAD_CAPTURE_TIMEOUT)),
        K::ThreadCreate => Snapshot::Creates(threads::threadcreate_stacks()),
        _ => Snapshot::Contention,
    }
}

/// The profile of what changed between `first` and now (Go's `serveDeltaProfile`): heap values subtracted
/// by the engine's [`delta::heap_between`] (in-use may be negative, as in Go), goroutine and threadcreate
/// counts subtracted per stack (only growth is representable by the encoder), contention empty.
pub(super) fn delta_since(kind: Kind, first: Snapshot, duration: Duration) -> Vec<u8> {
    use Kind as K;
    match (first, snapshot(kind)) {
        (Snapshot::Heap(a), Snapshot::Heap(b)) => {
            let view = if kind == K::Allocs {
                HeapView::Allocs
            } else {
                HeapView::Heap
            };
            delta::heap_between(&a, &b, duration, view)
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

/// The encoded profile of a named profile, `debug=0`.
pub(super) fn proto(kind: Kind) -> Vec<u8> {
    use Kind as K;
    match kind {
        K::Heap => encode::heap(&heap::snapshot(), HeapView::Heap),
        K::Allocs => encode::heap(&heap::snapshot(), HeapView::Allocs),
        K::Goroutine => encode::goroutine(&threads::capture_all(THREAD_CAPTURE_TIMEOUT)),
        K::ThreadCreate => encode::threadcreate(&threads::threadcreate_stacks()),
        _ => encode::contention_empty(),
    }
}

/// Go's legacy text form (`debug=N`, N ≠ 0).
pub(super) fn text(kind: Kind, debug: i64) -> String {
    use Kind as K;
    match kind {
        K::Goroutine => {
            let level = if debug >= 2 { 2 } else { 1 };
            encode::goroutine_text(&threads::capture_all(THREAD_CAPTURE_TIMEOUT), level)
        }
        K::Heap | K::Allocs => encode::heap_text(&heap::snapshot()),
        K::ThreadCreate => count_text("threadcreate", &threads::threadcreate_stacks()),
        K::Mutex => "--- mutex:\ncycles/second=1000000000\nsampling period=0\n".to_string(),
        _ => "--- contention:\ncycles/second=1000000000\n".to_string(),
    }
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
pub(super) fn count(kind: Kind) -> usize {
    use Kind as K;
    match kind {
        K::Heap | K::Allocs => heap::snapshot().records.len(),
        // Threads are counted from /proc (no signal sent to every thread just to count them).
        K::Goroutine | K::Wall => std::fs::read_dir("/proc/self/task")
            .map(|d| d.count())
            .unwrap_or(0),
        K::ThreadCreate => threads::threadcreate_stacks().len(),
        _ => 0,
    }
}

/// The function containing `addr`, for `/debug/pprof/symbol`.
pub(super) fn symbolize(addr: u64) -> Option<String> {
    symbols::symbolize(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_text_has_gos_header_and_order() {
        let t = count_text("threadcreate", &[vec![1], vec![2], vec![1]]);
        assert_eq!(t, "threadcreate profile: total 3\n2 @ 0x1\n\n1 @ 0x2\n\n");
    }
}
