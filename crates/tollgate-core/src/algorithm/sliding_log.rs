//! The sliding log: a unit allowed at `t` counts while `now - W < t`; a request
//! is allowed while fewer than `limit` units are counted.
//!
//! The log keeps runs of units allowed at the same time as `(time, count)` pairs
//! and the running total, so a batch costs O(1) whatever its size, and the log
//! holds at most `min(limit, W)` runs (each run has a distinct time inside the
//! window and at least one unit), never one entry per request; reservations
//! (`reserve`, runs at times ahead) add at most `limit` runs per window of
//! the delay waited. Expired runs are
//! dropped from the front: amortised O(1), each run is dropped once.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/sliding_log.lua`.
//! Its refund, `give_back`, is `sliding_log_give_back` in the same Lua file, run by
//! `crates/tollgate-redis/lua/give_back.lua`.

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
    /// The units of the runs held. Wider than a count of units: reserved
    /// runs ahead are held beside those that stop counting before them, so
    /// the sum may pass `limit`, several times over (it is at most `limit`
    /// as of the newest run).
    counted: u128,
    /// The latest time a reservation charged a run at, when later than the
    /// reservation's `now` (see [`SlidingLog::reserve`]); 0 when none:
    /// before it, requests queue behind ([`SlidingLog::queued_ahead`]).
    reserved_until: u64,
}

impl SlidingLog {
    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        if now < self.reserved_until {
            return self.queued_ahead(rule, now, units);
        }
        // A time older than the newest run is treated as the newest run's time.
        let now = self.runs.back().map_or(now, |newest| newest.at.max(now));
        self.expire(rule.window, now);
        let allowed = units.min(rule.limit.saturating_sub(self.counted_now()));
        if allowed > 0 {
            match self.runs.back_mut() {
                Some(newest) if newest.at == now => newest.count += allowed,
                _ => self.runs.push_back(Run {
                    at: now,
                    count: allowed,
                }),
            }
            self.counted += u128::from(allowed);
        }
        let until_expiry = |run: Option<&Run>| {
            run.map_or(0, |run| {
                saturate(u128::from(run.at) + u128::from(rule.window) - u128::from(now))
            })
        };
        // In debt (units charged past the limit by `overdraw`), one unit
        // fits only once enough of the oldest runs have stopped counting.
        let retry_after = if self.counted_now() > rule.limit {
            self.earliest(rule, now, 1).map_or(0, |at| at - now)
        } else {
            until_expiry(self.runs.front())
        };
        Verdict::new(
            units,
            allowed,
            rule.limit.saturating_sub(self.counted_now()),
            retry_after,
            until_expiry(self.runs.back()),
        )
    }

    /// Charges `units` at `now` whatever the log has left (a request's usage
    /// settled after its response), the units counted going past `limit` by
    /// at most `overdraft` (units beyond are not counted): one run at `now`
    /// (at the newest run's time when `now` is older, as a decision takes it).
    /// While turns are reserved ahead of `now`, nothing is dropped first
    /// (as a decision then drops nothing: the Redis twin reads the log as
    /// it is), and the run goes at the newest run's time.
    pub(crate) fn overdraw(&mut self, rule: &Rule, now: u64, units: u64, overdraft: u64) {
        if units == 0 {
            // Nothing charged, and nothing dropped: no time moves.
            return;
        }
        let reserved_ahead = now < self.reserved_until;
        let now = self.runs.back().map_or(now, |newest| newest.at.max(now));
        if !reserved_ahead {
            self.expire(rule.window, now);
        }
        let ceiling = rule.limit.saturating_add(overdraft);
        let added = units.min(ceiling.saturating_sub(self.counted_now()));
        if added == 0 {
            return;
        }
        match self.runs.back_mut() {
            Some(newest) if newest.at == now => newest.count += added,
            _ => self.runs.push_back(Run {
                at: now,
                count: added,
            }),
        }
        self.counted += u128::from(added);
    }

    /// A decision at `now` before the time of a reserved run (see
    /// [`SlidingLog::reserve`]): nothing is allowed, since a request that
    /// does not wait is a reservation that may not wait, and requests queue
    /// behind those reserved. (A time older than a newest run that no
    /// reservation charged, a caller's clock read before another's, is taken
    /// as the newest run's time, as before.) Nothing changes;
    /// `retry_after` is the wait until one unit fits
    /// ([`SlidingLog::earliest`]), `reset_after` until the newest run stops
    /// counting. The Redis twin is `sliding_log` in `sliding_log.lua`.
    fn queued_ahead(&self, rule: &Rule, now: u64, units: u64) -> Verdict {
        let newest = self.runs.back().map_or(now, |newest| newest.at);
        let turn = self.earliest(rule, now, 1).unwrap_or(newest);
        let reset = saturate(u128::from(newest) + u128::from(rule.window) - u128::from(now));
        Verdict::new(units, 0, 0, turn - now, reset)
    }

    /// What a request of zero units would see at `now`, without dropping
    /// anything: O(runs expired at `now`).
    pub(crate) fn peek(&self, rule: &Rule, now: u64) -> Verdict {
        if now < self.reserved_until {
            return self.queued_ahead(rule, now, 0);
        }
        let newest = self.runs.back();
        let now = newest.map_or(now, |newest| newest.at.max(now));
        let window = u128::from(rule.window);
        let expired: u128 = self
            .runs
            .iter()
            .take_while(|run| u128::from(run.at) + window <= u128::from(now))
            .map(|run| u128::from(run.count))
            .sum();
        let counted = saturate(self.counted - expired);
        let reset_after = match newest {
            Some(newest) if counted > 0 => {
                saturate(u128::from(newest.at) + window - u128::from(now))
            }
            _ => 0,
        };
        Verdict::new(0, 0, rule.limit.saturating_sub(counted), 0, reset_after)
    }

    /// The earliest time (ticks, never before `now` nor before the newest
    /// run, so that waiting requests keep their order) at which `units` fit:
    /// when enough of the oldest runs have stopped counting. `None` when
    /// `units` is more than `limit`, which never fits.
    pub(crate) fn earliest(&self, rule: &Rule, now: u64, units: u64) -> Option<u64> {
        if units > rule.limit {
            return None;
        }
        let mut at = self.runs.back().map_or(now, |newest| newest.at.max(now));
        let mut counted = self.counted;
        for run in &self.runs {
            if counted + u128::from(units) <= u128::from(rule.limit) {
                break;
            }
            counted -= u128::from(run.count);
            at = at.max(saturate(u128::from(run.at) + u128::from(rule.window)));
        }
        Some(at)
    }

    /// Charges `units` at `at` (ticks, no earlier than `now` nor than the
    /// newest run; [`SlidingLog::earliest`] found that they fit there): a
    /// reservation. Runs are dropped only as of `now`, not `at`, so that
    /// when the reservation is given back ([`SlidingLog::refund`]) the units
    /// that still count at `now` are there; until then the total may exceed
    /// `limit` by units that stop counting before `at`, which every
    /// decision drops first (it never looks before the newest run). The
    /// verdict is what a decision at `at` sees.
    pub(crate) fn reserve(&mut self, rule: &Rule, now: u64, at: u64, units: u64) -> Verdict {
        let reserved_from = now;
        let now = self.runs.back().map_or(now, |newest| newest.at.max(now));
        self.expire(rule.window, now);
        let at = at.max(now);
        if at > reserved_from {
            self.reserved_until = self.reserved_until.max(at);
        }
        match self.runs.back_mut() {
            Some(newest) if newest.at == at => newest.count += units,
            _ => self.runs.push_back(Run { at, count: units }),
        }
        self.counted += u128::from(units);
        let seen = self.peek(rule, at);
        Verdict::new(units, units, seen.remaining, 0, seen.reset_after)
    }

    /// Takes back `units` of the run at `counted_at` (ticks): a reservation
    /// given up, or a charge undone. 0 when that run is gone, holds fewer,
    /// or no longer counts at `now`; a run emptied goes, and a log left
    /// counting nothing at `now` is cleared. The units given back.
    pub(crate) fn refund(&mut self, rule: &Rule, now: u64, counted_at: u64, units: u64) -> u64 {
        let window = u128::from(rule.window);
        let counts_at_now = |run: &Run| u128::from(run.at) + window > u128::from(now);
        let Some(position) = self.runs.iter().rposition(|run| run.at <= counted_at) else {
            return 0;
        };
        let run = &mut self.runs[position];
        if run.at != counted_at || run.count < units || !counts_at_now(run) {
            return 0;
        }
        run.count -= units;
        self.counted -= u128::from(units);
        if run.count == 0 {
            self.runs.remove(position);
        }
        match self.runs.back() {
            Some(newest) if counts_at_now(newest) => {
                // No turn is reserved past the newest run left.
                self.reserved_until = self.reserved_until.min(newest.at);
            }
            _ => *self = SlidingLog::default(),
        }
        units
    }

    /// Gives back up to `units` of the newest units still counted at `now`
    /// (nothing while turns are reserved ahead of `now`: those are the
    /// newest units, and waiting requests hold them):
    /// runs are emptied from the newest back, and a run emptied goes. When no
    /// unit counts at `now` afterwards, the log is cleared, as if never
    /// charged (the Redis store then drops the key); otherwise expired runs
    /// are left for the next decision to drop: no time moves. (A `now` older
    /// than the newest run needs no clamp, unlike in `decide`: every run kept
    /// counts at the newest run's time.)
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, mut units: u64) {
        if now < self.reserved_until {
            // Its newest units are turns waiting requests hold.
            return;
        }
        let now = u128::from(now);
        let counts_at_now = |run: &Run| u128::from(run.at) + u128::from(rule.window) > now;
        while units > 0 {
            let Some(newest) = self.runs.back_mut() else {
                break;
            };
            if !counts_at_now(newest) {
                // Expired, and so is every older run.
                break;
            }
            let taken = newest.count.min(units);
            newest.count -= taken;
            self.counted -= u128::from(taken);
            units -= taken;
            if newest.count == 0 {
                self.runs.pop_back();
            }
        }
        if !self.runs.back().is_some_and(counts_at_now) {
            *self = SlidingLog::default();
        }
    }

    /// The units held, once expired runs are dropped as of the newest run
    /// (what a decision counts): at most `limit`, so it fits.
    fn counted_now(&self) -> u64 {
        saturate(self.counted)
    }

    /// Drops the runs that no longer count at `now`: those with `at + W <= now`.
    fn expire(&mut self, window: u64, now: u64) {
        while let Some(oldest) = self.runs.front() {
            if u128::from(oldest.at) + u128::from(window) > u128::from(now) {
                break;
            }
            self.counted -= u128::from(oldest.count);
            self.runs.pop_front();
        }
        if self.runs.is_empty() {
            // Nothing held: no turn reserved either.
            self.reserved_until = 0;
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

    /// Decides `units` at `now`: (allowed, rejected, remaining, retry_after,
    /// reset_after).
    fn step(log: &mut SlidingLog, rule: &Rule, now: u64, units: u64) -> [u64; 5] {
        let verdict = log.decide(rule, now, units);
        [
            verdict.allowed,
            verdict.rejected,
            verdict.remaining,
            verdict.retry_after,
            verdict.reset_after,
        ]
    }

    /// A refund through [`State::give_back`](crate::algorithm::State): the
    /// look after it, as [`step`] gives it, and the runs left.
    fn give_back(
        log: &mut SlidingLog,
        rule: &Rule,
        now: u64,
        units: u64,
    ) -> ([u64; 5], Vec<(u64, u64)>) {
        let mut whole = crate::algorithm::State::SlidingLog(Box::new(log.clone()));
        let verdict = whole.give_back(rule, now, units);
        if let crate::algorithm::State::SlidingLog(after) = whole {
            *log = *after;
        }
        let runs = log.runs.iter().map(|run| (run.at, run.count)).collect();
        (
            [
                verdict.allowed,
                verdict.rejected,
                verdict.remaining,
                verdict.retry_after,
                verdict.reset_after,
            ],
            runs,
        )
    }

    #[test]
    fn a_refund_drops_the_newest_units_first() {
        // 5 per 10 s.
        let rule = rule(5, 10);
        let mut log = SlidingLog::default();
        assert_eq!(step(&mut log, &rule, 0, 2), [2, 0, 3, 0, 10]);
        assert_eq!(step(&mut log, &rule, 3, 2), [2, 0, 1, 0, 10]);
        assert_eq!(step(&mut log, &rule, 5, 1), [1, 0, 0, 0, 10]);
        // 2 back at 6: the unit of 5 and one of 3; 2 left, the newest (3)
        // counts 7 s more.
        assert_eq!(
            give_back(&mut log, &rule, 6, 2),
            ([0, 0, 2, 0, 7], vec![(0, 2), (3, 1)])
        );
        // At 2, older than the newest run: the unit of 3 goes.
        assert_eq!(
            give_back(&mut log, &rule, 2, 1),
            ([0, 0, 3, 0, 8], vec![(0, 2)])
        );
        // At 10 the units of 0 count no more: nothing to give back, and
        // nothing counts: the log is cleared.
        assert_eq!(give_back(&mut log, &rule, 10, 4), ([0, 0, 5, 0, 0], vec![]));
        // So a request at 5 (older) is taken at 5, and counts until 15.
        assert_eq!(step(&mut log, &rule, 5, 5), [5, 0, 0, 0, 10]);
    }

    #[test]
    fn a_refund_stops_at_expired_runs() {
        let rule = rule(5, 10);
        let mut log = SlidingLog::default();
        step(&mut log, &rule, 0, 1);
        step(&mut log, &rule, 8, 2);
        step(&mut log, &rule, 9, 1);
        // At 12 the run of 0 has expired: of 3 asked, the 1 of 9 and 2 of 8
        // go back; nothing counts then, so the expired run goes too.
        assert_eq!(give_back(&mut log, &rule, 12, 3), ([0, 0, 5, 0, 0], vec![]));
        // Again: at 12, 1 of 3 back; the expired run of 0 stays for the
        // next decision to drop.
        step(&mut log, &rule, 0, 1);
        step(&mut log, &rule, 8, 3);
        assert_eq!(
            give_back(&mut log, &rule, 12, 1),
            ([0, 0, 3, 0, 6], vec![(0, 1), (8, 2)])
        );
        // At 9, older, the unit of 0 still counts.
        assert_eq!(step(&mut log, &rule, 9, 5), [2, 3, 0, 1, 10]);
        // An empty log has nothing to give.
        let mut empty = SlidingLog::default();
        assert_eq!(
            give_back(&mut empty, &rule, 3, 1),
            ([0, 0, 5, 0, 0], vec![])
        );
    }

    #[test]
    fn a_run_reserved_ahead_allows_nothing_before_it() {
        // 2 per 10 s: 2 at 0, then 1 reserved at 10 (when the first stop
        // counting).
        let rule = rule(2, 10);
        let mut log = SlidingLog::default();
        assert_eq!(step(&mut log, &rule, 0, 2), [2, 0, 0, 0, 10]);
        assert_eq!(log.earliest(&rule, 4, 1), Some(10));
        log.reserve(&rule, 4, 10, 1);
        // At 6 a request that does not wait queues behind the run at 10:
        // refused, its turn at 10 (4 s), the newest run counting until 20
        // (14 s); nothing counted.
        assert_eq!(step(&mut log, &rule, 6, 1), [0, 1, 0, 4, 14]);
        assert_eq!(log.peek(&rule, 6), log.clone().decide(&rule, 6, 0));
        assert_eq!(step(&mut log, &rule, 6, 0), [0, 0, 0, 0, 14]);
        // A refund before the reserved turn gives nothing: the newest unit
        // is the waiting request's.
        let (look, runs) = give_back(&mut log, &rule, 7, 1);
        assert_eq!((look, runs), ([0, 0, 0, 0, 13], vec![(0, 2), (10, 1)]));
        // At 10 the run of 0 stops counting and the reserved unit counts: 1
        // of 2 left.
        assert_eq!(step(&mut log, &rule, 10, 1), [1, 0, 0, 0, 10]);
        assert_eq!(step(&mut log, &rule, 10, 1), [0, 1, 0, 10, 10]);
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
