//! Refunds (`TOLLGATE_REFUNDS`, a tollgate extension): a limited descriptor
//! sent with `is_negative_hits` gives its hits back to its limit instead of
//! being charged them (Envoy sends it to return an over-estimate, at the end
//! of a stream say). The Go service ignores the flag and charges the hits;
//! so does tollgate with the setting off.
//!
//! A request's positive descriptors are decided as always (`cache.rs`, one
//! store call) and its refunds given back in one `Store::give_back_units`
//! call beside it, so a request takes two store calls at most. Each refund is
//! answered OK with its `current_limit`, `limit_remaining` after the refund
//! and `duration_until_reset` (as for any descriptor: the window's end for
//! a fixed window, the store's reset for the other algorithms), and its hits
//! are counted in `ratelimit.service.rate_limit.<key>.refunded_hits` (the
//! hits asked back, whether or not that many were counted), never in
//! `total_hits` nor the other counters. The rule of what is given back is
//! core's (`Limiter::give_back_units`): never past what the limit allows.

use std::time::Duration;

use futures_util::future::join3;
use tollgate_core::{Decision, Limit, LimitUnits, PreparedPolicy};

use super::cache::Checked;
use super::plan::{Enforced, Limited, Plan};
use super::{RateLimitService, ServiceError};
use crate::config::stats::StatsSink;
use crate::proto::{Code, CurrentLimit, DescriptorStatus, RateLimitRequest};

/// The last part of the refund counter's full name.
const REFUNDED_HITS: &str = "refunded_hits";

impl RateLimitService {
    /// Every descriptor's status: the refunds (when `TOLLGATE_REFUNDS` is on)
    /// given back, the charges on limits with an `overdraft` charged past
    /// them (`overdraft.rs`), and the other descriptors decided by
    /// [`RateLimitService::check`], the store calls at once.
    ///
    /// # Errors
    ///
    /// [`ServiceError`] of any call (a store failure among them).
    pub(crate) async fn check_and_refund(
        &self,
        request: &RateLimitRequest,
        plans: &[Plan],
        now_s: u64,
    ) -> Result<Vec<Checked>, ServiceError> {
        let refunded = self.refunded(request, plans);
        let overdrawn = Self::overdrawn(plans, &refunded);
        if !refunded.contains(&true) && !overdrawn.contains(&true) {
            return self.check(plans, &[], now_s).await;
        }
        let apart: Vec<bool> = (0..plans.len())
            .map(|index| {
                refunded.get(index).copied().unwrap_or(false)
                    || overdrawn.get(index).copied().unwrap_or(false)
            })
            .collect();
        let (checked, refunds, charges) = join3(
            self.check(plans, &apart, now_s),
            self.refund(plans, &refunded, now_s),
            self.overdraw(plans, &overdrawn, now_s),
        )
        .await;
        let mut checked = checked?;
        for (index, status) in refunds?.into_iter().chain(charges?) {
            if let Some(slot) = checked.get_mut(index) {
                *slot = status;
            }
        }
        Ok(checked)
    }

    /// Which descriptors are refunds: with `TOLLGATE_REFUNDS` on, the limited
    /// ones sent with `is_negative_hits` (an unlimited or unmatched one is
    /// answered as always); empty with it off.
    fn refunded(&self, request: &RateLimitRequest, plans: &[Plan]) -> Vec<bool> {
        if !self.settings.extensions.refunds {
            return vec![false; plans.len()];
        }
        request
            .descriptors
            .iter()
            .zip(plans)
            .map(|(descriptor, plan)| {
                descriptor.is_negative_hits && matches!(plan, Plan::Limited(_))
            })
            .collect()
    }

    /// Gives back the hits of every refunded descriptor in one store call;
    /// their statuses, with their indices.
    async fn refund(
        &self,
        plans: &[Plan],
        refunded: &[bool],
        now_s: u64,
    ) -> Result<Vec<(usize, Checked)>, ServiceError> {
        let mut refunds: Vec<(usize, &Limited, Option<PreparedPolicy>)> = Vec::new();
        for (index, plan) in plans.iter().enumerate() {
            let Plan::Limited(limited) = plan else {
                continue;
            };
            if !refunded.get(index).copied().unwrap_or(false) {
                continue;
            }
            let prepared = match limited.enforcement {
                Enforced::Store(policy) => Some(
                    self.policies
                        .get(self.store.as_ref(), policy)
                        .map_err(|error| ServiceError::Store(error.to_string()))?,
                ),
                // A limit of 0 refused without the store: it never counted
                // a hit, so nothing is given back.
                Enforced::Deny { .. } => None,
            };
            refunds.push((index, limited, prepared));
        }
        let limits: Vec<LimitUnits<'_>> = refunds
            .iter()
            .filter_map(|(_, limited, prepared)| {
                Some(LimitUnits {
                    limit: Limit::Policy {
                        key: &limited.store_key,
                        policy: prepared.as_ref()?,
                    },
                    units: limited.hits,
                })
            })
            .collect();
        let decisions = if limits.is_empty() {
            Vec::new()
        } else {
            self.store
                .give_back_units(&limits)
                .await
                .map_err(|error| match error {
                    tollgate_core::StoreError::Unavailable(message) => ServiceError::Store(message),
                    other => ServiceError::Store(other.to_string()),
                })?
        };
        let mut decisions = decisions.into_iter();
        Ok(refunds
            .into_iter()
            .map(|(index, limited, prepared)| {
                let decision = prepared.and_then(|_| decisions.next());
                (
                    index,
                    self.refund_status(
                        limited,
                        decision.as_ref().map(|limit| &limit.decision),
                        now_s,
                    ),
                )
            })
            .collect())
    }

    /// A refunded descriptor's status, its hits counted in `refunded_hits`.
    fn refund_status(&self, limited: &Limited, decision: Option<&Decision>, now_s: u64) -> Checked {
        let names = limited.matched.stat_names();
        if limited.hits > 0 {
            let name = names
                .total_hits
                .strip_suffix("total_hits")
                .map(|base| format!("{base}{REFUNDED_HITS}"));
            if let Some(name) = name {
                self.stats.add(&name, limited.hits);
            }
        }
        let limit = &limited.matched.limit;
        let window_s = limited.enforcement.fixed_window_s();
        let reset_s = match (window_s, decision) {
            (Some(window_s), _) => window_s - now_s % window_s,
            (None, Some(decision)) => decision.reset_after_seconds(),
            (None, None) => 0,
        };
        let remaining = decision
            .and_then(|decision| decision.remaining)
            .map_or(0, |remaining| u32::try_from(remaining).unwrap_or(u32::MAX));
        Checked {
            status: DescriptorStatus {
                code: Code::Ok,
                current_limit: Some(CurrentLimit {
                    name: limit.name.clone(),
                    requests_per_unit: limit.requests_per_unit,
                    unit: limit.unit,
                }),
                limit_remaining: remaining,
                duration_until_reset: Some(Duration::from_secs(reset_s)),
                quota: None,
            },
            retry_after_s: None,
            advertised: Some(limited.enforcement.advertised()),
        }
    }
}
