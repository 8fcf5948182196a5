//! The protocol's messages (`envoy-types`) to and from the allocator's
//! types: reports into usages, answers into a `RateLimitQuotaResponse`.

use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket, rate_limit_strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    self, AbandonAction, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};
use tollgate_core::{BucketReport, QuotaAssignment};

use crate::allocator::{BucketAnswer, Usage};
use crate::bucket::{BucketError, BucketKey};

/// Why a report is refused as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The report names no domain.
    #[error("a usage report has no domain")]
    NoDomain,
}

/// A report's usages, each bucket's key and counts, a bucket listed twice
/// once with its counts added (so that no copy counts as a report of its
/// own); the buckets that are refused (no entries, too many, too long) are
/// left out and counted in the second value. A report with no buckets
/// (Envoy 1.40 sends them while it holds none) has no usages.
///
/// # Errors
///
/// [`ReportError::NoDomain`].
pub fn usages(report: &RateLimitQuotaUsageReports) -> Result<(Vec<Usage>, usize), ReportError> {
    if report.domain.is_empty() {
        return Err(ReportError::NoDomain);
    }
    let mut refused = 0;
    let mut usages: Vec<Usage> = Vec::with_capacity(report.bucket_quota_usages.len());
    let mut seen: std::collections::HashMap<BucketKey, usize> = std::collections::HashMap::new();
    for usage in &report.bucket_quota_usages {
        let key = match usage.bucket_id.as_ref() {
            Some(id) => BucketKey::from_map(&id.bucket),
            None => Err(BucketError::Empty),
        };
        match key {
            Ok(key) => match seen.get(&key) {
                Some(&index) => {
                    let counts: &mut BucketReport = &mut usages[index].1;
                    counts.allowed = counts.allowed.saturating_add(usage.num_requests_allowed);
                    counts.denied = counts.denied.saturating_add(usage.num_requests_denied);
                }
                None => {
                    seen.insert(key.clone(), usages.len());
                    usages.push((
                        key,
                        BucketReport {
                            allowed: usage.num_requests_allowed,
                            denied: usage.num_requests_denied,
                        },
                    ));
                }
            },
            Err(_) => refused += 1,
        }
    }
    Ok((usages, refused))
}

/// One response carrying `answers`.
pub fn response(answers: &[BucketAnswer]) -> RateLimitQuotaResponse {
    RateLimitQuotaResponse {
        bucket_action: answers.iter().map(action).collect(),
    }
}

fn action(answer: &BucketAnswer) -> BucketAction {
    match answer {
        BucketAnswer::Assign {
            bucket,
            assignment,
            ttl_s,
        } => BucketAction {
            bucket_id: Some(BucketId {
                bucket: bucket.to_map(),
            }),
            bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
                QuotaAssignmentAction {
                    assignment_time_to_live: Some(seconds(*ttl_s)),
                    rate_limit_strategy: Some(strategy(*assignment)),
                },
            )),
        },
        BucketAnswer::Abandon { bucket } => BucketAction {
            bucket_id: Some(BucketId {
                bucket: bucket.to_map(),
            }),
            bucket_action: Some(bucket_action::BucketAction::AbandonAction(AbandonAction {})),
        },
    }
}

fn strategy(assignment: QuotaAssignment) -> RateLimitStrategy {
    use rate_limit_strategy::{BlanketRule, Strategy};
    let strategy = match assignment {
        QuotaAssignment::AllowAll => Strategy::BlanketRule(BlanketRule::AllowAll as i32),
        QuotaAssignment::DenyAll => Strategy::BlanketRule(BlanketRule::DenyAll as i32),
        QuotaAssignment::TokenBucket {
            max_tokens,
            tokens_per_fill,
            fill_interval_s,
        } => Strategy::TokenBucket(TokenBucket {
            max_tokens,
            tokens_per_fill: Some(UInt32Value {
                value: tokens_per_fill,
            }),
            fill_interval: Some(seconds(fill_interval_s)),
        }),
    };
    RateLimitStrategy {
        strategy: Some(strategy),
    }
}

/// A protobuf duration of whole seconds (cut to protobuf's largest).
fn seconds(seconds: u64) -> Duration {
    Duration {
        seconds: i64::try_from(seconds.min(315_576_000_000)).unwrap_or(i64::MAX),
        nanos: 0,
    }
}
