//! Charging past the limit (a limit's `overdraft`, a tollgate extension):
//! the hits of a descriptor on such a limit are charged whatever the limit
//! has left, into a debt of at most `overdraft` units (core's
//! `Store::overdraw_units`), as Envoy's `apply_on_stream_done` call reports
//! a request's usage once it is served. The Go service's fixed window counts
//! every hit so already; the extensions' sliding log, token bucket and
//! calendar quotas, and every fixed window when requests are all or
//! nothing, count only what they allow, and need the overdraft to count a
//! usage past what is left.
//!
//! A call with 0 hits (the admission's look) is decided with the others, and
//! on such a limit is OVER_LIMIT when nothing is left (used up or in debt),
//! as a gateway route admits a request only with its `cost` left
//! (`cache.rs`). A charge is answered OVER_LIMIT when it leaves nothing,
//! else OK; its hits are counted in `total_hits`
//! and `over_limit` or `within_limit` as any descriptor's. The charges of
//! one request are one store call per overdraft (one for most
//! configurations), beside the call deciding its other descriptors.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;
use tollgate_core::{Decision, Limit, LimitUnits, PreparedPolicy};

use super::cache::{Checked, Slot, store_error};
use super::plan::{Enforced, Limited, Plan};
use super::{RateLimitService, ServiceError};
use crate::config::stats::StatsSink;

impl RateLimitService {
    /// Which descriptors are charged past their limit: those on a limit
    /// with an `overdraft` and at least one hit, not already a refund.
    pub(crate) fn overdrawn(plans: &[Plan], refunded: &[bool]) -> Vec<bool> {
        plans
            .iter()
            .enumerate()
            .map(|(index, plan)| {
                let Plan::Limited(limited) = plan else {
                    return false;
                };
                limited.hits > 0
                    && limited.matched.limit.overdraft.is_some()
                    && matches!(limited.enforcement, Enforced::Store(_))
                    && !refunded.get(index).copied().unwrap_or(false)
            })
            .collect()
    }

    /// Charges the hits of every descriptor `overdrawn` marks past its
    /// limit; their statuses, with their indices.
    ///
    /// # Errors
    ///
    /// [`ServiceError::Store`] when the store fails (or cannot overdraw).
    pub(crate) async fn overdraw(
        &self,
        plans: &[Plan],
        overdrawn: &[bool],
        now_s: u64,
    ) -> Result<Vec<(usize, Checked)>, ServiceError> {
        let mut charged: Vec<(usize, &Limited, PreparedPolicy, u64)> = Vec::new();
        for (index, plan) in plans.iter().enumerate() {
            let Plan::Limited(limited) = plan else {
                continue;
            };
            let (true, Enforced::Store(policy), Some(overdraft)) = (
                overdrawn.get(index).copied().unwrap_or(false),
                limited.enforcement,
                limited.matched.limit.overdraft,
            ) else {
                continue;
            };
            let prepared = self
                .policies
                .get(self.store.as_ref(), policy)
                .map_err(|error| ServiceError::Store(error.to_string()))?;
            charged.push((index, limited, prepared, overdraft));
        }
        if charged.is_empty() {
            return Ok(Vec::new());
        }
        // One store call per overdraft, each charging its limits at once.
        let mut by_overdraft: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (position, (_, _, _, overdraft)) in charged.iter().enumerate() {
            by_overdraft.entry(*overdraft).or_default().push(position);
        }
        let calls = by_overdraft.into_iter().map(|(overdraft, positions)| {
            let charged = &charged;
            async move {
                let limits: Vec<LimitUnits<'_>> = positions
                    .iter()
                    .map(|&position| {
                        let (_, limited, prepared, _) = &charged[position];
                        LimitUnits {
                            limit: Limit::Policy {
                                key: &limited.store_key,
                                policy: prepared,
                            },
                            units: limited.hits,
                        }
                    })
                    .collect();
                let decisions = self
                    .store
                    .overdraw_units(&limits, overdraft)
                    .await
                    .map_err(store_error)?;
                Ok::<_, ServiceError>(positions.into_iter().zip(decisions).collect::<Vec<_>>())
            }
        });
        let mut statuses = Vec::with_capacity(charged.len());
        for (position, decided) in try_join_all(calls).await?.into_iter().flatten() {
            let (index, limited, prepared, _) = &charged[position];
            self.stats
                .add(&limited.matched.stat_names().total_hits, limited.hits);
            let slot = Slot {
                limited,
                prepared: Some(*prepared),
                local_key: None,
                local_over: false,
                units: limited.hits,
            };
            let decision = charge_decision(&decided.decision, limited.hits);
            statuses.push((*index, self.status_of(&slot, Some(&decision), now_s)));
        }
        Ok(statuses)
    }
}

/// The decision a charge of `hits` is answered by, from the look after it
/// (`after`): refused (every hit) when it leaves nothing (the limit used up
/// or in debt), else allowed.
fn charge_decision(after: &Decision, hits: u64) -> Decision {
    let nothing_left = after.remaining == Some(0);
    Decision {
        allowed: if nothing_left { 0 } else { hits },
        rejected: if nothing_left { hits } else { 0 },
        ..*after
    }
}
