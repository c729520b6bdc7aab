//! Which threads one wall-clock tick samples when there are more than the cap, and what each sample
//! stands for: a round-robin window over the tick's thread list, so every thread is sampled equally often
//! over a profile, each sample weighted by `threads / sampled` (the threads the tick skipped are
//! represented by those it took). Pure arithmetic: no clock, no signal, no `/proc`.
#![forbid(unsafe_code)]

/// One tick's choice.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pick {
    /// The tids to sample this tick, in the list's order from the window's start.
    pub(crate) tids: Vec<i32>,
    /// Wall-clock nanoseconds each sample of this tick stands for: the period times `threads / sampled`.
    pub(crate) weight_ns: u64,
}

/// Round-robin over a changing list of threads, at most `cap` a tick.
#[derive(Debug)]
pub(super) struct Picker {
    cap: usize,
    /// Where the next window starts (an index into the next tick's list, modulo its length).
    cursor: usize,
}

impl Picker {
    /// A picker taking at most `cap` threads a tick (`cap` ≥ 1).
    pub(crate) fn new(cap: usize) -> Picker {
        Picker {
            cap: cap.max(1),
            cursor: 0,
        }
    }

    /// The threads of `tids` to sample this tick, and what each sample weighs for a tick `period_ns` long.
    pub(crate) fn pick(&mut self, tids: &[i32], period_ns: u64) -> Pick {
        let n = tids.len();
        if n <= self.cap {
            return Pick {
                tids: tids.to_vec(),
                weight_ns: period_ns,
            };
        }
        let start = self.cursor % n;
        // Indexed, not `cycle().skip()`: the window costs its own length, not the list's.
        let chosen = (0..self.cap).map(|i| tids[(start + i) % n]).collect();
        self.cursor = (start + self.cap) % n;
        // Rounded to the nanosecond: the weights of a tick sum to its threads' time within `cap` ns.
        let weight_ns = (period_ns as u128 * n as u128 + self.cap as u128 / 2) / self.cap as u128;
        Pick {
            tids: chosen,
            weight_ns: weight_ns as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_the_cap_every_thread_weighs_one_period() {
        let mut p = Picker::new(8);
        let got = p.pick(&[1, 2, 3], 1000);
        assert_eq!(
            got,
            Pick {
                tids: vec![1, 2, 3],
                weight_ns: 1000
            }
        );
    }

    #[test]
    fn over_the_cap_the_window_rotates_and_weights_sum_to_all_threads_time() {
        let tids: Vec<i32> = (1..=10).collect();
        let mut p = Picker::new(4);
        let mut seen = [0u32; 11];
        let mut total = 0u64;
        for _ in 0..5 {
            let got = p.pick(&tids, 1000);
            assert_eq!(got.tids.len(), 4);
            assert_eq!(got.weight_ns, 2500, "10 threads / 4 sampled");
            for t in &got.tids {
                seen[*t as usize] += 1;
            }
            total += got.weight_ns * got.tids.len() as u64;
        }
        // 5 ticks × 4 = 20 samples over 10 threads: each exactly twice; the time is 5 ticks × 10 threads.
        assert!(seen[1..].iter().all(|&n| n == 2), "{seen:?}");
        assert_eq!(total, 5 * 10 * 1000);
    }

    #[test]
    fn a_shrinking_list_keeps_the_cursor_in_range() {
        let mut p = Picker::new(2);
        p.pick(&[1, 2, 3, 4, 5], 10);
        p.pick(&[1, 2, 3, 4, 5], 10);
        let got = p.pick(&[7, 8, 9], 10);
        assert_eq!(got.tids.len(), 2);
        assert!(got.tids.iter().all(|t| [7, 8, 9].contains(t)));
        assert_eq!(got.weight_ns, 15);
    }
}
