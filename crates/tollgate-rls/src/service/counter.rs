//! envoyproxy/ratelimit's per-descriptor arithmetic
//! (`GetResponseDescriptorStatus` in `src/limiter/base_limiter.go`): from a
//! counter before and after a request's hits, the code, the remaining hits and
//! the `over_limit`, `near_limit`, `within_limit` and `shadow_mode` counts.
//!
//! The Go service reads the counter back from Redis; tollgate's store answers
//! a [`Decision`] of a fixed window that counts refused hits
//! (`Policy::fixed_window_counting_refused`), from which [`Reading::of`]
//! recovers the counter: exactly, except past the limit, where only what the
//! Go arithmetic needs is known (see [`Reading`]).

use tollgate_core::Decision;

/// What is known of a counter after a request (the Go service's
/// `limitAfterIncrease`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// The counter after the request, exactly.
    Exact(u64),
    /// Past the limit, and already at or past it before this request's units
    /// were added: every hit is over the limit, whatever the exact count.
    Over,
}

impl Reading {
    /// The counter after `units` were charged to a counting-refused fixed
    /// window of `limit`, given its decision.
    pub(crate) fn of(decision: &Decision, limit: u64, units: u64) -> Reading {
        let remaining = decision.remaining.unwrap_or(0);
        if remaining > 0 {
            // c + units < limit.
            return Reading::Exact(limit - remaining);
        }
        if units == 0 {
            // A look: a counting window is past its limit exactly when it
            // says to wait (`Decision::retry_after`); otherwise it is at it.
            return if decision.retry_after.is_zero() {
                Reading::Exact(limit)
            } else {
                Reading::Over
            };
        }
        if decision.rejected == 0 {
            // Everything fitted and nothing is left: c + units == limit.
            return Reading::Exact(limit);
        }
        if decision.allowed > 0 {
            // Some fitted: c = limit - allowed, then every unit was counted.
            return Reading::Exact((limit - decision.allowed).saturating_add(units));
        }
        Reading::Over
    }
}

/// The counts one descriptor adds to its stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatDeltas {
    pub(crate) over_limit: u64,
    pub(crate) near_limit: u64,
    pub(crate) within_limit: u64,
    pub(crate) shadow_mode: u64,
    pub(crate) over_limit_with_local_cache: u64,
}

/// One descriptor's answer by the Go arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GoStatus {
    /// Over the limit (before shadow mode turns the code to OK).
    pub(crate) over: bool,
    /// `limit_remaining`: `limit - after` when within the limit, else 0.
    pub(crate) remaining: u32,
    /// What the stats gain.
    pub(crate) stats: StatDeltas,
}

/// `floor(float32(limit) * ratio)`, as Go computes the near-limit threshold.
pub(crate) fn near_limit_threshold(limit: u32, ratio: f32) -> u64 {
    // Rust's float-to-int `as` saturates (Go's is undefined out of range).
    f64::from(limit as f32 * ratio).floor() as u64
}

/// The Go status of a counter read as `reading` after `hits` (the Go
/// service's hits addend: `limitBeforeIncrease = after - hits`, wrapping as
/// Go's `uint64` does), for a limit of `limit` in `shadow` mode. Go's
/// subtractions wrap too (a `NEAR_LIMIT_RATIO` above 1 makes them wrap).
pub(crate) fn go_status(
    reading: Reading,
    limit: u32,
    near_ratio: f32,
    hits: u64,
    shadow: bool,
) -> GoStatus {
    let threshold = u64::from(limit);
    let near = near_limit_threshold(limit, near_ratio);
    let mut stats = StatDeltas::default();
    let (over, remaining) = match reading {
        Reading::Over => {
            stats.over_limit = hits;
            if shadow {
                stats.shadow_mode = hits;
            }
            (true, 0)
        }
        Reading::Exact(after) => {
            let before = after.wrapping_sub(hits);
            if after > threshold {
                if before >= threshold {
                    stats.over_limit = hits;
                } else {
                    stats.over_limit = after - threshold;
                    stats.near_limit = threshold.wrapping_sub(near.max(before));
                }
                if shadow {
                    stats.shadow_mode = if before >= threshold {
                        hits
                    } else {
                        after - threshold
                    };
                }
                (true, 0)
            } else {
                if after > near {
                    stats.near_limit = if before >= near { hits } else { after - near };
                }
                stats.within_limit = hits;
                (false, u32::try_from(threshold - after).unwrap_or(u32::MAX))
            }
        }
    };
    GoStatus {
        over,
        remaining,
        stats,
    }
}

/// The Go status of a descriptor found in the local cache of over-limit keys:
/// over, and every hit counted as over the limit with the local cache.
pub(crate) fn local_cache_status(hits: u64, shadow: bool) -> GoStatus {
    GoStatus {
        over: true,
        remaining: 0,
        stats: StatDeltas {
            over_limit: hits,
            over_limit_with_local_cache: hits,
            shadow_mode: if shadow { hits } else { 0 },
            ..StatDeltas::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn decision(allowed: u64, rejected: u64, remaining: u64) -> Decision {
        Decision {
            allowed,
            rejected,
            remaining: Some(remaining),
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
        }
    }

    #[test]
    fn reads_the_counter_back() {
        assert_eq!(Reading::of(&decision(1, 0, 5), 10, 1), Reading::Exact(5));
        assert_eq!(Reading::of(&decision(3, 0, 0), 10, 3), Reading::Exact(10));
        assert_eq!(Reading::of(&decision(2, 5, 0), 20, 7), Reading::Exact(25));
        assert_eq!(Reading::of(&decision(0, 1, 0), 10, 1), Reading::Over);
        // A look at exactly the limit, and past it (the store says to wait).
        assert_eq!(Reading::of(&decision(0, 0, 0), 10, 0), Reading::Exact(10));
        let mut past = decision(0, 0, 0);
        past.retry_after = Duration::from_secs(30);
        assert_eq!(Reading::of(&past, 10, 0), Reading::Over);
        assert_eq!(Reading::of(&decision(0, 0, 4), 10, 0), Reading::Exact(6));
    }

    #[test]
    fn near_and_over_counts_as_go() {
        // TestNearLimit key9: limit 20, 7 hits, counter 15 -> 22.
        let status = go_status(Reading::Exact(22), 20, 0.8, 7, false);
        assert!(status.over);
        assert_eq!((status.stats.over_limit, status.stats.near_limit), (2, 4));
        // key7: 16 -> 19: 3 near, 3 within.
        let status = go_status(Reading::Exact(19), 20, 0.8, 3, false);
        assert_eq!((status.remaining, status.stats.near_limit), (1, 3));
        assert_eq!(near_limit_threshold(15, 0.8), 12);
    }
}
