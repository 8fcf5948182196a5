//! The sliding log: a unit allowed at `t` counts while `now - W < t`; a request
//! is allowed while fewer than `limit` units are counted.
//!
//! The log keeps runs of units allowed at the same time as `(time, count)` pairs
//! and the running total, so a batch costs O(1) whatever its size, and the log
//! holds at most `min(limit, W)` runs (each run has a distinct time inside the
//! window and at least one unit), never one entry per request. Expired runs are
//! dropped from the front: amortised O(1), each run is dropped once.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/sliding_log.lua`.

use std::collections::VecDeque;

use super::{Rule, Verdict, saturate};

/// Units allowed at one tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    at: u64,
    count: u64,
}

/// The runs still counted, oldest first, and their total.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlidingLog {
    runs: VecDeque<Run>,
    counted: u64,
}

impl SlidingLog {
    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        // A time older than the newest run is treated as the newest run's time.
        let now = self.runs.back().map_or(now, |newest| newest.at.max(now));
        self.expire(rule.window, now);
        let allowed = units.min(rule.limit - self.counted);
        if allowed > 0 {
            match self.runs.back_mut() {
                Some(newest) if newest.at == now => newest.count += allowed,
                _ => self.runs.push_back(Run {
                    at: now,
                    count: allowed,
                }),
            }
            self.counted += allowed;
        }
        let until_expiry = |run: Option<&Run>| {
            run.map_or(0, |run| {
                saturate(u128::from(run.at) + u128::from(rule.window) - u128::from(now))
            })
        };
        Verdict::new(
            units,
            allowed,
            rule.limit - self.counted,
            until_expiry(self.runs.front()),
            until_expiry(self.runs.back()),
        )
    }

    /// What a request of zero units would see at `now`, without dropping
    /// anything: O(runs expired at `now`).
    pub(crate) fn peek(&self, rule: &Rule, now: u64) -> Verdict {
        let newest = self.runs.back();
        let now = newest.map_or(now, |newest| newest.at.max(now));
        let window = u128::from(rule.window);
        let expired: u64 = self
            .runs
            .iter()
            .take_while(|run| u128::from(run.at) + window <= u128::from(now))
            .map(|run| run.count)
            .sum();
        let counted = self.counted - expired;
        let reset_after = match newest {
            Some(newest) if counted > 0 => {
                saturate(u128::from(newest.at) + window - u128::from(now))
            }
            _ => 0,
        };
        Verdict::new(0, 0, rule.limit - counted, 0, reset_after)
    }

    /// Drops the runs that no longer count at `now`: those with `at + W <= now`.
    fn expire(&mut self, window: u64, now: u64) {
        while let Some(oldest) = self.runs.front() {
            if u128::from(oldest.at) + u128::from(window) > u128::from(now) {
                break;
            }
            self.counted -= oldest.count;
            self.runs.pop_front();
        }
        // Give back memory after a burst so a quiet key stays small.
        if self.runs.capacity() > 64 && self.runs.len() < self.runs.capacity() / 4 {
            self.runs.shrink_to(self.runs.len() * 2);
        }
    }

    /// How many runs the log holds (for memory tests).
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, Resolution};

    fn rule(limit: u64, window_s: u64) -> Rule {
        Rule::compile(
            Policy::sliding_log(limit, window_s).unwrap(),
            Resolution::Seconds,
        )
        .unwrap()
    }

    #[test]
    fn a_batch_is_one_run_whatever_its_size() {
        let rule = rule(crate::MAX_VALUE, 60);
        let mut log = SlidingLog::default();
        log.decide(&rule, 0, 1_000_000_000_000_000);
        log.decide(&rule, 0, 1_000_000_000_000_000);
        assert_eq!(log.runs(), 1);
        log.decide(&rule, 1, 5);
        assert_eq!(log.runs(), 2);
    }

    #[test]
    fn memory_is_bounded_by_the_limit_not_the_requests() {
        let rule = rule(100, 1_000_000);
        let mut log = SlidingLog::default();
        for now in 0..100_000 {
            log.decide(&rule, now, 1);
        }
        // 100 units allowed in the window at most, each run holds at least one.
        assert_eq!(log.runs(), 100);
        // Once the window has passed, the runs go and the memory shrinks.
        log.decide(&rule, 10_000_000, 1);
        assert_eq!(log.runs(), 1);
        assert!(log.runs.capacity() <= 64, "{}", log.runs.capacity());
    }

    #[test]
    fn memory_is_bounded_by_the_window_when_it_is_shorter() {
        let rule = rule(1_000_000, 10);
        let mut log = SlidingLog::default();
        for now in 0..10_000 {
            log.decide(&rule, now, 3);
        }
        // Runs at distinct seconds within a 10 s window: at most 10.
        assert_eq!(log.runs(), 10);
    }
}
