//! What `tollgate rlqs` (Envoy's Rate Limit Quota Service) tells one Envoy to
//! enforce for one bucket: its part of the bucket's limit as a token bucket
//! Envoy runs locally, or a blanket rule.
//!
//! A limit is shared as its rate ([`QuotaRate`]): `tokens` every `per_s`
//! seconds for the whole fleet, split by demand into whole tokens per `per_s`
//! seconds ([`crate::QuotaDemand::assign`]). A stream's part becomes
//! a token bucket of `part` tokens per fill, a fill every `per_s` seconds, so
//! that the rates Envoy runs add up to the limit's rate exactly (Envoy 1.40
//! refills continuously at `tokens_per_fill / fill_interval` a second, its
//! `fill_interval` cut to whole seconds). The bucket's size, `max_tokens`,
//! is the stream's part of the fleet's burst, at least one token.
//!
//! - **Token bucket** limits keep their burst, split as the rate is.
//! - **Fixed window and sliding log** limits are shared as their rate, `limit`
//!   per window spread evenly, with a burst of one second of that rate: over
//!   any window the fleet admits at most `limit` plus the bursts Envoy holds
//!   (see docs/RLQS.md for the bound).
//! - A part of **0** tokens is [`QuotaAssignment::DenyAll`]: Envoy's token
//!   bucket needs at least one token per fill, and a bucket of one token that
//!   never refills would still admit a request.

use crate::policy::{Algorithm, Policy};

/// What one Envoy enforces for one bucket until the assignment's time to
/// live ends (Envoy's `RateLimitStrategy`: a blanket rule or a token bucket).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaAssignment {
    /// Every request is allowed (`BlanketRule.ALLOW_ALL`): an unlimited or
    /// shadow-mode limit, or no limit at all.
    AllowAll,
    /// Every request is refused (`BlanketRule.DENY_ALL`): a limit of 0, or a
    /// part of 0 tokens.
    DenyAll,
    /// A token bucket (`envoy.type.v3.TokenBucket`), full when Envoy builds
    /// it, refilled continuously at `tokens_per_fill / fill_interval_s` tokens
    /// a second.
    TokenBucket {
        /// The bucket's size in tokens (at least 1).
        max_tokens: u32,
        /// Tokens added every `fill_interval_s` (at least 1).
        tokens_per_fill: u32,
        /// Seconds between fills (at least 1: Envoy 1.40 cuts the interval
        /// to whole seconds and enforces nothing under one).
        fill_interval_s: u64,
    },
}

/// A limit as the fleet shares it: `tokens` every `per_s` seconds, with a
/// fleet-wide burst of `burst` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotaRate {
    /// Tokens every `per_s` seconds, for the whole fleet (at least 1).
    pub tokens: u64,
    /// The period in seconds (at least 1).
    pub per_s: u64,
    /// The fleet's burst in tokens (at least 1).
    pub burst: u64,
}

impl QuotaRate {
    /// The rate a policy shares: `limit` per `window_s`; the token bucket's
    /// own burst, else one second of the rate (at least one token).
    ///
    /// ```
    /// use tollgate_core::{Policy, QuotaRate};
    ///
    /// let minute = QuotaRate::of_policy(&Policy::fixed_window(600, 60).unwrap());
    /// assert_eq!((minute.tokens, minute.per_s, minute.burst), (600, 60, 10));
    /// let bucket = QuotaRate::of_policy(&Policy::token_bucket(100, 1, 30).unwrap());
    /// assert_eq!(bucket.burst, 30);
    /// ```
    pub fn of_policy(policy: &Policy) -> QuotaRate {
        let tokens = policy.limit().max(1);
        let per_s = policy.window_s().max(1);
        let burst = match policy.algorithm() {
            Algorithm::TokenBucket => policy.capacity(),
            Algorithm::FixedWindow | Algorithm::SlidingLog => tokens.div_ceil(per_s),
        };
        QuotaRate {
            tokens,
            per_s,
            burst: burst.max(1),
        }
    }

    /// The assignment of a stream whose part is `part` of [`QuotaRate::tokens`]:
    /// a token bucket of `part` tokens every `per_s` seconds holding
    /// `ceil(burst × part / tokens)` tokens (at least 1), or
    /// [`QuotaAssignment::DenyAll`] for a part of 0. Counts past `u32::MAX`
    /// (Envoy's field) are cut to it, the fill's interval scaled with them so
    /// that the rate stays at or under the part's.
    ///
    /// ```
    /// use tollgate_core::{QuotaAssignment, QuotaRate};
    ///
    /// let rate = QuotaRate { tokens: 100, per_s: 1, burst: 100 };
    /// assert_eq!(
    ///     rate.assignment(70),
    ///     QuotaAssignment::TokenBucket { max_tokens: 70, tokens_per_fill: 70, fill_interval_s: 1 }
    /// );
    /// assert_eq!(rate.assignment(0), QuotaAssignment::DenyAll);
    /// ```
    pub fn assignment(&self, part: u64) -> QuotaAssignment {
        if part == 0 {
            return QuotaAssignment::DenyAll;
        }
        let part = part.min(self.tokens);
        let tokens = self.tokens.max(1);
        let max_tokens = (u128::from(self.burst) * u128::from(part))
            .div_ceil(u128::from(tokens))
            .max(1);
        let (tokens_per_fill, fill_interval_s) = match u32::try_from(part) {
            Ok(fill) => (fill, self.per_s.max(1)),
            // part / per_s as u32::MAX / (per_s × part / u32::MAX), rounded
            // so that the rate does not grow.
            Err(_) => {
                let scaled = (u128::from(self.per_s.max(1)) * u128::from(part))
                    .div_ceil(u128::from(u32::MAX));
                (u32::MAX, u64::try_from(scaled).unwrap_or(u64::MAX))
            }
        };
        QuotaAssignment::TokenBucket {
            max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
            tokens_per_fill,
            fill_interval_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_becomes_a_bucket_refilled_at_the_parts_rate() {
        // 600 a minute shared; a part of 150 a minute is 2.5 a second, its
        // burst a quarter of the fleet's 10: 2.5, rounded up to 3.
        let rate = QuotaRate::of_policy(&Policy::fixed_window(600, 60).unwrap());
        assert_eq!(
            rate.assignment(150),
            QuotaAssignment::TokenBucket {
                max_tokens: 3,
                tokens_per_fill: 150,
                fill_interval_s: 60
            }
        );
    }

    #[test]
    fn a_small_part_holds_one_token() {
        // 5 an hour: one second of it rounds up to a burst of 1.
        let rate = QuotaRate::of_policy(&Policy::sliding_log(5, 3600).unwrap());
        assert_eq!(rate.burst, 1);
        assert_eq!(
            rate.assignment(2),
            QuotaAssignment::TokenBucket {
                max_tokens: 1,
                tokens_per_fill: 2,
                fill_interval_s: 3600
            }
        );
    }

    #[test]
    fn a_token_buckets_burst_is_split_with_its_rate() {
        // 100 a second, burst 40: a 30 % part holds 12 tokens.
        let rate = QuotaRate::of_policy(&Policy::token_bucket(100, 1, 40).unwrap());
        assert_eq!(
            rate.assignment(30),
            QuotaAssignment::TokenBucket {
                max_tokens: 12,
                tokens_per_fill: 30,
                fill_interval_s: 1
            }
        );
    }

    #[test]
    fn counts_past_envoys_fields_are_cut_without_raising_the_rate() {
        let rate = QuotaRate {
            tokens: u64::MAX,
            per_s: 2,
            burst: u64::MAX,
        };
        // 2^63 tokens every 2 s: u32::MAX tokens every ceil(2 × 2^63 /
        // (2^32 - 1)) = 4,294,967,298 s, a rate of at most 2^62 a second.
        let QuotaAssignment::TokenBucket {
            max_tokens,
            tokens_per_fill,
            fill_interval_s,
        } = rate.assignment(1 << 63)
        else {
            panic!("a token bucket")
        };
        assert_eq!((max_tokens, tokens_per_fill), (u32::MAX, u32::MAX));
        assert_eq!(fill_interval_s, 4_294_967_298);
    }
}
