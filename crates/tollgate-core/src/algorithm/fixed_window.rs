//! The fixed window: `limit` units per window `[k*W, (k+1)*W)` aligned to the
//! epoch. State: the current window's index and the units counted in it.
//!
//! A policy that counts refused units (envoyproxy/ratelimit's rule: `INCRBY`
//! the counter by the hits, then compare) adds every unit asked for to the
//! count, allowed or not, so its count may pass `limit`; otherwise only the
//! allowed units are counted and the count stays at most `limit`.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/fixed_window.lua`
//! (its `counting` flag, rule code `COUNTING_FIXED_WINDOW`, for the policies
//! counting refused units).

use super::{Rule, Verdict, saturate};

/// Units counted in one aligned window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    /// `k` of the window `[k*W, (k+1)*W)` the count belongs to.
    window_index: u64,
    /// Units counted in that window: those allowed, at most `limit`; or, when
    /// the policy counts refused units, every unit asked for (saturating).
    count: u64,
}

impl FixedWindow {
    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        // A time older than the stored window counts against the stored window.
        let index = (now / rule.per_window).max(self.window_index);
        if index != self.window_index {
            self.window_index = index;
            self.count = 0;
        }
        let allowed = units.min(rule.limit.saturating_sub(self.count));
        self.count = if rule.policy.counts_refused() {
            self.count.saturating_add(units)
        } else {
            self.count + allowed
        };
        let window_end = (u128::from(index) + 1) * u128::from(rule.window);
        let until_window_end = saturate(window_end - u128::from(now));
        let reset_after = if self.count > 0 { until_window_end } else { 0 };
        Verdict::new(
            units,
            allowed,
            rule.limit.saturating_sub(self.count),
            until_window_end,
            reset_after,
        )
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
        // 0 units inspect: nothing changes.
        assert_eq!(step(&mut state, &rule, 90, 0), [0, 0, 0, 0, 30, 35]);
        // The next window starts afresh: 3 of 20 at 125, 17 left, 55 s to go.
        assert_eq!(step(&mut state, &rule, 125, 3), [3, 0, 17, 0, 55, 3]);
        // A batch that passes the limit partly: 17 allowed, 3 refused, all 20
        // counted, so the counter is 23.
        assert_eq!(step(&mut state, &rule, 130, 20), [17, 3, 0, 50, 50, 23]);
    }

    #[test]
    fn a_plain_fixed_window_counts_only_what_it_allows() {
        let policy = Policy::fixed_window(20, 60).unwrap();
        let rule = Rule::compile(policy, Resolution::Seconds).unwrap();
        let mut state = FixedWindow::default();
        assert_eq!(step(&mut state, &rule, 70, 25), [20, 5, 0, 50, 50, 20]);
        assert_eq!(step(&mut state, &rule, 80, 10), [0, 10, 0, 40, 40, 20]);
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
