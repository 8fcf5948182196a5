//! The rate-limit headers of a gateway response: the IETF `RateLimit-Policy`
//! and `RateLimit` Lists (one item per limit), and the common
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` for the
//! most restrictive limit.

use http::{HeaderMap, HeaderName, HeaderValue};
use tollgate_tower::{RATELIMIT, RATELIMIT_POLICY, RateLimitField};

mod prepared;

/// `X-RateLimit-Limit`: the most restrictive limit's quota.
pub(crate) const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: what is left of it.
pub(crate) const X_RATELIMIT_REMAINING: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds until it is whole again, never negative.
pub(crate) const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The rate-limit headers of one response, to add to it: none when no limit
/// applied.
#[derive(Debug, Default)]
pub(crate) struct RateLimitHeaders {
    values: Option<Values>,
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
    /// Sets the headers on `headers`, replacing any of the same names.
    pub(crate) fn insert_into(self, headers: &mut HeaderMap) {
        let Some(values) = self.values else {
            return;
        };
        headers.reserve(5);
        headers.insert(RATELIMIT_POLICY, values.policy);
        headers.insert(RATELIMIT, values.state);
        headers.insert(X_RATELIMIT_LIMIT, values.limit);
        headers.insert(X_RATELIMIT_REMAINING, values.remaining);
        headers.insert(X_RATELIMIT_RESET, values.reset);
    }
}

/// The headers for `fields`, none when there are no fields.
pub(crate) fn rate_limit_headers(fields: &[RateLimitField<'_>]) -> RateLimitHeaders {
    let Some(tightest) = fields.iter().min_by_key(|field| {
        let remaining = field.decision.remaining.unwrap_or(u64::MAX);
        (remaining, std::cmp::Reverse(field.decision.reset_after))
    }) else {
        return RateLimitHeaders::default();
    };
    let (policy, state, limit) = match fields {
        [only] => prepared::with_template(only.name, only.quota, only.window_s, |prepared| {
            (
                prepared.template.policy().clone(),
                prepared.template.state(only.decision),
                prepared.limit.clone(),
            )
        }),
        _ => {
            let (policy, state) = RateLimitField::headers(fields);
            (policy, state, number(tightest.quota))
        }
    };
    RateLimitHeaders {
        values: Some(Values {
            policy,
            state,
            limit,
            remaining: number(tightest.decision.remaining.unwrap_or(0)),
            reset: number(tightest.decision.reset_after_seconds()),
        }),
    }
}

/// `value` in decimal, as a header value in one allocation of its exact size.
fn number(value: u64) -> HeaderValue {
    // Digits only, so this never fails.
    HeaderValue::from_str(itoa::Buffer::new().format(value))
        .unwrap_or_else(|_| HeaderValue::from_static("0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate_core::Decision;

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
        rate_limit_headers(&[
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
        ])
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
        rate_limit_headers(&[]).insert_into(&mut none);
        assert!(none.is_empty());
    }
}
