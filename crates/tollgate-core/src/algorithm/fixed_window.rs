//! The fixed window: `limit` units per window `[k*W, (k+1)*W)` aligned to the
//! epoch. State: the current window's index and the units counted in it.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/fixed_window.lua`.

use super::{Rule, Verdict, saturate};

/// Units counted in one aligned window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    /// `k` of the window `[k*W, (k+1)*W)` the count belongs to.
    window_index: u64,
    /// Units allowed in that window, at most `limit`.
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
        let allowed = units.min(rule.limit - self.count);
        self.count += allowed;
        let window_end = (u128::from(index) + 1) * u128::from(rule.window);
        let until_window_end = saturate(window_end - u128::from(now));
        let reset_after = if self.count > 0 { until_window_end } else { 0 };
        Verdict::new(
            units,
            allowed,
            rule.limit - self.count,
            until_window_end,
            reset_after,
        )
    }
}
