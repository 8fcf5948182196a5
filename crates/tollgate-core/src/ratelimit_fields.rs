//! The text of the IETF RateLimit header fields
//! (draft-ietf-httpapi-ratelimit-headers), written once for every adapter
//! (the tower layer, the gateway, `tollgate rls`):
//! `RateLimit-Policy: "orders";q=60;w=60` and `RateLimit: "orders";r=4;t=1`,
//! each a List with one Item per limit.
//!
//! Two rules live here:
//!
//! - **The quota a policy advertises** ([`advertised_quota`]): `limit` per
//!   `window_s` for a fixed window or a sliding log. A token bucket
//!   advertises its burst over the time an empty bucket takes to fill,
//!   `q = burst`, `w = ceil(burst * window_s / limit)`: `r` (the tokens left)
//!   then never exceeds `q`, as the draft's remaining quota units are a part
//!   of the quota, and `q / w` is still the refill rate a client paces itself
//!   by. Advertising `limit` per `window_s` instead (60 per 60 s for a bucket
//!   of 60 per minute, burst 5) would tell a client it may send 60 at once,
//!   where the sixth is refused.
//! - **Names** ([`push_structured_string`]): a policy name is sent as a
//!   Structured Field String (RFC 8941 section 3.3.3): quoted, `"` and `\`
//!   escaped, and each character outside printable ASCII replaced by `_`, so
//!   a name of non-ASCII letters still reads as a name of that length rather
//!   than `""`.

use crate::{Algorithm, Policy};

/// The quota and window (seconds) `policy` advertises in `RateLimit-Policy`
/// (see the module's rule): `(limit, window_s)`, or for a token bucket
/// `(burst, ceil(burst * window_s / limit))`.
///
/// ```
/// use tollgate_core::{Policy, advertised_quota};
///
/// assert_eq!(advertised_quota(&Policy::token_bucket(60, 60, 5).unwrap()), (5, 5));
/// assert_eq!(advertised_quota(&Policy::fixed_window(100, 60).unwrap()), (100, 60));
/// ```
pub fn advertised_quota(policy: &Policy) -> (u64, u64) {
    match policy.algorithm() {
        Algorithm::TokenBucket => (policy.capacity(), policy.counted_span_s()),
        Algorithm::FixedWindow | Algorithm::SlidingLog => (policy.limit(), policy.window_s()),
    }
}

/// One limit's Item in the two fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimitItem<'a> {
    /// The policy's name (any text: see [`push_structured_string`]).
    pub name: &'a str,
    /// `q`: the quota, in units (requests), from [`advertised_quota`].
    pub quota: u64,
    /// `w`: the quota's window, in seconds.
    pub window_s: u64,
    /// `r`: the units left now.
    pub remaining: u64,
    /// `t`: whole seconds until the quota is whole again, rounded up.
    pub reset_s: u64,
}

/// The `RateLimit-Policy` and `RateLimit` values of `items` (any iterator:
/// no list is built on the way), as Lists in the given order: `"plan";q=5;w=60, "orders";q=60;w=60` and
/// `"plan";r=3;t=40, "orders";r=59;t=1`. Printable ASCII only.
pub fn rate_limit_fields<'a>(
    items: impl IntoIterator<Item = RateLimitItem<'a>>,
) -> (String, String) {
    let mut policy = String::new();
    let mut state = String::new();
    for (index, item) in items.into_iter().enumerate() {
        // Its quoted name and two numbers of at most 20 digits each.
        policy.reserve(item.name.len() + 50);
        state.reserve(item.name.len() + 50);
        if index > 0 {
            policy.push_str(", ");
            state.push_str(", ");
        }
        let name_starts = state.len();
        push_structured_string(&mut state, item.name);
        policy.push_str(&state[name_starts..]);
        push_parameter(&mut policy, ";q=", item.quota);
        push_parameter(&mut policy, ";w=", item.window_s);
        push_parameter(&mut state, ";r=", item.remaining);
        push_parameter(&mut state, ";t=", item.reset_s);
    }
    (policy, state)
}

/// Appends `key` and `value` in decimal.
fn push_parameter(out: &mut String, key: &str, value: u64) {
    use std::fmt::Write as _;
    out.push_str(key);
    let _ = write!(out, "{value}");
}

/// Appends `text` to `out` as a Structured Field String (RFC 8941 section
/// 3.3.3): quoted, `"` and `\` escaped, each character outside printable
/// ASCII replaced by `_`.
pub fn push_structured_string(out: &mut String, text: &str) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' | '\\' => {
                out.push('\\');
                out.push(character);
            }
            ' '..='~' => out.push(character),
            _ => out.push('_'),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn structured(text: &str) -> String {
        let mut out = String::new();
        push_structured_string(&mut out, text);
        out
    }

    #[test]
    fn names_are_structured_field_strings() {
        assert_eq!(structured("orders"), "\"orders\"");
        assert_eq!(structured("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(structured("caf\u{e9}\n"), "\"caf__\"");
        assert_eq!(structured(""), "\"\"");
    }

    #[test]
    fn items_are_lists_in_order() {
        let item = |name, quota, window_s, remaining, reset_s| RateLimitItem {
            name,
            quota,
            window_s,
            remaining,
            reset_s,
        };
        assert_eq!(
            rate_limit_fields([item("plan", 5, 60, 3, 40), item("orders", 60, 60, 59, 1)]),
            (
                "\"plan\";q=5;w=60, \"orders\";q=60;w=60".to_owned(),
                "\"plan\";r=3;t=40, \"orders\";r=59;t=1".to_owned()
            )
        );
        assert_eq!(
            rate_limit_fields([item("max", u64::MAX, 1, u64::MAX, 0)]),
            (
                "\"max\";q=18446744073709551615;w=1".to_owned(),
                "\"max\";r=18446744073709551615;t=0".to_owned()
            )
        );
        assert_eq!(rate_limit_fields([]), (String::new(), String::new()));
    }

    #[test]
    fn a_token_bucket_advertises_its_burst_over_its_fill_time() {
        // 60 per 60 s, burst 5: 5 tokens, refilled one a second: 5 s.
        let bucket = Policy::token_bucket(60, 60, 5).unwrap();
        assert_eq!(advertised_quota(&bucket), (5, 5));
        // 10 per 60 s, burst 4: 4 tokens at one per 6 s: 24 s.
        let slow = Policy::token_bucket(10, 60, 4).unwrap();
        assert_eq!(advertised_quota(&slow), (4, 24));
        // 7 per 60 s, burst 3: 3 * 60 / 7 = 25.7 s, rounded up.
        let uneven = Policy::token_bucket(7, 60, 3).unwrap();
        assert_eq!(advertised_quota(&uneven), (3, 26));
        let log = Policy::sliding_log(20, 60).unwrap();
        assert_eq!(advertised_quota(&log), (20, 60));
    }
}
