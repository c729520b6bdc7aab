//! What the lab scheduler does with a periodic job it reaches late: [`turn`] decides, from plain values
//! (`due`, `period`, `now`), whether the job runs now or skips the periods it missed; [`Skipped`] adds
//! up the skips of one stall for the single log line that reports it.
//!
//! A process stopped for 30 s (`SIGSTOP`, a suspended VM, a debugger) wakes with every device's syslog,
//! flow and trap periods of those 30 s behind it. Replaying them sends a stall's worth of packets at once
//! (about 15× the steady rate for seconds with 30 000 devices); skipping them keeps the first second
//! after the stall at most [`LATE_SLACK`] worth of periods above the steady rate. Each job keeps its phase
//! (its next turn is `due + k × period`), so devices still do not fire in lockstep.
//!
//! Never here: sleeping, sending, or the timer wheel itself (see `wheel.rs` and `schedule.rs`).
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

/// How late a job may run and still count as on time: scheduling jitter and a busy round stay under it;
/// a stall goes over it. A quarter of a second of late jobs on top of the steady rate keeps the first
/// second after a stall under 1.25× that rate.
pub const LATE_SLACK: Duration = Duration::from_millis(250);

/// What to do with a job due at `due` when the scheduler reaches it at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// On time (or late by at most the slack): run it now.
    Run,
    /// Missed: do not run it; its next turn is `next` (after `now`, on its phase), `missed` periods later.
    Skip { next: Instant, missed: u64 },
}

/// Decides a job's turn. A job later than `min(LATE_SLACK, period)` skips every period that has
/// already passed and comes back at its first turn at or after `now`.
pub fn turn(due: Instant, period: Duration, now: Instant) -> Turn {
    let late = now.saturating_duration_since(due);
    if late <= LATE_SLACK.min(period) || period.is_zero() {
        return Turn::Run;
    }
    // ceil(late / period) periods bring the turn to `now` or just after it.
    let missed = late.as_nanos().div_ceil(period.as_nanos());
    let missed = u64::try_from(missed).unwrap_or(u64::MAX);
    let next = u32::try_from(missed)
        .ok()
        .and_then(|k| period.checked_mul(k))
        .and_then(|step| due.checked_add(step))
        .unwrap_or(now);
    Turn::Skip { next, missed }
}

/// How often at most the skips are reported: a scheduler that stays behind (a starved process) skips on
/// and on, and says so once per this interval, not once per on-time job.
pub const SAY_EVERY: Duration = Duration::from_secs(10);

/// The skips of one stall, reported when the scheduler is on time again, at most once per [`SAY_EVERY`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Missed periods skipped (all jobs together) since the last line.
    pub periods: u64,
    /// The latest a skipped job was reached.
    pub worst: Duration,
    /// When the last line was given.
    said_at: Option<Instant>,
}

impl Skipped {
    /// Counts one skip of `missed` periods of a job due at `due`, reached at `now`.
    pub fn add(&mut self, due: Instant, now: Instant, missed: u64) {
        self.periods = self.periods.saturating_add(missed);
        self.worst = self.worst.max(now.saturating_duration_since(due));
    }

    /// The log line for the skips so far, and a fresh count; None when nothing was skipped or a line was
    /// given less than [`SAY_EVERY`] before `now` (the count then goes on).
    pub fn take_line(&mut self, now: Instant) -> Option<String> {
        let recent = self
            .said_at
            .is_some_and(|t| now.saturating_duration_since(t) < SAY_EVERY);
        if self.periods == 0 || recent {
            return None;
        }
        let s = std::mem::replace(
            self,
            Skipped {
                said_at: Some(now),
                ..Skipped::default()
            },
        );
        Some(format!(
            "lab: the scheduler ran {:.1} s late (the process was stopped or starved): skipped {} missed periods rather than replay them",
            s.worst.as_secs_f64(),
            s.periods
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn on_time_and_slightly_late_jobs_run() {
        let t0 = Instant::now();
        assert_eq!(turn(t0, 10 * S, t0), Turn::Run);
        assert_eq!(turn(t0 + S, 10 * S, t0), Turn::Run, "early");
        assert_eq!(turn(t0, 10 * S, t0 + LATE_SLACK), Turn::Run);
    }

    #[test]
    fn a_stall_skips_every_missed_period_and_keeps_the_phase() {
        let t0 = Instant::now();
        // Due at t0, period 10 s, reached 30.5 s later: periods at t0, +10, +20, +30 are gone; next +40.
        let now = t0 + Duration::from_millis(30_500);
        assert_eq!(
            turn(t0, 10 * S, now),
            Turn::Skip {
                next: t0 + 40 * S,
                missed: 4
            }
        );
        // Late by exactly whole periods: the next turn is now, on the phase.
        assert_eq!(
            turn(t0, 10 * S, t0 + 30 * S),
            Turn::Skip {
                next: t0 + 30 * S,
                missed: 3
            }
        );
    }

    #[test]
    fn a_short_period_uses_its_own_length_as_the_slack() {
        let t0 = Instant::now();
        let p = Duration::from_millis(100);
        assert_eq!(turn(t0, p, t0 + Duration::from_millis(90)), Turn::Run);
        let now = t0 + Duration::from_millis(150);
        assert_eq!(
            turn(t0, p, now),
            Turn::Skip {
                next: t0 + 2 * p,
                missed: 2
            }
        );
    }

    /// The scheduler's rate after a stall, from plain values: 1 000 jobs of period 1 s at spread phases,
    /// a 30 s stop, then one second of turns counted. Replaying would run 31 turns per job; skipping
    /// keeps the first second at most 1 + slack/period of the steady rate.
    #[test]
    fn the_first_second_after_a_30_s_stop_stays_under_twice_the_steady_rate() {
        let t0 = Instant::now();
        let jobs = 1_000u64;
        let mut due: Vec<Instant> = (0..jobs)
            .map(|j| t0 + S.mul_f64(j as f64 / jobs as f64))
            .collect();
        let resume = t0 + 30 * S;
        let mut ran = 0u64;
        let mut skipped = Skipped::default();
        // Every turn that falls in [resume, resume + 1 s), the scheduler reaching each at its due time
        // or at `resume`, whichever is later.
        for d in due.iter_mut() {
            for _ in 0..100 {
                let now = (*d).max(resume);
                if now >= resume + S {
                    break;
                }
                match turn(*d, S, now) {
                    Turn::Run => {
                        ran += 1;
                        *d += S;
                    }
                    Turn::Skip { next, missed } => {
                        skipped.add(*d, now, missed);
                        *d = next;
                    }
                }
            }
        }
        assert!(ran <= jobs * 5 / 4 + 1, "{ran} turns in the first second");
        assert!(ran >= jobs, "{ran} turns: the steady rate must go on");
        let said = t0 + 31 * S;
        let line = skipped.take_line(said).expect("a skip is reported");
        assert!(line.contains("30.0 s late"), "{line}");
        assert_eq!(skipped.take_line(said), None, "reported once");
    }

    #[test]
    fn a_scheduler_that_stays_behind_says_so_once_per_interval() {
        let t0 = Instant::now();
        let mut skipped = Skipped::default();
        skipped.add(t0, t0 + S, 1);
        assert!(skipped.take_line(t0 + S).is_some());
        // Behind again and again within the interval: no line, the count goes on.
        for k in 2..9 {
            skipped.add(t0 + (k - 1) * S, t0 + k * S, 1);
            assert_eq!(skipped.take_line(t0 + k * S), None, "second {k}");
        }
        let line = skipped
            .take_line(t0 + S + SAY_EVERY)
            .expect("the next interval's line");
        assert!(line.contains("skipped 7 missed periods"), "{line}");
    }
}
