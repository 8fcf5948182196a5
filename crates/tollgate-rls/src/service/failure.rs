//! tollgate's answer when the store fails (it is down, or slower than its
//! timeout) and `TOLLGATE_STORE_FAILURE` names a [`FailurePolicy`]: the
//! service decides itself instead of handing Envoy an error. The Go service
//! has no such setting: it answers an error, and Envoy's `failure_mode_deny`
//! decides.
//!
//! - `fail_open`: OK; every limited descriptor OK without a `current_limit`
//!   (nothing is known of its counter, so no limit headers either);
//! - `fail_closed`: OVER_LIMIT when any descriptor is limited; every limited
//!   descriptor OVER_LIMIT with its `current_limit` and 0 remaining (a
//!   descriptor in shadow mode stays OK, and global `SHADOW_MODE` turns the
//!   answer into OK, counted in `global_shadow_mode`, as for any refusal).
//!
//! Unlimited and unmatched descriptors are answered as always. Both policies
//! count `redis_error` (the store failed) and
//! `ratelimit.service.store_failure.<policy>`.

use tollgate_core::FailurePolicy;

use super::plan::Plan;
use super::service_settings::ServiceSettings;
use super::service_stats;
use crate::config::stats::StatsSink;
use crate::proto::{Code, CurrentLimit, DescriptorStatus, RateLimitResponse};

/// The answer of `policy` for a request whose descriptors are held to
/// `plans`, the failure counted in `stats`.
pub(crate) fn respond(
    plans: &[Plan],
    policy: FailurePolicy,
    settings: &ServiceSettings,
    stats: &dyn StatsSink,
) -> RateLimitResponse {
    stats.add(service_stats::REDIS_ERROR, 1);
    stats.add(
        match policy {
            FailurePolicy::FailOpen => service_stats::STORE_FAILURE_FAIL_OPEN,
            FailurePolicy::FailClosed => service_stats::STORE_FAILURE_FAIL_CLOSED,
        },
        1,
    );
    let statuses: Vec<DescriptorStatus> = plans
        .iter()
        .map(|plan| match plan {
            Plan::Free => DescriptorStatus {
                code: Code::Ok,
                ..DescriptorStatus::default()
            },
            Plan::Unlimited => DescriptorStatus {
                code: Code::Ok,
                limit_remaining: u32::MAX,
                ..DescriptorStatus::default()
            },
            Plan::Limited(limited) => match policy {
                FailurePolicy::FailOpen => DescriptorStatus {
                    code: Code::Ok,
                    ..DescriptorStatus::default()
                },
                FailurePolicy::FailClosed => {
                    let limit = &limited.matched.limit;
                    DescriptorStatus {
                        code: if limit.shadow_mode {
                            Code::Ok
                        } else {
                            Code::OverLimit
                        },
                        current_limit: Some(CurrentLimit {
                            name: limit.name.clone(),
                            requests_per_unit: limit.requests_per_unit,
                            unit: limit.unit,
                        }),
                        limit_remaining: 0,
                        duration_until_reset: None,
                        quota: None,
                    }
                }
            },
        })
        .collect();
    let mut overall = if statuses.iter().any(|status| status.code == Code::OverLimit) {
        Code::OverLimit
    } else {
        Code::Ok
    };
    if overall == Code::OverLimit && settings.shadow_mode {
        overall = Code::Ok;
        stats.add(service_stats::GLOBAL_SHADOW_MODE, 1);
    }
    RateLimitResponse {
        overall_code: overall,
        statuses,
        ..RateLimitResponse::default()
    }
}
