//! The CPU sampler's lock-free sample ring: where SIGPROF handlers leave samples for the collector.
//!
//! What it provides: [`Ring`], a fixed array of slots, each with its own state word. Writers (signal
//! handlers, any number at once, on any thread) claim an `EMPTY` slot with a CAS, fill it and publish it
//! `READY`; the single drainer (the CPU collector, under the window mutex) hands `READY` slots to a callback
//! and frees them. A writer that finds no free slot within [`CLAIM_TRIES`] probes drops the sample (the
//! caller counts it) rather than wait: a handler never blocks.
//!
//! Owns: the slot memory (a `static` in the sampler, zero pages touched only as samples land). Never:
//! allocates, locks or panics on the writer path; lets two owners touch a slot's data at once.
use super::MAX_DEPTH;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;
/// Slots probed by a writer before it drops the sample.
const CLAIM_TRIES: usize = 4;

/// One sample as the handler wrote it.
pub(super) struct SlotData {
    /// Timer periods this sample stands for (1 + `si_overrun`).
    pub(super) weight: u32,
    pub(super) label: u16,
    pub(super) depth: u16,
    /// Nonzero: this thread's stack top is unknown (its tid); `rsp` lets the collector learn it.
    pub(super) unknown_tid: i32,
    pub(super) rsp: u64,
    pub(super) frames: [u64; MAX_DEPTH],
}

impl SlotData {
    /// The recorded frames, leaf first.
    pub(super) fn stack(&self) -> &[u64] {
        let depth = (self.depth as usize).min(MAX_DEPTH);
        self.frames.get(..depth).unwrap_or(&[])
    }
}

struct Slot {
    state: AtomicU32,
    data: UnsafeCell<SlotData>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU32::new(EMPTY),
            data: UnsafeCell::new(SlotData {
                weight: 0,
                label: 0,
                depth: 0,
                unknown_tid: 0,
                rsp: 0,
                frames: [0; MAX_DEPTH],
            }),
        }
    }
}

/// `N` sample slots and the writers' claim cursor.
pub(super) struct Ring<const N: usize> {
    next: AtomicUsize,
    slots: [Slot; N],
}

// SAFETY: a slot's data is written only by the writer that moved it EMPTY→WRITING and read only by the
// drainer after it saw READY (Acquire), and freed (Release) only after reading: one owner at a time.
unsafe impl<const N: usize> Sync for Ring<N> {}

impl<const N: usize> Ring<N> {
    pub(super) const fn new() -> Self {
        Ring {
            next: AtomicUsize::new(0),
            slots: [const { Slot::new() }; N],
        }
    }

    /// Claims a slot, lets `fill` write it, publishes it. False when the ring is full. Async-signal-safe.
    #[inline]
    pub(super) fn push(&self, fill: impl FnOnce(&mut SlotData)) -> bool {
        for _ in 0..CLAIM_TRIES {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % N;
            let Some(slot) = self.slots.get(i) else {
                return false;
            };
            if slot
                .state
                .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: we own the slot until we publish it (see `impl Sync`).
                fill(unsafe { &mut *slot.data.get() });
                slot.state.store(READY, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Hands every published slot to `take` and frees it. Only one drainer may run at a time (the caller
    /// serialises drains).
    pub(super) fn drain(&self, mut take: impl FnMut(&SlotData)) -> usize {
        let mut n = 0;
        for slot in &self.slots {
            if slot.state.load(Ordering::Acquire) == READY {
                // SAFETY: READY slots belong to the (single) drainer until stored EMPTY.
                take(unsafe { &*slot.data.get() });
                slot.state.store(EMPTY, Ordering::Release);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_publishes_drains_and_drops_when_full() {
        let ring: Box<Ring<4>> = Box::new(Ring::new());
        for i in 0..4u16 {
            assert!(ring.push(|s| {
                s.label = i;
                s.weight = 1;
                s.depth = 1;
                s.frames[0] = 100 + i as u64;
            }));
        }
        // Full: the fifth push finds no EMPTY slot and drops.
        assert!(!ring.push(|s| s.label = 99));
        let mut seen = Vec::new();
        assert_eq!(ring.drain(|s| seen.push((s.label, s.stack().to_vec()))), 4);
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (0, vec![100]),
                (1, vec![101]),
                (2, vec![102]),
                (3, vec![103])
            ]
        );
        // Drained slots are free again; a slot being written is not drained.
        assert!(ring.push(|s| s.label = 7));
        ring.slots[1].state.store(WRITING, Ordering::Relaxed);
        let mut labels = Vec::new();
        ring.drain(|s| labels.push(s.label));
        assert_eq!(labels, vec![7]);
        assert_eq!(ring.slots[1].state.load(Ordering::Relaxed), WRITING);
    }

    #[test]
    fn stack_is_bounded_by_depth_and_capacity() {
        let ring: Box<Ring<2>> = Box::new(Ring::new());
        assert!(ring.push(|s| {
            s.depth = u16::MAX; // corrupt depth: clamped, never a panic
            s.frames[MAX_DEPTH - 1] = 5;
        }));
        let mut lens = Vec::new();
        ring.drain(|s| lens.push(s.stack().len()));
        assert_eq!(lens, vec![MAX_DEPTH]);
    }

    #[test]
    fn concurrent_writers_never_lose_or_tear_a_published_sample() {
        // 4 writers push 2000 samples each into a 64-slot ring while one drainer empties it: every sample
        // is drained exactly once, whole, or reported dropped by its writer.
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        const PER_WRITER: usize = 2000;
        let ring: Arc<Ring<64>> = Arc::new(Ring::new());
        let dropped = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..4u16)
            .map(|w| {
                let (ring, dropped) = (Arc::clone(&ring), Arc::clone(&dropped));
                std::thread::spawn(move || {
                    for i in 0..PER_WRITER as u64 {
                        let pushed = ring.push(|s| {
                            s.label = w;
                            s.depth = 2;
                            s.frames[0] = i;
                            s.frames[1] = !i;
                        });
                        if !pushed {
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let mut seen = vec![vec![false; PER_WRITER]; 4];
        let drain = |seen: &mut Vec<Vec<bool>>| {
            ring.drain(|s| {
                let (w, i) = (s.label as usize, s.frames[0]);
                assert_eq!(s.stack(), &[i, !i], "torn slot");
                let mark = &mut seen[w][i as usize];
                assert!(!*mark, "sample {w}/{i} drained twice");
                *mark = true;
            })
        };
        while writers.iter().any(|w| !w.is_finished()) {
            drain(&mut seen);
        }
        for w in writers {
            w.join().unwrap();
        }
        drain(&mut seen);
        let drained = seen.iter().flatten().filter(|b| **b).count() as u64;
        assert!(drained > 0);
        assert_eq!(
            drained + dropped.load(Ordering::Relaxed),
            4 * PER_WRITER as u64
        );
    }
}
