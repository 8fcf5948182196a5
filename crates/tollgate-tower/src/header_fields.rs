//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-10)
//! as HTTP header values: `RateLimit-Policy: "orders";q=60;w=60` and
//! `RateLimit: "orders";r=4;t=1`. Their text, the quota a policy advertises
//! and how a name is quoted are core's one writer
//! (`tollgate_core::rate_limit_fields`), which `tollgate rls` uses too.

use http::HeaderValue;
use http::header::HeaderName;
use tollgate_core::{Decision, RateLimitItem, push_structured_string, rate_limit_fields};

/// `RateLimit-Policy`: the quota policies that apply, a List of Items whose
/// value is the policy name and whose parameters are `q` (quota, requests) and
/// `w` (window, seconds).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// `RateLimit`: the state of the quota now, an Item whose value is the policy
/// name with `r` (remaining requests) and `t` (seconds until the quota is whole
/// again).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The quota a policy advertises: core's rule, re-exported where the
/// fields are written.
pub use tollgate_core::advertised_quota;

/// The two RateLimit fields of one response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RateLimitHeaders {
    pub(crate) policy: HeaderValue,
    pub(crate) state: HeaderValue,
}

impl RateLimitHeaders {
    /// The fields of several limits, as Lists in the given order.
    pub(crate) fn of(fields: &[RateLimitField<'_>]) -> Self {
        let (policy, state) = RateLimitField::headers(fields);
        RateLimitHeaders { policy, state }
    }

    /// Adds these fields to `headers`, in front of any the response carries
    /// already (those of a tollgate layer further in that decided on its own,
    /// or the inner service's own): each field stays one List, in the order
    /// the request met the limits, outermost first.
    pub(crate) fn add_to(self, headers: &mut http::HeaderMap) {
        add_in_front(headers, RATELIMIT_POLICY, self.policy);
        add_in_front(headers, RATELIMIT, self.state);
    }
}

/// Puts `value` in front of the List field `name` of `headers`: alone when it
/// is absent, else `value, <the field's lines joined by ", ">`.
fn add_in_front(headers: &mut http::HeaderMap, name: HeaderName, value: HeaderValue) {
    match headers.entry(name) {
        http::header::Entry::Vacant(entry) => {
            entry.insert(value);
        }
        http::header::Entry::Occupied(mut entry) => {
            let mut joined = value.as_bytes().to_vec();
            for line in entry.iter() {
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(line.as_bytes());
            }
            // Joined from valid values with ", ": valid; the first is kept
            // should that ever fail.
            let value = HeaderValue::from_maybe_shared(bytes::Bytes::from(joined)).unwrap_or(value);
            drop(entry.insert_mult(value));
        }
    }
}

/// The RateLimit fields of one named policy, prepared once: the
/// `RateLimit-Policy` value is constant, and `RateLimit` only needs its numbers.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::Decision;
/// use tollgate_tower::HeaderTemplate;
///
/// let template = HeaderTemplate::new("orders", 60, 60);
/// assert_eq!(template.policy(), "\"orders\";q=60;w=60");
/// let decision = Decision {
///     allowed: 1,
///     rejected: 0,
///     remaining: Some(4),
///     retry_after: Duration::ZERO,
///     reset_after: Duration::from_millis(1500),
/// };
/// assert_eq!(template.state(&decision), "\"orders\";r=4;t=2");
/// ```
#[derive(Clone, Debug)]
pub struct HeaderTemplate {
    policy: HeaderValue,
    /// `"name";r=`
    state_prefix: String,
}

impl HeaderTemplate {
    /// The fields of the policy named `name` (sent as a Structured Field
    /// String: see `tollgate_core::push_structured_string`), whose
    /// quota is `quota` units per `window_s` seconds.
    pub fn new(name: &str, quota: u64, window_s: u64) -> Self {
        // Core's writer gives the policy value; the state's numbers are
        // filled on each response (`state_of`).
        let (policy, _) = rate_limit_fields([RateLimitItem {
            name,
            quota,
            window_s,
            remaining: 0,
            reset_s: 0,
        }]);
        let mut quoted = String::new();
        push_structured_string(&mut quoted, name);
        HeaderTemplate {
            policy: joined(&[&policy]),
            state_prefix: format!("{quoted};r="),
        }
    }

    /// The `RateLimit-Policy` value: `"name";q=<quota>;w=<window_s>`.
    pub fn policy(&self) -> &HeaderValue {
        &self.policy
    }

    /// The `RateLimit` value after `decision`: `"name";r=<remaining>;t=<seconds
    /// until the quota is whole again, rounded up>`.
    pub fn state(&self, decision: &Decision) -> HeaderValue {
        self.state_of(
            decision.remaining.unwrap_or(0),
            decision.reset_after_seconds(),
        )
    }

    /// The `RateLimit` value `"name";r=<remaining>;t=<reset_s>`, in one
    /// allocation of its exact size.
    pub fn state_of(&self, remaining: u64, reset_s: u64) -> HeaderValue {
        let mut remaining_digits = itoa::Buffer::new();
        let mut reset_digits = itoa::Buffer::new();
        let remaining = remaining_digits.format(remaining).as_bytes();
        let reset = reset_digits.format(reset_s).as_bytes();
        let prefix = self.state_prefix.as_bytes();
        let mut bytes = Vec::with_capacity(prefix.len() + remaining.len() + 3 + reset.len());
        bytes.extend_from_slice(prefix);
        bytes.extend_from_slice(remaining);
        bytes.extend_from_slice(b";t=");
        bytes.extend_from_slice(reset);
        // Printable ASCII only (the prefix is a Structured Field String), so
        // this never fails.
        HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
            .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
    }

    /// The fields after `decision`.
    pub(crate) fn headers(&self, decision: &Decision) -> RateLimitHeaders {
        RateLimitHeaders {
            policy: self.policy.clone(),
            state: self.state(decision),
        }
    }
}

/// One policy's part of the RateLimit fields, for responses held to several
/// limits at once: [`RateLimitField::headers`] joins them into the two Lists.
#[derive(Clone, Debug)]
pub struct RateLimitField<'a> {
    /// The policy's name.
    pub name: &'a str,
    /// Its quota: requests per window.
    pub quota: u64,
    /// Its window, in seconds.
    pub window_s: u64,
    /// What it decided for this request.
    pub decision: &'a Decision,
}

impl RateLimitField<'_> {
    /// The `RateLimit-Policy` and `RateLimit` values of `fields`, as Lists in
    /// the given order: `"plan";q=5;w=60, "orders";q=60;w=60` and
    /// `"plan";r=3;t=40, "orders";r=59;t=1`.
    pub fn headers(fields: &[RateLimitField<'_>]) -> (HeaderValue, HeaderValue) {
        let (policy, state) = rate_limit_fields(fields.iter().map(|field| RateLimitItem {
            name: field.name,
            quota: field.quota,
            window_s: field.window_s,
            remaining: field.decision.remaining.unwrap_or(0),
            reset_s: field.decision.reset_after_seconds(),
        }));
        (joined(&[&policy]), joined(&[&state]))
    }
}

/// `parts` one after the other, as a header value held in one allocation of
/// its exact size. Only printable ASCII goes in, so this never fails.
fn joined(parts: &[&str]) -> HeaderValue {
    let mut bytes = Vec::with_capacity(parts.iter().map(|part| part.len()).sum());
    for part in parts {
        bytes.extend_from_slice(part.as_bytes());
    }
    HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fields_follow_the_draft() {
        let decision = Decision {
            allowed: 1,
            rejected: 0,
            remaining: Some(4),
            retry_after: Duration::ZERO,
            reset_after: Duration::from_millis(1500),
        };
        let headers = HeaderTemplate::new("orders", 60, 60).headers(&decision);
        assert_eq!(headers.policy, "\"orders\";q=60;w=60");
        assert_eq!(headers.state, "\"orders\";r=4;t=2");
    }

    #[test]
    fn fields_go_in_front_of_those_already_there() {
        let decision = |remaining| Decision {
            allowed: 1,
            rejected: 0,
            remaining: Some(remaining),
            retry_after: Duration::ZERO,
            reset_after: Duration::from_secs(1),
        };
        let mut map = http::HeaderMap::new();
        HeaderTemplate::new("inner", 5, 5)
            .headers(&decision(4))
            .add_to(&mut map);
        map.append(RATELIMIT, HeaderValue::from_static("\"upstream\";r=9;t=1"));
        HeaderTemplate::new("outer", 3, 3)
            .headers(&decision(2))
            .add_to(&mut map);
        assert_eq!(
            map.get_all(RATELIMIT_POLICY).iter().collect::<Vec<_>>(),
            ["\"outer\";q=3;w=3, \"inner\";q=5;w=5"]
        );
        assert_eq!(
            map.get_all(RATELIMIT).iter().collect::<Vec<_>>(),
            ["\"outer\";r=2;t=1, \"inner\";r=4;t=1, \"upstream\";r=9;t=1"]
        );
    }
}
