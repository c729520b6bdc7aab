//! STUB: the sampling global allocator. Owner: engine-heap helper.
use super::Stack;
use std::alloc::{GlobalAlloc, Layout, System};

/// Go's default `MemProfileRate`.
pub const DEFAULT_RATE: usize = 512 * 1024;

/// A `GlobalAlloc` that samples allocations (Go's formula) and passes everything to `A`.
pub struct SamplingAllocator<A = System> {
    inner: A,
}

impl SamplingAllocator<System> {
    pub const fn system() -> Self {
        SamplingAllocator { inner: System }
    }
}

impl<A> SamplingAllocator<A> {
    pub const fn new(inner: A) -> Self {
        SamplingAllocator { inner }
    }
}

// SAFETY: stub forwards to the inner allocator.
unsafe impl<A: GlobalAlloc> GlobalAlloc for SamplingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        unsafe { self.inner.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}

/// Sets the sampling rate in bytes (0 = off).
pub fn set_rate(bytes: usize) {
    let _ = bytes;
    todo!()
}

/// The sampling rate in force.
pub fn rate() -> usize {
    todo!()
}

/// Raw (unscaled) counters of one sampled allocation site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapRecord {
    pub stack: Stack,
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    pub free_objects: u64,
    pub free_bytes: u64,
}

/// Every sampled site since process start, and the rate they were sampled at.
#[derive(Debug, Clone)]
pub struct HeapSnapshot {
    pub rate: usize,
    pub records: Vec<HeapRecord>,
}

/// Reads the sampled sites.
pub fn snapshot() -> HeapSnapshot {
    todo!()
}
