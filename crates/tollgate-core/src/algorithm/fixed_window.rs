//! The fixed window: `limit` units per window `[k*W, (k+1)*W)` aligned to the
//! epoch. State: the current window's index and the units counted in it.
//!
//! A policy that counts refused units (envoyproxy/ratelimit's rule: `INCRBY`
//! the counter by the hits, then compare) adds every unit asked for to the
//! count, allowed or not, so its count may pass `limit`; otherwise only the
//! allowed units are counted and the count stays at most `limit`. Such a
//! window is past its limit exactly when its `retry_after` is not zero, a look
//! (0 units) included: envoyproxy/ratelimit answers a look (`hits_addend` 0)
//! OK at exactly the limit and OVER_LIMIT past it.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/fixed_window.lua`
//! (`window_outcome`, the arithmetic of both, and `fixed_window`), and for the
//! policies counting refused units (rule code `COUNTING_FIXED_WINDOW`)
//! `crates/tollgate-redis/lua/counting_window.lua`, which keeps the count in a
//! hash. Its refund, `give_back`, is `fixed_window_give_back` and
//! `counting_window_give_back` in those files, run by
//! `crates/tollgate-redis/lua/give_back.lua`.
//!
//! A calendar window ([`Policy::calendar`](crate::Policy::calendar)) counts
//! the same way over the calendar's periods instead of aligned windows: its
//! state's `window_index` is then the end (ticks) of the period counted in
//! (0 when fresh), so that only a request at or past that end asks the
//! calendar for the next boundary. A calendar window never makes a request
//! wait into the next period (a request that does not fit now is refused,
//! `earliest` answers `None`), so it is never reserved ahead. Its Redis twin
//! is `calendar_window` in `crates/tollgate-redis/lua/fixed_window.lua`.

use super::{Rule, Verdict, saturate};

/// Units counted in one aligned window (or one calendar period).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    /// `k` of the window `[k*W, (k+1)*W)` the count belongs to; for a
    /// calendar window, the end (ticks) of the period it belongs to.
    window_index: u64,
    /// Units counted in that window: those allowed, at most `limit`; or, when
    /// the policy counts refused units, every unit asked for (saturating).
    count: u64,
    /// Whether a reservation made before the stored window began charged it
    /// (see [`FixedWindow::reserve`]): until it begins, requests queue behind
    /// ([`FixedWindow::queued_ahead`]). (A bool: the enum `State` keeps its
    /// size, its tag in the bool's spare values.)
    reserved_ahead: bool,
}

impl FixedWindow {
    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        let (index, window_end) = match rule.policy.calendar_window() {
            None => {
                if self.reserved_ahead && self.window_index > now / rule.per_window {
                    return self.queued_ahead(rule, now, units);
                }
                // A time older than the stored window counts against the
                // stored window.
                let index = (now / rule.per_window).max(self.window_index);
                (index, (u128::from(index) + 1) * u128::from(rule.window))
            }
            Some(calendar) => {
                // The stored period, or (at or past its end) the one holding now.
                let end = if now < self.window_index {
                    self.window_index
                } else {
                    calendar.window_at_ticks(now, rule.ticks_per_second).1
                };
                (end, u128::from(end))
            }
        };
        if index != self.window_index {
            self.window_index = index;
            self.count = 0;
            self.reserved_ahead = false;
        }
        let allowed = units.min(rule.limit.saturating_sub(self.count));
        self.count = if rule.policy.counts_refused() {
            self.count.saturating_add(units)
        } else {
            self.count + allowed
        };
        let until_window_end = saturate(window_end - u128::from(now));
        let reset_after = if self.count > 0 { until_window_end } else { 0 };
        let mut verdict = Verdict::new(
            units,
            allowed,
            rule.limit.saturating_sub(self.count),
            until_window_end,
            reset_after,
        );
        if rule.policy.counts_refused() && self.count > rule.limit {
            // Past its limit (only refused units take it there): a look says
            // so too, with the wait until the window ends.
            verdict.retry_after = until_window_end;
        }
        verdict
    }

    /// A decision at `now` while the stored window, reserved into before it
    /// began, lies ahead of `now`'s: nothing is allowed, since a request
    /// that does not wait is a reservation that may not wait, and requests
    /// queue behind those reserved (the count of `now`'s window had no room
    /// for them when they reserved ahead, and the state no longer holds it).
    /// A window ahead that no reservation charged (a decision whose time
    /// came late, from a caller's clock read before another's) counts an
    /// older time as its own, as before. Nothing changes; `retry_after` is the wait until one
    /// unit fits (the stored window's start, or the next window's when it is
    /// full), `reset_after` until its count ends (its start when it counts
    /// nothing). The Redis twin is `fixed_window` in `fixed_window.lua`.
    fn queued_ahead(&self, rule: &Rule, now: u64, units: u64) -> Verdict {
        let start = u128::from(self.window_index) * u128::from(rule.window);
        let end = start + u128::from(rule.window);
        let now = u128::from(now);
        let turn = if self.count < rule.limit { start } else { end };
        let reset = if self.count > 0 { end } else { start };
        Verdict::new(units, 0, 0, saturate(turn - now), saturate(reset - now))
    }

    /// The earliest time (ticks, never before `now`) at which `units` fit:
    /// now, or the start of the stored window when it lies ahead (a window
    /// reserved into already), when they fit in it; else the start of the
    /// window after it (the queue never goes back to an earlier window).
    /// `None` when `units` is more than `limit`, which never fits.
    pub(crate) fn earliest(&self, rule: &Rule, now: u64, units: u64) -> Option<u64> {
        if units > rule.limit {
            return None;
        }
        if rule.policy.calendar_window().is_some() {
            // Now, or never: a calendar window does not wait for its next period.
            let count = if now < self.window_index {
                self.count
            } else {
                0
            };
            return (count.saturating_add(units) <= rule.limit).then_some(now);
        }
        let index = (now / rule.per_window).max(self.window_index);
        let count = if index == self.window_index {
            self.count
        } else {
            0
        };
        let window = u128::from(rule.window);
        if count.saturating_add(units) <= rule.limit {
            Some(saturate(u128::from(index) * window).max(now))
        } else {
            Some(saturate((u128::from(index) + 1) * window))
        }
    }

    /// Charges `units` at `at` (ticks, no earlier than `now`), where
    /// [`FixedWindow::earliest`] found they fit: a decision at `at`, the
    /// window marked reserved ahead when `at` lies in a later window than
    /// `now`.
    pub(crate) fn reserve(&mut self, rule: &Rule, now: u64, at: u64, units: u64) -> Verdict {
        let verdict = self.decide(rule, at, units);
        if rule.policy.calendar_window().is_none() && at / rule.per_window > now / rule.per_window {
            self.reserved_ahead = true;
        }
        verdict
    }

    /// Takes back `units` counted in the window that holds `counted_at`
    /// (ticks): a reservation given up, or a charge undone. 0 when the state
    /// has moved on to another window, the window has ended at `now`, or it
    /// counts fewer units. A count brought
    /// to 0 leaves the state fresh when its window has begun at `now`; a
    /// window still ahead keeps its place at 0, since reserving into it
    /// dropped the count of the window `now` is in (the state holds one
    /// window): requests keep waiting for it rather than count again in the
    /// window already used. The units given back.
    pub(crate) fn refund(&mut self, rule: &Rule, now: u64, counted_at: u64, units: u64) -> u64 {
        if let Some(calendar) = rule.policy.calendar_window() {
            let end = calendar
                .window_at_ticks(counted_at, rule.ticks_per_second)
                .1;
            if end != self.window_index || now >= end || self.count < units {
                return 0;
            }
            self.count -= units;
            if self.count == 0 {
                *self = FixedWindow::default();
            }
            return units;
        }
        let index = counted_at / rule.per_window;
        if index != self.window_index || index < now / rule.per_window || self.count < units {
            return 0;
        }
        self.count -= units;
        if self.count == 0 && self.window_index <= now / rule.per_window {
            *self = FixedWindow::default();
        }
        units
    }

    /// Charges `units` at `now` whatever the window has left (a request's
    /// usage settled after its response: [`State::overdraw`]), the count
    /// going past `limit` by at most `overdraft` (units beyond are not
    /// counted; a count already past it, a counting window's, stays). In the
    /// window a request at `now` counts in: the stored one when `now` is in
    /// it or older, else a new one.
    ///
    /// [`State::overdraw`]: super::State::overdraw
    pub(crate) fn overdraw(&mut self, rule: &Rule, now: u64, units: u64, overdraft: u64) {
        if units == 0 {
            return;
        }
        let index = match rule.policy.calendar_window() {
            None => (now / rule.per_window).max(self.window_index),
            Some(_) if now < self.window_index => self.window_index,
            Some(calendar) => calendar.window_at_ticks(now, rule.ticks_per_second).1,
        };
        if index != self.window_index {
            *self = FixedWindow {
                window_index: index,
                count: 0,
                reserved_ahead: false,
            };
        }
        let ceiling = rule.limit.saturating_add(overdraft);
        self.count = self
            .count
            .max(self.count.saturating_add(units).min(ceiling));
    }

    /// Gives back `units` counted in the window a request at `now` would
    /// count in: the stored window when `now` is in it or older (as
    /// [`FixedWindow::decide`] counts an older `now` there), so the count goes
    /// down by `units`, never below 0 (a count of refused units too). A count
    /// brought to 0 leaves the state fresh, as if never charged (the Redis
    /// store then drops the key), except a window reserved into ahead of
    /// `now`, which keeps its place at 0 as [`FixedWindow::refund`] keeps it. A state of an earlier window counts nothing
    /// at `now` and is left as it is: no time moves.
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, units: u64) {
        if rule.policy.calendar_window().is_some() {
            if now < self.window_index {
                self.count = self.count.saturating_sub(units);
                if self.count == 0 {
                    *self = FixedWindow::default();
                }
            }
            return;
        }
        if now / rule.per_window <= self.window_index {
            self.count = self.count.saturating_sub(units);
            let ahead = self.reserved_ahead && now / rule.per_window < self.window_index;
            if self.count == 0 && !ahead {
                *self = FixedWindow::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The transition by hand, on a clock of seconds.

    use super::*;
    use crate::{Policy, Resolution};

    fn counting(limit: u64, window_s: u64) -> Rule {
        let policy = Policy::fixed_window_counting_refused(limit, window_s).unwrap();
        Rule::compile(policy, Resolution::Seconds).unwrap()
    }

    /// (allowed, rejected, remaining, retry_after, reset_after) and the count.
    fn step(state: &mut FixedWindow, rule: &Rule, now: u64, units: u64) -> [u64; 6] {
        let verdict = state.decide(rule, now, units);
        fields(&verdict, state)
    }

    fn fields(verdict: &Verdict, state: &FixedWindow) -> [u64; 6] {
        [
            verdict.allowed,
            verdict.rejected,
            verdict.remaining,
            verdict.retry_after,
            verdict.reset_after,
            state.count,
        ]
    }

    #[test]
    fn refused_hits_are_counted() {
        // 20 per minute; the window [60, 120).
        let rule = counting(20, 60);
        let mut state = FixedWindow::default();
        // 25 hits at 70: 20 allowed, 5 refused, the counter at 25; the window
        // ends in 50 s.
        assert_eq!(step(&mut state, &rule, 70, 25), [20, 5, 0, 50, 50, 25]);
        // 10 more at 80: none allowed, the counter at 35.
        assert_eq!(step(&mut state, &rule, 80, 10), [0, 10, 0, 40, 40, 35]);
        // 0 units inspect: nothing changes; past the limit, the wait until
        // the window ends (30 s) says so.
        assert_eq!(step(&mut state, &rule, 90, 0), [0, 0, 0, 30, 30, 35]);
        // The next window starts afresh: 3 of 20 at 125, 17 left, 55 s to go.
        assert_eq!(step(&mut state, &rule, 125, 3), [3, 0, 17, 0, 55, 3]);
        // A batch that passes the limit partly: 17 allowed, 3 refused, all 20
        // counted, so the counter is 23.
        assert_eq!(step(&mut state, &rule, 130, 20), [17, 3, 0, 50, 50, 23]);
    }

    #[test]
    fn a_look_tells_at_the_limit_from_past_it() {
        // 3 per minute; the window [0, 60).
        let rule = counting(3, 60);
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 10, 3), [3, 0, 0, 0, 50, 3]);
        // Exactly at the limit: nothing to wait for on a look.
        assert_eq!(step(&mut state, &rule, 20, 0), [0, 0, 0, 0, 40, 3]);
        // One hit refused takes the count past it: the look waits 30 s.
        assert_eq!(step(&mut state, &rule, 25, 1), [0, 1, 0, 35, 35, 4]);
        assert_eq!(step(&mut state, &rule, 30, 0), [0, 0, 0, 30, 30, 4]);
    }

    #[test]
    fn a_plain_fixed_window_counts_only_what_it_allows() {
        let policy = Policy::fixed_window(20, 60).unwrap();
        let rule = Rule::compile(policy, Resolution::Seconds).unwrap();
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 70, 25), [20, 5, 0, 50, 50, 20]);
        assert_eq!(step(&mut state, &rule, 80, 10), [0, 10, 0, 40, 40, 20]);
    }

    /// A refund through [`State::give_back`]: (allowed, rejected,
    /// remaining, retry_after, reset_after) of the look after it, and the
    /// count.
    fn give_back(state: &mut FixedWindow, rule: &Rule, now: u64, units: u64) -> [u64; 6] {
        let mut whole = crate::algorithm::State::FixedWindow(*state);
        let verdict = whole.give_back(rule, now, units);
        if let crate::algorithm::State::FixedWindow(after) = whole {
            *state = after;
        }
        fields(&verdict, state)
    }

    #[test]
    fn a_refund_lowers_the_count_of_the_current_window() {
        // 20 per minute, counting refused hits; the window [60, 120).
        let rule = counting(20, 60);
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 70, 25), [20, 5, 0, 50, 50, 25]);
        // 3 back at 90: 22, still past the limit, so a look waits 30 s.
        assert_eq!(give_back(&mut state, &rule, 90, 3), [0, 0, 0, 30, 30, 22]);
        // 10 back at 95: 12, 8 left.
        assert_eq!(give_back(&mut state, &rule, 95, 10), [0, 0, 8, 0, 25, 12]);
        // More than counted: 0, the whole budget back, nothing to reset.
        assert_eq!(
            give_back(&mut state, &rule, 100, u64::MAX),
            [0, 0, 20, 0, 0, 0]
        );
        assert_eq!(state, FixedWindow::default(), "as if never charged");
        assert_eq!(step(&mut state, &rule, 100, 20), [20, 0, 0, 0, 20, 20]);
    }

    #[test]
    fn a_window_given_everything_back_is_fresh_for_an_older_now_too() {
        let policy = Policy::fixed_window(20, 60).unwrap();
        let rule = Rule::compile(policy, Resolution::Seconds).unwrap();
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 130, 5), [5, 0, 15, 0, 50, 5]);
        assert_eq!(give_back(&mut state, &rule, 130, 5), [0, 0, 20, 0, 0, 0]);
        // A request at 70 now counts in its own window [60, 120), not in
        // [120, 180) as it would while the state held a count there.
        assert_eq!(step(&mut state, &rule, 70, 1), [1, 0, 19, 0, 50, 1]);
    }

    #[test]
    fn a_refund_gives_nothing_to_a_later_window_and_counts_an_older_now_in_the_stored_one() {
        let policy = Policy::fixed_window(20, 60).unwrap();
        let rule = Rule::compile(policy, Resolution::Seconds).unwrap();
        let mut state = FixedWindow::default();
        // 5 in [120, 180).
        assert_eq!(step(&mut state, &rule, 130, 5), [5, 0, 15, 0, 50, 5]);
        // At 70, older: taken from the stored window, whose end is 110 s away.
        assert_eq!(give_back(&mut state, &rule, 70, 2), [0, 0, 17, 0, 110, 3]);
        // At 190, in [180, 240): that window has counted nothing; the stored
        // one is left as it is (no time moves).
        assert_eq!(give_back(&mut state, &rule, 190, 3), [0, 0, 20, 0, 0, 3]);
        assert_eq!(state.window_index, 2);
        assert_eq!(step(&mut state, &rule, 190, 20), [20, 0, 0, 0, 50, 20]);
    }

    #[test]
    fn a_window_reserved_ahead_allows_nothing_before_it_begins() {
        // 3 per minute: [0, 60) full, then 2 reserved into [60, 120).
        let policy = Policy::fixed_window(3, 60).unwrap();
        let rule = Rule::compile(policy, Resolution::Seconds).unwrap();
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 10, 3), [3, 0, 0, 0, 50, 3]);
        assert_eq!(state.earliest(&rule, 20, 2), Some(60));
        state.reserve(&rule, 20, 60, 2);
        // At 20 the window [60, 120) holds 2 of 3, but a request that does
        // not wait queues behind them: refused, its turn at 60 (40 s), the
        // count ends at 120 (100 s); nothing counted.
        assert_eq!(step(&mut state, &rule, 20, 1), [0, 1, 0, 40, 100, 2]);
        // A look says the same, with nothing to wait for.
        assert_eq!(step(&mut state, &rule, 20, 0), [0, 0, 0, 0, 100, 2]);
        // Full ahead: the turn is the window after it, at 120.
        state.reserve(&rule, 30, 60, 1);
        assert_eq!(step(&mut state, &rule, 30, 2), [0, 2, 0, 90, 90, 3]);
        // Once it begins, it decides as usual.
        assert_eq!(step(&mut state, &rule, 60, 1), [0, 1, 0, 60, 60, 3]);
        assert_eq!(step(&mut state, &rule, 125, 1), [1, 0, 2, 0, 55, 1]);
        // Everything given back while a window is reserved ahead: it keeps
        // its place at 0, and requests before it still queue behind.
        let mut ahead = FixedWindow::default();
        step(&mut ahead, &rule, 10, 3);
        ahead.reserve(&rule, 20, 60, 3);
        assert_eq!(give_back(&mut ahead, &rule, 30, 3), [0, 0, 0, 0, 30, 0]);
        assert_eq!(step(&mut ahead, &rule, 40, 1), [0, 1, 0, 20, 20, 0]);
        // A window ahead that no reservation charged (a time that came late)
        // counts an older time in it.
        assert_eq!(step(&mut state, &rule, 100, 1), [1, 0, 1, 0, 80, 2]);
    }

    #[test]
    fn the_counter_saturates() {
        let rule = counting(crate::MAX_VALUE, 1);
        let mut state = FixedWindow::default();
        let [allowed, rejected, remaining, ..] = step(&mut state, &rule, 0, u64::MAX);
        assert_eq!(
            (allowed, rejected, remaining),
            (crate::MAX_VALUE, 1 << 63, 0)
        );
        assert_eq!(state.count, u64::MAX);
        let [allowed, rejected, remaining, ..] = step(&mut state, &rule, 0, u64::MAX);
        assert_eq!((allowed, rejected, remaining), (0, u64::MAX, 0));
        assert_eq!(state.count, u64::MAX);
    }
}
