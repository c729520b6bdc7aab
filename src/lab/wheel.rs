//! The lab scheduler's timer wheel: every device's periodic jobs (millions at a million devices) in one
//! ring of time slots, each a plain `Vec` of the jobs due in it. Adding a job is a push to the end of its
//! slot's vector and taking the jobs due is taking one vector whole, so a turn costs no heap walk (a
//! binary heap of 3 000 000 entries walks about 22 levels on every push and pop), and the jobs of
//! one slot come out together, for the exporters to send as one batch.
//!
//! A slot is [`Wheel::tick`] long (1 ms unless the longest span asks for more so the ring stays at most
//! [`MAX_SLOTS`]); jobs in one slot run in the order they were added, at most one tick after their due
//! time. A job due beyond the span (a stall's catch-up can put one there) is kept in the ring's last slot
//! and comes out early; the scheduler (`schedule.rs`) adds it back, since it is not yet due. Plain values
//! in and out: no clock, no sleeping.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// The most slots the ring holds: a tick of 1 ms covers 65 s, longer spans widen the tick.
pub const MAX_SLOTS: usize = 1 << 16;
/// The finest tick.
pub const MIN_TICK: Duration = Duration::from_millis(1);

/// A ring of slots from `start`, covering `span` ahead of the slot being taken.
#[derive(Debug)]
pub struct Wheel<T> {
    start: Instant,
    tick: Duration,
    slots: Vec<Vec<(Instant, T)>>,
    /// The absolute number of the next slot [`Wheel::take`] returns.
    cursor: u64,
    len: usize,
}

impl<T> Wheel<T> {
    /// A wheel whose jobs are never due more than `span` after the slot being taken.
    pub fn new(start: Instant, span: Duration) -> Wheel<T> {
        let per_slot = span.as_nanos().div_ceil(MAX_SLOTS as u128 - 2);
        let tick = Duration::from_nanos(u64::try_from(per_slot).unwrap_or(u64::MAX)).max(MIN_TICK);
        let n = (span.as_nanos() / tick.as_nanos()) as usize + 2;
        Wheel {
            start,
            tick,
            slots: (0..n.min(MAX_SLOTS)).map(|_| Vec::new()).collect(),
            cursor: 0,
            len: 0,
        }
    }

    pub fn tick(&self) -> Duration {
        self.tick
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot_of(&self, due: Instant) -> u64 {
        let ns = due.saturating_duration_since(self.start).as_nanos();
        u64::try_from(ns / self.tick.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Adds a job due at `due`: in the slot that holds `due`, no earlier than the next slot taken, and
    /// no later than the ring reaches (a due time past the span waits at the ring's far end, and is
    /// still run with its own `due`).
    pub fn add(&mut self, due: Instant, job: T) {
        let n = self.slots.len() as u64;
        let at = self
            .slot_of(due)
            .clamp(self.cursor, self.cursor + n.saturating_sub(1));
        self.slots[(at % n) as usize].push((due, job));
        self.len += 1;
    }

    /// When the next non-empty slot is over (its every job due), or None when the wheel is empty.
    pub fn next_ready(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let n = self.slots.len() as u64;
        let ahead = (0..n).find(|k| !self.slots[((self.cursor + k) % n) as usize].is_empty())?;
        Some(self.end_of(self.cursor + ahead))
    }

    fn end_of(&self, slot: u64) -> Instant {
        let ns = self.tick.as_nanos().saturating_mul(u128::from(slot) + 1);
        self.start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Takes the jobs of the next non-empty slot into `out` (emptied first), moving past it; the jobs
    /// come with their due times, in the order they were added. Jobs added meanwhile land in later
    /// slots. The slot keeps `out`'s old vector, so passing the same one each time reuses capacity.
    pub fn take(&mut self, out: &mut Vec<(Instant, T)>) {
        out.clear();
        if self.len == 0 {
            return;
        }
        let n = self.slots.len() as u64;
        while self.slots[(self.cursor % n) as usize].is_empty() {
            self.cursor += 1;
        }
        std::mem::swap(&mut self.slots[(self.cursor % n) as usize], out);
        self.cursor += 1;
        self.len -= out.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn jobs_come_out_by_slot_in_due_order_across_slots() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0, 100 * MS);
        assert_eq!(w.tick(), MS);
        for (due, job) in [(30, 'c'), (5, 'a'), (5, 'b'), (60, 'd')] {
            w.add(t0 + due * MS, job);
        }
        assert_eq!(
            w.next_ready(),
            Some(t0 + 6 * MS),
            "the 5 ms slot ends at 6 ms"
        );
        let mut out = Vec::new();
        let mut order = Vec::new();
        while !w.is_empty() {
            let ready = w.next_ready().unwrap();
            w.take(&mut out);
            for (due, job) in &out {
                assert!(*due < ready && ready - *due <= MS, "{job} due {due:?}");
                order.push(*job);
            }
        }
        assert_eq!(order, ['a', 'b', 'c', 'd']);
        assert_eq!(w.next_ready(), None);
    }

    #[test]
    fn the_ring_wraps_and_a_late_or_far_job_is_kept() {
        let t0 = Instant::now();
        let mut w = Wheel::new(t0, 10 * MS);
        let mut out = Vec::new();
        // Round after round past the ring's length: each job comes back where it was put.
        let mut due = t0 + 3 * MS;
        for round in 0..50 {
            w.add(due, round);
            w.take(&mut out);
            assert_eq!(out, vec![(due, round)]);
            due += 7 * MS;
        }
        // Due already (before the cursor): the next slot taken. Due past the span: at the far end.
        w.add(t0, 1000);
        w.add(due + 3_600_000 * MS, 2000);
        w.take(&mut out);
        assert_eq!(out, vec![(t0, 1000)]);
        w.take(&mut out);
        assert_eq!(out.len(), 1, "the far job is not lost");
        assert_eq!(out[0].1, 2000);
        assert!(w.is_empty());
    }

    #[test]
    fn a_long_span_widens_the_tick_to_keep_the_ring_bounded() {
        let t0 = Instant::now();
        let w: Wheel<u8> = Wheel::new(t0, Duration::from_secs(3600));
        assert!(w.slots.len() <= MAX_SLOTS);
        assert!(w.tick() > MS && w.tick() < 100 * MS, "{:?}", w.tick());
    }
}
