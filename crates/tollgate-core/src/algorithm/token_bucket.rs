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
//! Its refund, `give_back`, is `token_bucket_give_back` in the same Lua file, run by
//! `crates/tollgate-redis/lua/give_back.lua`.

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

    /// The earliest time (ticks, never before `now`) at which `units` tokens
    /// are there, counting every reservation already made: the bucket's
    /// "full at" (GCRA's theoretical arrival time) plus their worth, less the
    /// burst. `None` when `units` is more than `burst`, which never fits.
    pub(crate) fn earliest(&self, rule: &Rule, now: u64, units: u64) -> Option<u64> {
        let worth = u128::from(units) * u128::from(rule.window);
        if worth > rule.scaled_capacity {
            return None;
        }
        let start = self.full_at().max(u128::from(now) * u128::from(rule.limit));
        // Allowed at `t` once `start + worth - t * limit <= capacity`.
        let over = (start + worth).saturating_sub(rule.scaled_capacity);
        Some(saturate(divide_rounding_up(over, rule.per_limit)).max(now))
    }

    /// Takes back `units` tokens at `now` (a reservation counted at
    /// `counted_at` given up, or a charge undone): [`TokenBucket::give_back`],
    /// answering the units given back: 0 for a bucket full at `now` already,
    /// and for a reservation with later turns booked behind it (the bucket
    /// full again more than `burst` after `counted_at`).
    pub(crate) fn refund(&mut self, rule: &Rule, now: u64, counted_at: u64, units: u64) -> u64 {
        if self.full_at() <= u128::from(now) * u128::from(rule.limit) {
            return 0;
        }
        // Only the last turns of the queue go back: a bucket that is full
        // again later than `burst` after `counted_at` has turns booked after
        // this one, which giving its tokens back would let a later request
        // share.
        if self.full_at() > u128::from(counted_at) * u128::from(rule.limit) + rule.scaled_capacity {
            return 0;
        }
        self.give_back(rule, now, units);
        units
    }

    /// Takes `units` tokens at `now` whatever the bucket holds (a request's
    /// usage settled after its response), the bucket going at most
    /// `overdraft` tokens into debt: "full at" moves on by their worth, to
    /// at most `now` plus the time to refill `burst + overdraft` tokens
    /// (never back: a deeper debt stays).
    pub(crate) fn overdraw(&mut self, rule: &Rule, now: u64, units: u64, overdraft: u64) {
        let token = u128::from(rule.window);
        let scaled_now = u128::from(now) * u128::from(rule.limit);
        let start = self.full_at().max(scaled_now);
        let deepest = scaled_now
            .saturating_add(rule.scaled_capacity)
            .saturating_add(u128::from(overdraft).saturating_mul(token));
        let charged = start.saturating_add(u128::from(units).saturating_mul(token));
        if units > 0 {
            self.set_full_at(start.max(charged.min(deepest)));
        }
    }

    /// Gives back `units` tokens at `now`, at most `burst` (a bucket holds no
    /// more): the time it is full again moves back by their worth. A bucket
    /// that is full at `now` afterwards is fresh, as if never charged (the
    /// Redis store then drops the key); one full before the refund is left
    /// as it is: no time moves.
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, units: u64) {
        let scaled_now = u128::from(now) * u128::from(rule.limit);
        let full_at = self.full_at();
        if full_at <= scaled_now {
            return;
        }
        let tokens = u128::from(units.min(rule.policy.capacity())) * u128::from(rule.window);
        let full_at = full_at.saturating_sub(tokens);
        if full_at <= scaled_now {
            *self = TokenBucket::default();
        } else {
            self.set_full_at(full_at);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Refunds by hand, on a clock of seconds.

    use super::*;
    use crate::algorithm::State;
    use crate::{Policy, Resolution};

    fn rule(limit: u64, window_s: u64, burst: u64) -> Rule {
        let policy = Policy::token_bucket(limit, window_s, burst).unwrap();
        Rule::compile(policy, Resolution::Seconds).unwrap()
    }

    /// (allowed, rejected, remaining, retry_after, reset_after).
    fn fields(verdict: Verdict) -> [u64; 5] {
        [
            verdict.allowed,
            verdict.rejected,
            verdict.remaining,
            verdict.retry_after,
            verdict.reset_after,
        ]
    }

    #[test]
    fn a_refund_puts_tokens_back_never_past_full() {
        // One token a second, 5 deep.
        let rule = rule(60, 60, 5);
        let mut bucket = State::TokenBucket(TokenBucket::default());
        assert_eq!(fields(bucket.decide(&rule, 100, 5)), [5, 0, 0, 0, 5]);
        // At 101 one token is back; 2 more: 3, full 2 s later.
        assert_eq!(fields(bucket.give_back(&rule, 101, 2)), [0, 0, 3, 0, 2]);
        // 10 more: full, no more, as if never charged.
        assert_eq!(fields(bucket.give_back(&rule, 101, 10)), [0, 0, 5, 0, 0]);
        assert_eq!(bucket, State::TokenBucket(TokenBucket::default()));
        assert_eq!(fields(bucket.decide(&rule, 101, 6)), [5, 1, 0, 1, 5]);
        // A bucket full already is left as it is (full since 106).
        let before = bucket.clone();
        assert_eq!(fields(bucket.give_back(&rule, 200, 1)), [0, 0, 5, 0, 0]);
        assert_eq!(bucket, before);
    }

    #[test]
    fn an_older_now_gets_at_most_burst_tokens_back() {
        // One token per 10 s, 2 deep.
        let rule = rule(1, 10, 2);
        let mut bucket = State::TokenBucket(TokenBucket::default());
        // Both taken at 100: full again at 120.
        assert_eq!(fields(bucket.decide(&rule, 100, 2)), [2, 0, 0, 0, 20]);
        // 3 back at 50 (a clock behind): 2 at most, so full again at 100,
        // not 90; at 50 the bucket still lacks 5 tokens.
        assert_eq!(fields(bucket.give_back(&rule, 50, 3)), [0, 0, 0, 0, 50]);
        // At 95: half a token missing, one whole token there.
        assert_eq!(fields(bucket.peek(&rule, 95)), [0, 0, 1, 0, 5]);
        assert_eq!(fields(bucket.peek(&rule, 100)), [0, 0, 2, 0, 0]);
    }
}
