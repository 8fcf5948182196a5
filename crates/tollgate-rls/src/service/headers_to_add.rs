//! Response headers: the Go service's three limit headers
//! (`LIMIT_RESPONSE_HEADERS_ENABLED`), and tollgate's `Retry-After` and IETF
//! `RateLimit-Policy` / `RateLimit` fields (extensions, off by default).

use tollgate_core::{RateLimitItem, rate_limit_fields};

use super::cache::Checked;
use super::held::Held;
use super::service_settings::ServiceSettings;
use crate::proto::{DescriptorStatus, HeaderValue};

/// `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (or the
/// names configured) of `status`: its `requests_per_unit`, its
/// `limit_remaining` and `unit - now % unit` seconds (`CalculateReset`; for a
/// window that is not a unit, the status's own reset).
pub(crate) fn go_limit_headers(
    status: &DescriptorStatus,
    settings: &ServiceSettings,
    now_s: u64,
) -> [HeaderValue; 3] {
    let limit = status.current_limit.clone().unwrap_or_default();
    let reset = match limit.unit.seconds() {
        Some(unit) => unit - now_s % unit,
        None => status.duration_until_reset.map_or(0, |d| d.as_secs()),
    };
    [
        HeaderValue::new(
            &settings.limit_limit_header,
            limit.requests_per_unit.to_string(),
        ),
        HeaderValue::new(
            &settings.limit_remaining_header,
            status.limit_remaining.to_string(),
        ),
        HeaderValue::new(&settings.limit_reset_header, reset.to_string()),
    ]
}

/// Extension: `Retry-After` of an OVER_LIMIT answer: the longest wait of the
/// descriptors over their limit (none when no status says how long).
pub(crate) fn retry_after(checked: &[Checked]) -> Option<HeaderValue> {
    checked
        .iter()
        .filter(|one| one.status.code == crate::proto::Code::OverLimit)
        .filter_map(|one| one.retry_after_s)
        .max()
        .map(|seconds| HeaderValue::new("Retry-After", seconds.max(1).to_string()))
}

/// Extension: `RateLimit-Policy: "name";q=<quota>;w=<window>` and
/// `RateLimit: "name";r=<remaining>;t=<reset>` of every limited descriptor,
/// in order, as lists (nothing when no descriptor is limited), written by
/// core's one writer (`tollgate_core::rate_limit_fields`, whose rule gives a
/// token bucket's quota as its burst over its fill time).
pub(crate) fn ietf_fields(checked: &[Checked], held: &[Held<'_>]) -> Vec<HeaderValue> {
    let items = checked
        .iter()
        .zip(held)
        .filter(|(_, held)| !held.unlimited)
        .filter_map(|(one, held)| {
            let (quota, window_s) = one.advertised?;
            one.status.current_limit.as_ref()?;
            Some(RateLimitItem {
                name: held.policy_name?,
                quota,
                window_s,
                remaining: u64::from(one.status.limit_remaining),
                reset_s: one.status.duration_until_reset.map_or(0, |d| d.as_secs()),
            })
        });
    let (policy, state) = rate_limit_fields(items);
    if policy.is_empty() {
        return Vec::new();
    }
    vec![
        HeaderValue::new("RateLimit-Policy", policy),
        HeaderValue::new("RateLimit", state),
    ]
}
