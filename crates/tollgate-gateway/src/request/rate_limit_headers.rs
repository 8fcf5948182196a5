//! The rate-limit headers of a gateway response: the IETF `RateLimit-Policy`
//! and `RateLimit` Lists (one item per limit), and the common
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` for the
//! most restrictive limit; of these, the set `[responses]
//! rate_limit_headers` names.

use std::sync::LazyLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use tollgate_core::Decision;
use tollgate_tower::{RATELIMIT, RATELIMIT_POLICY, RateLimitField};

use crate::config::RateLimitHeaderSet;

mod limits;
mod prepared;

pub(crate) use limits::{PLAN, ROUTE, limit_headers};

/// `X-RateLimit-Limit`: the most restrictive limit's quota.
pub(crate) const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: what is left of it.
pub(crate) const X_RATELIMIT_REMAINING: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds until it is whole again, never negative.
pub(crate) const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The rate-limit headers of one response, to add to it: none when no limit
/// applied, and of those only the set `[responses] rate_limit_headers` names.
#[derive(Debug, Default)]
pub(crate) struct RateLimitHeaders {
    values: Option<Values>,
    set: RateLimitHeaderSet,
}

/// The value of each rate-limit header.
#[derive(Debug)]
struct Values {
    policy: HeaderValue,
    state: HeaderValue,
    limit: HeaderValue,
    remaining: HeaderValue,
    reset: HeaderValue,
}

impl RateLimitHeaders {
    /// Sets the headers of its set on `headers`, replacing any of the same
    /// names.
    pub(crate) fn insert_into(self, headers: &mut HeaderMap) {
        let Some(values) = self.values else {
            return;
        };
        let (ietf, x_ratelimit) = (self.set.ietf(), self.set.x_ratelimit());
        headers.reserve(2 * usize::from(ietf) + 3 * usize::from(x_ratelimit));
        if ietf {
            headers.insert(RATELIMIT_POLICY, values.policy);
            headers.insert(RATELIMIT, values.state);
        }
        if x_ratelimit {
            headers.insert(X_RATELIMIT_LIMIT, values.limit);
            headers.insert(X_RATELIMIT_REMAINING, values.remaining);
            headers.insert(X_RATELIMIT_RESET, values.reset);
        }
    }
}

/// The value of a header of [`Values`] that is not sent.
const UNSENT: HeaderValue = HeaderValue::from_static("");

/// The headers of `set` for `fields`, none when there are no fields. A lone
/// field (the common case) takes its constant values from the policy's
/// prepared headers and builds only its numbers, those of `set`.
pub(crate) fn rate_limit_headers(
    fields: &[RateLimitField<'_>],
    set: RateLimitHeaderSet,
) -> RateLimitHeaders {
    let values = match fields {
        [] => return RateLimitHeaders::default(),
        [only] => prepared::with_template(only.name, only.quota, only.window_s, |prepared| {
            let remaining = only.decision.remaining.unwrap_or(0);
            let reset = only.decision.reset_after_seconds();
            let (ietf, x_ratelimit) = (set.ietf(), set.x_ratelimit());
            let (policy, state) = if ietf {
                let policy = prepared.template.policy().clone();
                (policy, prepared.template.state_of(remaining, reset))
            } else {
                (UNSENT, UNSENT)
            };
            let (limit, remaining, reset) = if x_ratelimit {
                (prepared.limit.clone(), number(remaining), number(reset))
            } else {
                (UNSENT, UNSENT, UNSENT)
            };
            Values {
                policy,
                state,
                limit,
                remaining,
                reset,
            }
        }),
        _ => {
            let (policy, state) = if set.ietf() {
                RateLimitField::headers(fields)
            } else {
                (UNSENT, UNSENT)
            };
            with_binding(policy, state, fields, set)
        }
    };
    RateLimitHeaders {
        values: Some(values),
        set,
    }
}

/// The headers for a request held to more policies than `RateLimit`
/// describes (a plan listing several): `listed` (every policy) in
/// `RateLimit-Policy`, `stated` (each limit's binding policy) in
/// `RateLimit`, and `X-RateLimit-*` for the one of `stated` that binds the
/// request. None when `stated` is empty.
pub(crate) fn rate_limit_headers_listed(
    listed: &[RateLimitField<'_>],
    stated: &[RateLimitField<'_>],
    set: RateLimitHeaderSet,
) -> RateLimitHeaders {
    if stated.is_empty() {
        return RateLimitHeaders::default();
    }
    let (policy, state) = if set.ietf() {
        let (policy, _) = RateLimitField::headers(listed);
        let (_, state) = RateLimitField::headers(stated);
        (policy, state)
    } else {
        (UNSENT, UNSENT)
    };
    RateLimitHeaders {
        values: Some(with_binding(policy, state, stated, set)),
        set,
    }
}

/// The values of the headers: `policy` and `state` as given, `X-RateLimit-*`
/// of the field of `fields` that binds ([`Decision::binding`]: the longest
/// wait when refused, else the least remaining), built only when `set` sends
/// them.
fn with_binding(
    policy: HeaderValue,
    state: HeaderValue,
    fields: &[RateLimitField<'_>],
    set: RateLimitHeaderSet,
) -> Values {
    if !set.x_ratelimit() {
        return Values {
            policy,
            state,
            limit: UNSENT,
            remaining: UNSENT,
            reset: UNSENT,
        };
    }
    let binding = Decision::binding(fields.iter().map(|field| field.decision))
        .and_then(|index| fields.get(index));
    let (limit, remaining, reset) = binding.map_or((0, 0, 0), |field| {
        (
            field.quota,
            field.decision.remaining.unwrap_or(0),
            field.decision.reset_after_seconds(),
        )
    });
    Values {
        policy,
        state,
        limit: number(limit),
        remaining: number(remaining),
        reset: number(reset),
    }
}

/// `value` in decimal, as a header value: below [`SMALL_NUMBERS`] a static
/// one (no allocation: counts of seconds and small quotas), else one
/// allocation of its exact size.
fn number(value: u64) -> HeaderValue {
    if let Some(small) = small_number(value) {
        return small;
    }
    // Digits only, so this never fails.
    HeaderValue::from_str(itoa::Buffer::new().format(value))
        .unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// The numbers [`number`] answers without allocating: 0 to 999.
const SMALL_NUMBERS: u64 = 1000;

/// The length of "0123456789101112...999": 10 numbers of one digit, 90 of
/// two, 900 of three.
const SMALL_NUMBERS_TEXT: usize = 10 + 90 * 2 + 900 * 3;

/// Every number below [`SMALL_NUMBERS`] in decimal, one after the other.
static SMALL_NUMBERS_DIGITS: [u8; SMALL_NUMBERS_TEXT] = small_numbers_digits();

const fn small_numbers_digits() -> [u8; SMALL_NUMBERS_TEXT] {
    let mut digits = [0u8; SMALL_NUMBERS_TEXT];
    let mut at = 0;
    let mut number = 0;
    while number < SMALL_NUMBERS as usize {
        if number >= 100 {
            digits[at] = b'0' + (number / 100) as u8;
            at += 1;
        }
        if number >= 10 {
            digits[at] = b'0' + (number / 10 % 10) as u8;
            at += 1;
        }
        digits[at] = b'0' + (number % 10) as u8;
        at += 1;
        number += 1;
    }
    digits
}

/// `value` as a static header value, when it is below [`SMALL_NUMBERS`]:
/// a clone of one of [`SMALL_NUMBER_VALUES`] (no allocation, no check of
/// its bytes).
fn small_number(value: u64) -> Option<HeaderValue> {
    let value = usize::try_from(value).ok()?;
    SMALL_NUMBER_VALUES.get(value).cloned()
}

/// The header value of each number below [`SMALL_NUMBERS`], at its index,
/// each pointing into [`SMALL_NUMBERS_DIGITS`]; made once per process.
static SMALL_NUMBER_VALUES: LazyLock<Box<[HeaderValue]>> = LazyLock::new(|| {
    (0..SMALL_NUMBERS as usize)
        .map(|value| {
            let (start, length) = match value {
                0..10 => (value, 1),
                10..100 => (10 + (value - 10) * 2, 2),
                _ => (190 + (value - 100) * 3, 3),
            };
            SMALL_NUMBERS_DIGITS
                .get(start..start + length)
                .and_then(|digits| std::str::from_utf8(digits).ok())
                .map_or_else(|| HeaderValue::from(value), HeaderValue::from_static)
        })
        .collect()
});

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn decision(remaining: u64, reset_s: u64) -> Decision {
        Decision {
            allowed: 1,
            rejected: 0,
            remaining: Some(remaining),
            retry_after: Duration::ZERO,
            reset_after: Duration::from_secs(reset_s),
        }
    }

    #[test]
    fn lists_every_limit_and_reports_the_tightest() {
        let plan = decision(3, 40);
        let route = decision(59, 1);
        let mut headers = HeaderMap::new();
        rate_limit_headers(
            &[
                RateLimitField {
                    name: "default",
                    quota: 5,
                    window_s: 60,
                    decision: &plan,
                },
                RateLimitField {
                    name: "orders",
                    quota: 60,
                    window_s: 60,
                    decision: &route,
                },
            ],
            RateLimitHeaderSet::All,
        )
        .insert_into(&mut headers);
        assert_eq!(
            headers["ratelimit-policy"],
            "\"default\";q=5;w=60, \"orders\";q=60;w=60"
        );
        assert_eq!(
            headers["ratelimit"],
            "\"default\";r=3;t=40, \"orders\";r=59;t=1"
        );
        assert_eq!(headers["x-ratelimit-limit"], "5");
        assert_eq!(headers["x-ratelimit-remaining"], "3");
        assert_eq!(headers["x-ratelimit-reset"], "40");
        let mut none = HeaderMap::new();
        rate_limit_headers(&[], RateLimitHeaderSet::All).insert_into(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn only_the_set_named_is_inserted() {
        let plan = decision(7, 12);
        let field = RateLimitField {
            name: "default",
            quota: 10,
            window_s: 60,
            decision: &plan,
        };
        for (set, names) in [
            (
                RateLimitHeaderSet::All,
                &[
                    "ratelimit-policy",
                    "ratelimit",
                    "x-ratelimit-limit",
                    "x-ratelimit-remaining",
                    "x-ratelimit-reset",
                ][..],
            ),
            (RateLimitHeaderSet::Ietf, &["ratelimit-policy", "ratelimit"]),
            (
                RateLimitHeaderSet::XRateLimit,
                &[
                    "x-ratelimit-limit",
                    "x-ratelimit-remaining",
                    "x-ratelimit-reset",
                ],
            ),
            (RateLimitHeaderSet::None, &[]),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert("x-ratelimit-limit", HeaderValue::from_static("upstream's"));
            rate_limit_headers(std::slice::from_ref(&field), set).insert_into(&mut headers);
            let mut inserted: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
            inserted.sort_unstable();
            let mut expected: Vec<&str> = names.to_vec();
            if !set.x_ratelimit() {
                // Not ours to send: the upstream's own header is left alone.
                expected.push("x-ratelimit-limit");
            }
            expected.sort_unstable();
            assert_eq!(inserted, expected, "{set:?}");
            if set.x_ratelimit() {
                assert_eq!(headers["x-ratelimit-limit"], "10", "{set:?}");
                assert_eq!(headers["x-ratelimit-remaining"], "7");
                assert_eq!(headers["x-ratelimit-reset"], "12");
            }
            if set.ietf() {
                assert_eq!(headers["ratelimit"], "\"default\";r=7;t=12");
            }
        }
    }

    #[test]
    fn numbers_are_written_in_decimal_whether_static_or_not() {
        let large = [1000, 99_999, u64::MAX];
        for value in (0..=SMALL_NUMBERS).chain(large) {
            assert_eq!(number(value), value.to_string().as_str(), "{value}");
        }
        assert_eq!(number(u64::MAX), "18446744073709551615");
    }
}
