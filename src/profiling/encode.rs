//! STUB: encoding every profile kind. Owner: engine-encode helper.
use super::cpu::CpuProfile;
use super::heap::HeapSnapshot;
use super::threads::ThreadStack;
use super::Stack;

/// heap (no default sample type) or allocs (default alloc_space): same data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapView {
    Heap,
    Allocs,
}

/// gzip'd pprof of a CPU window: sample types samples/count + cpu/nanoseconds, period cpu/nanoseconds,
/// `subsystem` string labels, duration_nanos.
pub fn cpu(profile: &CpuProfile) -> Vec<u8> {
    let _ = profile;
    todo!()
}

/// gzip'd pprof of the heap in Go's shape (four sample types, space/bytes period, `bytes` numeric label).
pub fn heap(snapshot: &HeapSnapshot, view: HeapView) -> Vec<u8> {
    let _ = (snapshot, view);
    todo!()
}

/// gzip'd goroutine/count profile, one sample per distinct (stack, subsystem, thread name).
pub fn goroutine(threads: &[ThreadStack]) -> Vec<u8> {
    let _ = threads;
    todo!()
}

/// Go's `debug=1` text (counts by stack) or `debug=2` text (every thread).
pub fn goroutine_text(threads: &[ThreadStack], debug: u32) -> String {
    let _ = (threads, debug);
    todo!()
}

/// gzip'd threadcreate/count profile.
pub fn threadcreate(stacks: &[Stack]) -> Vec<u8> {
    let _ = stacks;
    todo!()
}

/// gzip'd empty-but-valid block or mutex profile (contentions/count period, contentions + delay types).
pub fn contention_empty() -> Vec<u8> {
    todo!()
}
