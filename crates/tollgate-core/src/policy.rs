//! Rate-limit policies: which algorithm, how many units per how many seconds, and
//! the burst of a token bucket; their validation and their JSON / TOML form.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::calendar::{Calendar, CalendarError};

mod document;

pub(crate) use document::{DocumentFields, present_bool, present_integer};

/// The largest count, window, batch or timestamp that tollgate accepts: 2^63-1.
///
/// Every value up to this one works without overflow (the engine computes in
/// 128-bit or saturating arithmetic).
pub const MAX_VALUE: u64 = i64::MAX as u64;

/// The limiting algorithm of a [`Policy`].
///
/// Serialised in snake case: `"fixed_window"`, `"sliding_log"`, `"token_bucket"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// `limit` units per window, windows aligned to the epoch: `[k*W, (k+1)*W)`.
    FixedWindow,
    /// `limit` units in any span of `window_s` seconds: a unit allowed at `t`
    /// counts while `now - window_s < t`.
    SlidingLog,
    /// A bucket of `burst` tokens, full at the first request, refilled
    /// continuously at `limit / window_s` tokens per second.
    TokenBucket,
}

impl Algorithm {
    /// The name used in configuration and JSON: `fixed_window`, `sliding_log` or
    /// `token_bucket`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::TokenBucket => "token_bucket",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field of a policy, named in [`PolicyError`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyField {
    /// `limit`: units per window (fixed window, sliding log) or tokens refilled
    /// per window (token bucket).
    Limit,
    /// `window_s`: the window, in seconds.
    WindowSeconds,
    /// `burst`: the token bucket's capacity, in tokens.
    Burst,
}

impl fmt::Display for PolicyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyField::Limit => "limit",
            PolicyField::WindowSeconds => "window_s",
            PolicyField::Burst => "burst",
        })
    }
}

/// Why a policy is invalid. Building or parsing a policy never panics: every bad
/// input ends here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A count is 0 or above [`MAX_VALUE`].
    #[error("{field} must be an integer from 1 to 2^63-1, got {value}")]
    OutOfRange {
        /// The offending field.
        field: PolicyField,
        /// The value given.
        value: u64,
    },
    /// `burst` was given for an algorithm other than `token_bucket`.
    #[error("burst applies to token_bucket only, not to {algorithm}")]
    BurstNotAllowed {
        /// The policy's algorithm.
        algorithm: Algorithm,
    },
    /// `count_refused` was given for an algorithm other than `fixed_window`.
    #[error("count_refused applies to fixed_window only, not to {algorithm}")]
    CountRefusedNotAllowed {
        /// The policy's algorithm.
        algorithm: Algorithm,
    },
    /// The window, in the engine's clock ticks, does not fit in 64 bits (only
    /// possible on a nanosecond clock, for windows longer than about 584 years).
    #[error("window_s of {window_s} s is longer than the {max_window_s} s this clock can count")]
    WindowTooLong {
        /// The window given, in seconds.
        window_s: u64,
        /// The longest window the clock's resolution allows, in seconds.
        max_window_s: u64,
    },
    /// The document is not a policy object: a missing or unknown field, a field of
    /// the wrong type, an unknown algorithm. The text names the field.
    #[error("{0}")]
    Malformed(String),
    /// A calendar window's time zone or week start is not one (see
    /// [`Calendar::new`]).
    #[error("{0}")]
    Calendar(#[from] CalendarError),
    /// A calendar window (`window = "month"`, ...) was given with an
    /// algorithm other than `fixed_window`, or beside `window_s`.
    #[error("{0}")]
    CalendarNotAllowed(String),
    /// A store cannot hold the policy exactly (the Redis store computes in Lua
    /// numbers, exact up to 2^53); the text says which bound.
    #[error("{0}")]
    Unsupported(String),
}

/// A rate-limit policy: an algorithm with its quota, validated.
///
/// `limit`, `window_s` and `burst` are integers from 1 to [`MAX_VALUE`];
/// `burst` belongs to the token bucket only and defaults to `limit`. In JSON:
/// `{"algorithm": "token_bucket", "limit": 60, "window_s": 60, "burst": 5}`.
///
/// A fixed window may also count the units it refuses
/// ([`Policy::fixed_window_counting_refused`]; in JSON and TOML
/// `"count_refused": true`, a field accepted with `fixed_window` only and
/// written only when true), as envoyproxy/ratelimit does.
///
/// ```
/// use tollgate_core::{Algorithm, Policy};
///
/// let policy = Policy::token_bucket(60, 60, 5).unwrap();
/// assert_eq!(policy.algorithm(), Algorithm::TokenBucket);
/// assert_eq!(policy.burst(), Some(5));
/// assert!(Policy::fixed_window(0, 60).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    algorithm: Algorithm,
    limit: u64,
    window_s: u64,
    burst: u64,
    /// Whether refused units are counted too (fixed window only).
    count_refused: bool,
    /// The calendar whose periods are the windows (fixed window only):
    /// `window_s` is then the period's nominal length.
    calendar: Option<Calendar>,
}

impl Policy {
    /// A policy of `algorithm`; `burst` must be `None` unless the algorithm is
    /// the token bucket, where `None` means `burst = limit`.
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] naming the first count outside 1..=2^63-1, or
    /// [`PolicyError::BurstNotAllowed`].
    pub fn new(
        algorithm: Algorithm,
        limit: u64,
        window_s: u64,
        burst: Option<u64>,
    ) -> Result<Self, PolicyError> {
        check_count(PolicyField::Limit, limit)?;
        check_count(PolicyField::WindowSeconds, window_s)?;
        let burst = match (algorithm, burst) {
            (Algorithm::TokenBucket, Some(burst)) => check_count(PolicyField::Burst, burst)?,
            (Algorithm::TokenBucket, None) => limit,
            (_, Some(_)) => return Err(PolicyError::BurstNotAllowed { algorithm }),
            (_, None) => limit,
        };
        Ok(Policy {
            algorithm,
            limit,
            window_s,
            burst,
            count_refused: false,
            calendar: None,
        })
    }

    /// `limit` units per period of `calendar` (a fixed window whose
    /// boundaries are the calendar's: local midnight at the start of each
    /// day, week, month or year; see [`Calendar`]). `window_s` is the
    /// period's nominal length ([`CalendarPeriod::nominal_seconds`]).
    ///
    /// ```
    /// use tollgate_core::{Calendar, CalendarPeriod, Policy};
    ///
    /// let month = Calendar::new(CalendarPeriod::Month, "Europe/Berlin", None).unwrap();
    /// let policy = Policy::calendar(10_000, month).unwrap();
    /// assert_eq!(policy.calendar_window(), Some(month));
    /// assert_eq!(policy.window_s(), 31 * 86_400);
    /// ```
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] when `limit` is outside 1..=2^63-1.
    pub fn calendar(limit: u64, calendar: Calendar) -> Result<Self, PolicyError> {
        let mut policy = Policy::fixed_window(limit, calendar.period().nominal_seconds())?;
        policy.calendar = Some(calendar);
        Ok(policy)
    }

    /// `limit` requests per aligned window of `window_s` seconds.
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] when a count is outside 1..=2^63-1.
    pub fn fixed_window(limit: u64, window_s: u64) -> Result<Self, PolicyError> {
        Policy::new(Algorithm::FixedWindow, limit, window_s, None)
    }

    /// `limit` units per aligned window of `window_s` seconds, counting every
    /// unit asked for, refused ones included: the rule of envoyproxy/ratelimit,
    /// whose Redis cache `INCRBY`s a descriptor's counter by the request's hits
    /// and then compares the counter with the limit.
    ///
    /// A request of `n` units on a window whose counter is `c` allows
    /// `min(n, limit - c)` (0 once `c >= limit`), rejects the rest, and the
    /// counter becomes `c + n` (saturating); `remaining` is
    /// `limit - (c + n)`, 0 at or over the limit; `retry_after` and
    /// `reset_after` are the fixed window's (the window's end). On one key alone
    /// this decides as [`Policy::fixed_window`] does (a window never gives back
    /// what it counted); the difference is in
    /// [`Limiter::acquire_units`](crate::Limiter::acquire_units): such a limit
    /// is charged its units whatever the request's other limits decide. Its
    /// state is never shared with a plain fixed window of the same numbers.
    ///
    /// ```
    /// use tollgate_core::{Algorithm, Policy};
    ///
    /// let policy = Policy::fixed_window_counting_refused(20, 60).unwrap();
    /// assert_eq!(policy.algorithm(), Algorithm::FixedWindow);
    /// assert!(policy.counts_refused());
    /// assert_ne!(policy, Policy::fixed_window(20, 60).unwrap());
    /// ```
    ///
    /// A `limit` of 0 refuses every unit and still counts them all, as the Go
    /// service's `requests_per_unit: 0` does. Its state (the counter) does not
    /// depend on `limit`: a key keeps its count when only the limit changes
    /// (the Go service's counter key names no limit), and starts afresh when
    /// the window does.
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] when the limit is above 2^63-1 or the window
    /// outside 1..=2^63-1.
    pub fn fixed_window_counting_refused(limit: u64, window_s: u64) -> Result<Self, PolicyError> {
        let mut policy = Policy::fixed_window(limit.max(1), window_s)?;
        policy.limit = limit;
        policy.burst = limit;
        policy.count_refused = true;
        Ok(policy)
    }

    /// `limit` requests in any span of `window_s` seconds.
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] when a count is outside 1..=2^63-1.
    pub fn sliding_log(limit: u64, window_s: u64) -> Result<Self, PolicyError> {
        Policy::new(Algorithm::SlidingLog, limit, window_s, None)
    }

    /// A bucket of `burst` tokens refilled at `limit / window_s` tokens per second.
    ///
    /// # Errors
    ///
    /// [`PolicyError::OutOfRange`] when a count is outside 1..=2^63-1.
    pub fn token_bucket(limit: u64, window_s: u64, burst: u64) -> Result<Self, PolicyError> {
        Policy::new(Algorithm::TokenBucket, limit, window_s, Some(burst))
    }

    /// Parses a policy from a JSON value, naming the offending field on error.
    ///
    /// A [`serde_json::Value`] keeps one of a duplicated field only; to refuse
    /// duplicates, read the document itself with [`Policy::from_deserializer`].
    ///
    /// # Errors
    ///
    /// [`PolicyError::Malformed`] for a document of the wrong shape (the text
    /// starts with the field's name), or the errors of [`Policy::new`].
    pub fn from_json(value: &serde_json::Value) -> Result<Self, PolicyError> {
        Policy::from_deserializer(value)
    }

    /// Reads a policy from any serde deserializer (a JSON document, say),
    /// naming the offending field on error. A field given twice is refused
    /// (`duplicate field `limit``), not read as its last value.
    ///
    /// # Errors
    ///
    /// [`PolicyError::Malformed`] for a document of the wrong shape (the text
    /// starts with the field's name, or names the duplicated field), or the
    /// errors of [`Policy::new`].
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, PolicyError> {
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            // A validation error from `Policy::new` comes back through serde as
            // text; keep it as it is, and prefix shape errors with their field.
            if path == "." {
                PolicyError::Malformed(inner.to_string())
            } else {
                PolicyError::Malformed(format!("{path}: {inner}"))
            }
        })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Units per window; for the token bucket, tokens refilled per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window, in seconds.
    pub fn window_s(&self) -> u64 {
        self.window_s
    }

    /// Whether the policy counts the units it refuses (a fixed window made by
    /// [`Policy::fixed_window_counting_refused`], or `"count_refused": true`);
    /// false for every other policy.
    pub fn counts_refused(&self) -> bool {
        self.count_refused
    }

    /// The calendar whose periods are the windows of a calendar quota
    /// ([`Policy::calendar`]); `None` for a window of `window_s` seconds
    /// aligned to the epoch, and for the other algorithms.
    pub fn calendar_window(&self) -> Option<Calendar> {
        self.calendar
    }

    /// The token bucket's capacity in tokens; `None` for the other algorithms.
    pub fn burst(&self) -> Option<u64> {
        (self.algorithm == Algorithm::TokenBucket).then_some(self.burst)
    }

    /// The most units a fresh key may use at once: `burst` for the token bucket,
    /// `limit` otherwise.
    pub fn capacity(&self) -> u64 {
        self.burst
    }

    /// Seconds over which the policy counts a key's use, rounded up: the window
    /// for a fixed window or a sliding log; for a token bucket, the time an
    /// empty bucket takes to fill, `ceil(burst * window_s / limit)`. After that
    /// long without a request a key's state equals a fresh one. A calendar
    /// window's is its nominal length and a day more (daylight-saving
    /// days are 25 hours long, and zones change their offsets). At least 1;
    /// saturates at `u64::MAX`. The in-memory limiter keeps an idle key's
    /// state at least this long, past `idle_eviction_s` when need be.
    ///
    /// ```
    /// use tollgate_core::Policy;
    ///
    /// assert_eq!(Policy::fixed_window(100, 60).unwrap().counted_span_s(), 60);
    /// assert_eq!(Policy::token_bucket(60, 60, 5).unwrap().counted_span_s(), 5);
    /// assert_eq!(Policy::token_bucket(7, 60, 1).unwrap().counted_span_s(), 9); // 8.57 s
    /// ```
    pub fn counted_span_s(&self) -> u64 {
        match self.algorithm {
            Algorithm::TokenBucket => {
                let span = (u128::from(self.burst) * u128::from(self.window_s))
                    .div_ceil(u128::from(self.limit));
                u64::try_from(span).unwrap_or(u64::MAX).max(1)
            }
            Algorithm::FixedWindow if self.calendar.is_some() => self.window_s + 86_400,
            Algorithm::FixedWindow | Algorithm::SlidingLog => self.window_s,
        }
    }
}

fn check_count(field: PolicyField, value: u64) -> Result<u64, PolicyError> {
    if (1..=MAX_VALUE).contains(&value) {
        Ok(value)
    } else {
        Err(PolicyError::OutOfRange { field, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn burst_defaults_to_limit_for_the_token_bucket_only() {
        let bucket = Policy::new(Algorithm::TokenBucket, 6, 60, None).unwrap();
        assert_eq!(bucket.burst(), Some(6));
        let window = Policy::fixed_window(6, 60).unwrap();
        assert_eq!(window.burst(), None);
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            Policy::fixed_window(0, 60),
            Err(PolicyError::OutOfRange {
                field: PolicyField::Limit,
                value: 0
            })
        );
        assert_eq!(
            Policy::sliding_log(1, 1 << 63).unwrap_err().to_string(),
            "window_s must be an integer from 1 to 2^63-1, got 9223372036854775808"
        );
        let error =
            Policy::from_json(&json!({"algorithm": "fixed_window", "limit": true, "window_s": 1}))
                .unwrap_err()
                .to_string();
        assert!(error.starts_with("limit: invalid type: boolean"), "{error}");
        let error = Policy::from_json(
            &json!({"algorithm": "token_bucket", "limit": 3, "window_s": 10, "burst": 0}),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(error, "burst must be an integer from 1 to 2^63-1, got 0");
    }

    #[test]
    fn json_shape_is_strict() {
        for bad in [
            json!("fixed_window"),
            json!({"algorithm": "fixed_window", "limit": 3}),
            json!({"algorithm": "leaky", "limit": 3, "window_s": 10}),
            json!({"algorithm": "fixed_window", "limit": 3, "window_s": 10, "burst": 2}),
            json!({"algorithm": "sliding_log", "limit": 3, "window_s": 2.5}),
            json!({"algorithm": "token_bucket", "limit": 3, "window_s": 10, "burst": null}),
            json!({"algorithm": "fixed_window", "limit": 3, "window_s": 10, "extra": 1}),
            json!({"algorithm": "fixed_window", "limit": -3, "window_s": 10}),
        ] {
            assert!(Policy::from_json(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn serialises_burst_for_the_token_bucket_only() {
        let bucket = Policy::token_bucket(7, 60, 3).unwrap();
        assert_eq!(
            serde_json::to_value(bucket).unwrap(),
            json!({"algorithm": "token_bucket", "limit": 7, "window_s": 60, "burst": 3})
        );
        let log = Policy::sliding_log(2, 10).unwrap();
        assert_eq!(
            serde_json::to_value(log).unwrap(),
            json!({"algorithm": "sliding_log", "limit": 2, "window_s": 10})
        );
    }

    #[test]
    fn count_refused_belongs_to_the_fixed_window() {
        let counting = Policy::fixed_window_counting_refused(20, 60).unwrap();
        assert!(counting.counts_refused());
        assert_eq!(counting.algorithm(), Algorithm::FixedWindow);
        assert_eq!((counting.limit(), counting.window_s()), (20, 60));
        for plain in [
            Policy::fixed_window(20, 60).unwrap(),
            Policy::sliding_log(20, 60).unwrap(),
            Policy::token_bucket(20, 60, 5).unwrap(),
        ] {
            assert!(!plain.counts_refused());
        }
        assert_ne!(counting, Policy::fixed_window(20, 60).unwrap());
        // A limit of 0 (the Go service's `requests_per_unit: 0`) is a counting
        // window's only; its capacity is 0 too.
        let zero = Policy::fixed_window_counting_refused(0, 60).unwrap();
        assert_eq!((zero.limit(), zero.capacity(), zero.window_s()), (0, 0, 60));
        assert!(Policy::fixed_window(0, 60).is_err());
        assert_eq!(
            Policy::fixed_window_counting_refused(1 << 63, 60),
            Err(PolicyError::OutOfRange {
                field: PolicyField::Limit,
                value: 1 << 63
            })
        );
        // In documents: read when given, written when true only.
        let document = json!({"algorithm": "fixed_window", "limit": 20, "window_s": 60, "count_refused": true});
        assert_eq!(Policy::from_json(&document).unwrap(), counting);
        assert_eq!(serde_json::to_value(counting).unwrap(), document);
        let off = json!({"algorithm": "fixed_window", "limit": 20, "window_s": 60, "count_refused": false});
        let plain = Policy::from_json(&off).unwrap();
        assert_eq!(plain, Policy::fixed_window(20, 60).unwrap());
        assert_eq!(
            serde_json::to_value(plain).unwrap(),
            json!({"algorithm": "fixed_window", "limit": 20, "window_s": 60})
        );
        let toml: Policy = toml::from_str(
            "algorithm = \"fixed_window\"\nlimit = 20\nwindow_s = 60\ncount_refused = true\n",
        )
        .unwrap();
        assert_eq!(toml, counting);
        // Any other algorithm, or a value that is not a boolean, is refused.
        let error = Policy::from_json(
            &json!({"algorithm": "sliding_log", "limit": 3, "window_s": 10, "count_refused": true}),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "count_refused applies to fixed_window only, not to sliding_log"
        );
        for bad in [
            json!({"algorithm": "token_bucket", "limit": 3, "window_s": 10, "count_refused": false}),
            json!({"algorithm": "fixed_window", "limit": 3, "window_s": 10, "count_refused": null}),
            json!({"algorithm": "fixed_window", "limit": 3, "window_s": 10, "count_refused": 1}),
            json!({"algorithm": "fixed_window", "limit": 3, "window_s": 10, "count_refused": "true"}),
        ] {
            assert!(Policy::from_json(&bad).is_err(), "{bad} was accepted");
        }
    }
}
