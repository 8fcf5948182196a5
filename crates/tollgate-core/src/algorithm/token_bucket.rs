//! The token bucket: `burst` tokens, full at the first request, refilled
//! continuously at `limit / W` tokens per tick, one token per unit.
//!
//! Exact arithmetic by scaling: time is counted in ticks × `limit` and one token
//! is worth `W` of those scaled units, so the refill in `d` ticks is `d * limit`
//! scaled units and every quantity is an integer. The state is one number, the
//! scaled time at which the bucket is full again (the "theoretical arrival time"
//! of GCRA). Products of two 63-bit values fit in 126 bits, so u128 never
//! overflows for valid policies and timestamps.
//! Its Redis twin, the same transition in Lua: `crates/tollgate-redis/lua/token_bucket.lua`.

use super::{Rule, Verdict, divide, divide_rounding_up, saturate};

/// The scaled time (ticks × `limit`) at which the bucket is full again; 0 for a
/// bucket that has never been used, which is full. Kept as two 64-bit halves so
/// the state is 8-byte aligned and a tracked key stays small.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    full_at_high: u64,
    full_at_low: u64,
}

impl TokenBucket {
    fn full_at(&self) -> u128 {
        (u128::from(self.full_at_high) << 64) | u128::from(self.full_at_low)
    }

    fn set_full_at(&mut self, full_at: u128) {
        self.full_at_high = (full_at >> 64) as u64;
        self.full_at_low = full_at as u64;
    }

    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        let limit = u128::from(rule.limit);
        let token = u128::from(rule.window);
        let capacity = rule.scaled_capacity;
        let scaled_now = u128::from(now) * limit;
        // Never fuller than full: time past `full_at` adds nothing.
        let start = self.full_at().max(scaled_now);
        let available = divide(capacity.saturating_sub(start - scaled_now), rule.per_window);
        let allowed = u64::try_from(available).map_or(units, |available| units.min(available));
        let full_at = start + u128::from(allowed) * token;
        self.set_full_at(full_at);
        let deficit = full_at - scaled_now;
        // Taking `allowed` whole tokens leaves exactly `available - allowed` whole.
        let remaining = saturate(available - u128::from(allowed));
        let retry_after = if allowed < units {
            // One whole token is there once the deficit is at most `capacity - token`.
            saturate(divide_rounding_up(
                deficit.saturating_sub(capacity - token),
                rule.per_limit,
            ))
        } else {
            0
        };
        let reset_after = saturate(divide_rounding_up(deficit, rule.per_limit));
        Verdict::new(units, allowed, remaining, retry_after, reset_after)
    }
}
