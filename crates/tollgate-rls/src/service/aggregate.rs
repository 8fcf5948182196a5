//! The answer from the descriptors' statuses, as envoyproxy/ratelimit's
//! `shouldRateLimitWorker` (src/service/ratelimit.go) builds it: unlimited
//! descriptors answered OK with 2^32-1 remaining, the overall code (OVER_LIMIT
//! when a descriptor outside quota mode is over, or when every quota-mode
//! descriptor is), the limit headers of the descriptor nearest its limit,
//! global shadow mode, dynamic metadata; then tollgate's extension headers.

use super::cache::Checked;
use super::dynamic_metadata::dynamic_metadata;
use super::headers_to_add;
use super::held::Held;
use super::service_settings::ServiceSettings;
use super::service_stats;
use crate::config::stats::StatsSink;
use crate::proto::{Code, DescriptorStatus, RateLimitRequest, RateLimitResponse};

/// The response to `request` from its descriptors' `checked` statuses (one per
/// descriptor, in order) and what they are `held` to. Counts
/// `global_shadow_mode` in `stats` when `SHADOW_MODE` turns an OVER_LIMIT
/// answer into OK.
pub(crate) fn respond(
    request: &RateLimitRequest,
    checked: &[Checked],
    held: &[Held<'_>],
    settings: &ServiceSettings,
    now_s: u64,
    stats: &dyn StatsSink,
) -> RateLimitResponse {
    let mut statuses = Vec::with_capacity(checked.len());
    let mut nearest: Option<&DescriptorStatus> = None;
    let mut nearest_remaining = u32::MAX;
    let mut passed = Vec::new();
    let (mut failed_rate_limits, mut failed_quotas, mut quotas) = (0usize, 0usize, 0usize);

    for (index, (one, held)) in checked.iter().zip(held).enumerate() {
        let status = &one.status;
        if settings.limit_response_headers_enabled
            && status.current_limit.is_some()
            && status.limit_remaining < nearest_remaining
        {
            nearest = Some(status);
            nearest_remaining = status.limit_remaining;
        }
        if held.unlimited {
            statuses.push(DescriptorStatus {
                code: Code::Ok,
                limit_remaining: u32::MAX,
                ..DescriptorStatus::default()
            });
            continue;
        }
        statuses.push(status.clone());
        let quota_mode = settings.quota_mode || (held.limited && held.quota_mode);
        if status.code == Code::OverLimit {
            if quota_mode {
                failed_quotas += 1;
            } else {
                failed_rate_limits += 1;
                nearest = Some(status);
                nearest_remaining = 0;
            }
        } else {
            passed.push(index);
        }
        if quota_mode {
            quotas += 1;
        }
    }

    let mut overall = if failed_rate_limits > 0 || (quotas > 0 && quotas == failed_quotas) {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let mut response_headers = Vec::new();
    if settings.limit_response_headers_enabled
        && let Some(nearest) = nearest
    {
        response_headers.extend(headers_to_add::go_limit_headers(nearest, settings, now_s));
    }
    if overall == Code::OverLimit && settings.shadow_mode {
        overall = Code::Ok;
        stats.add(service_stats::GLOBAL_SHADOW_MODE, 1);
    }
    let dynamic_metadata = settings
        .response_dynamic_metadata
        .then(|| dynamic_metadata(request, &passed, held));
    if settings.extensions.retry_after_header && overall == Code::OverLimit {
        response_headers.extend(headers_to_add::retry_after(checked));
    }
    if settings.extensions.ietf_headers {
        response_headers.extend(headers_to_add::ietf_fields(checked, held));
    }
    RateLimitResponse {
        overall_code: overall,
        statuses,
        response_headers_to_add: response_headers,
        dynamic_metadata,
        ..RateLimitResponse::default()
    }
}
