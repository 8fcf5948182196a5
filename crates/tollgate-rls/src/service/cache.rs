//! The descriptors' statuses, as envoyproxy/ratelimit's Redis cache
//! (`DoLimit` in src/redis/fixed_cache_impl.go) computes them, with tollgate's
//! store in place of Redis: `total_hits` counted first, the local cache of
//! over-limit keys, `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`'s read before
//! the charge, one `Store::acquire_units` call for every limited descriptor,
//! then each answer by the Go arithmetic (`counter.rs`), shadow mode applied.

use std::time::Duration;

use tollgate_core::{Decision, Limit, LimitUnits, PreparedPolicy};

use super::counter::{GoStatus, Reading, StatDeltas, go_status, local_cache_status};
use super::plan::{Enforced, Limited, Plan};
use super::{RateLimitService, ServiceError};
use crate::config::stats::StatsSink;
use crate::proto::{Code, CurrentLimit, DescriptorStatus};

/// One descriptor's status, with what the extensions' headers need.
#[derive(Clone, Debug, Default)]
pub(crate) struct Checked {
    /// The status (shadow mode applied).
    pub(crate) status: DescriptorStatus,
    /// When over its limit: seconds until it has room again.
    pub(crate) retry_after_s: Option<u64>,
    /// The quota and window (seconds) the limit advertises in
    /// `RateLimit-Policy` (`Enforced::advertised`).
    pub(crate) advertised: Option<(u64, u64)>,
}

/// A limited descriptor's place in the store call.
pub(super) struct Slot<'p> {
    pub(super) limited: &'p Limited,
    pub(super) prepared: Option<PreparedPolicy>,
    pub(super) local_key: Option<String>,
    pub(super) local_over: bool,
    pub(super) units: u64,
}

impl RateLimitService {
    /// `DoLimit`: the cache's status of every descriptor of `plans`, in order.
    /// The descriptors `refunded` marks (`TOLLGATE_REFUNDS`; none when it is
    /// shorter) are left out, counted nothing and answered OK here: their
    /// hits are given back by `refunds.rs` (or, on a limit with an
    /// `overdraft`, charged by `overdraft.rs`).
    pub(crate) async fn check(
        &self,
        plans: &[Plan],
        refunded: &[bool],
        now_s: u64,
    ) -> Result<Vec<Checked>, ServiceError> {
        let settings = &self.settings;
        let mut slots: Vec<Option<Slot<'_>>> = Vec::with_capacity(plans.len());
        for (index, plan) in plans.iter().enumerate() {
            let Plan::Limited(limited) = plan else {
                slots.push(None);
                continue;
            };
            if refunded.get(index).copied().unwrap_or(false) {
                slots.push(None);
                continue;
            }
            let names = limited.matched.stat_names();
            self.stats.add(&names.total_hits, limited.hits);
            let prepared = match limited.enforcement {
                Enforced::Store(policy) => Some(
                    self.policies
                        .get(self.store.as_ref(), policy)
                        .map_err(|error| ServiceError::Store(error.to_string()))?,
                ),
                Enforced::Deny { .. } => None,
            };
            let local_key = limited
                .enforcement
                .fixed_window_s()
                .filter(|_| self.local_cache.enabled())
                .map(|window_s| format!("{}{}", limited.store_key, now_s / window_s * window_s));
            let local_over = local_key
                .as_deref()
                .is_some_and(|key| self.local_cache.contains(key, now_s));
            slots.push(Some(Slot {
                limited,
                prepared,
                local_key,
                local_over,
                units: limited.hits,
            }));
        }
        let any_local_over = slots.iter().flatten().any(|slot| slot.local_over);

        if settings.stop_cache_key_increment_when_overlimit && !settings.extensions.all_or_nothing {
            let would_pass = if any_local_over {
                Vec::new()
            } else {
                self.would_pass_limits(&slots).await?
            };
            let any_would_pass = would_pass.iter().any(|&passes| passes);
            for (index, slot) in slots.iter_mut().enumerate() {
                if let Some(slot) = slot {
                    // `getHitsAddend`.
                    let passes = would_pass.get(index).copied().unwrap_or(false);
                    if any_local_over || (any_would_pass && !passes) {
                        slot.units = 0;
                    }
                }
            }
        }

        let decisions = self.charge(&slots).await?;
        let mut checked = Vec::with_capacity(plans.len());
        let mut decisions = decisions.into_iter();
        for slot in &slots {
            let Some(slot) = slot else {
                checked.push(Checked {
                    status: DescriptorStatus {
                        code: Code::Ok,
                        ..DescriptorStatus::default()
                    },
                    ..Checked::default()
                });
                continue;
            };
            let decision = if slot.prepared.is_some() && !slot.local_over {
                decisions.next()
            } else {
                None
            };
            checked.push(self.status_of(slot, decision.as_ref().map(|d| &d.decision), now_s));
        }
        Ok(checked)
    }

    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`'s first read: per slot,
    /// whether its counter plus its hits passes its limit.
    async fn would_pass_limits(
        &self,
        slots: &[Option<Slot<'_>>],
    ) -> Result<Vec<bool>, ServiceError> {
        let looks: Vec<LimitUnits<'_>> = slots
            .iter()
            .flatten()
            .filter_map(|slot| {
                let prepared = slot.prepared.as_ref()?;
                Some(LimitUnits {
                    limit: Limit::Policy {
                        key: &slot.limited.store_key,
                        policy: prepared,
                    },
                    units: 0,
                })
            })
            .collect();
        let mut looked = if looks.is_empty() {
            Vec::new()
        } else {
            self.store
                .acquire_units(&looks)
                .await
                .map_err(store_error)?
        }
        .into_iter();
        Ok(slots
            .iter()
            .map(|slot| match slot {
                None => false,
                Some(slot) => match slot.prepared {
                    // A limit of 0 is passed by any count.
                    None => true,
                    Some(_) => looked.next().is_some_and(|look| {
                        let limit = u64::from(slot.limited.matched.limit.requests_per_unit);
                        match Reading::of(&look.decision, limit, 0) {
                            Reading::Exact(count) => count.saturating_add(slot.units) > limit,
                            Reading::Over => true,
                        }
                    }),
                },
            })
            .collect())
    }

    /// The one store call: every limit through the store that the local cache
    /// did not answer, with its units.
    async fn charge(
        &self,
        slots: &[Option<Slot<'_>>],
    ) -> Result<Vec<tollgate_core::LimitDecision>, ServiceError> {
        let limits: Vec<LimitUnits<'_>> = slots
            .iter()
            .flatten()
            .filter(|slot| !slot.local_over)
            .filter_map(|slot| {
                Some(LimitUnits {
                    limit: Limit::Policy {
                        key: &slot.limited.store_key,
                        policy: slot.prepared.as_ref()?,
                    },
                    units: slot.units,
                })
            })
            .collect();
        if limits.is_empty() {
            return Ok(Vec::new());
        }
        self.store.acquire_units(&limits).await.map_err(store_error)
    }

    /// `GetResponseDescriptorStatus` for one limited descriptor.
    pub(super) fn status_of(
        &self,
        slot: &Slot<'_>,
        decision: Option<&Decision>,
        now_s: u64,
    ) -> Checked {
        let limited = slot.limited;
        let limit = &limited.matched.limit;
        let ratio = self.settings.near_limit_ratio;
        let window_s = limited.enforcement.fixed_window_s();
        let (go, decided) = match (slot.local_over, decision, limited.enforcement) {
            (true, _, _) => (local_cache_status(limited.hits, limit.shadow_mode), None),
            (false, Some(decision), Enforced::Store(policy)) if policy.counts_refused() => {
                let reading = Reading::of(decision, policy.limit(), slot.units);
                let status = go_status(
                    reading,
                    limit.requests_per_unit,
                    ratio,
                    limited.hits,
                    limit.shadow_mode,
                );
                (status, Some(decision))
            }
            (false, Some(decision), Enforced::Store(policy)) => (
                extension_status(decision, policy.capacity(), limited, ratio),
                Some(decision),
            ),
            // A limit of 0 refused without the store (requests all or
            // nothing), which never counts a hit: a look finds it at 0.
            _ => {
                let reading = if limited.hits > 0 {
                    Reading::Over
                } else {
                    Reading::Exact(0)
                };
                let status = go_status(reading, 0, ratio, limited.hits, limit.shadow_mode);
                (status, None)
            }
        };
        add_stats(self.stats.as_ref(), &limited.matched.stat_names(), go.stats);
        if go.over
            && !slot.local_over
            && let (Some(key), Some(window_s)) = (&slot.local_key, window_s)
        {
            self.local_cache.insert(key, now_s, window_s);
        }
        let reset_s = match (window_s, decided) {
            (Some(window_s), _) => window_s - now_s % window_s,
            (None, Some(decision)) => decision.reset_after_seconds(),
            (None, None) => 0,
        };
        let retry_after_s = go.over.then(|| match (window_s, decided) {
            // (A look, or a charge past the limit, has no wait of its
            // own: the limit's reset, when it is whole again.)
            (None, Some(decision)) if !decision.retry_after.is_zero() => {
                decision.retry_after_seconds()
            }
            _ => reset_s,
        });
        let code = if go.over && !limit.shadow_mode {
            Code::OverLimit
        } else {
            Code::Ok
        };
        Checked {
            status: DescriptorStatus {
                code,
                current_limit: Some(CurrentLimit {
                    name: limit.name.clone(),
                    requests_per_unit: limit.requests_per_unit,
                    unit: limit.unit,
                }),
                limit_remaining: go.remaining,
                duration_until_reset: Some(Duration::from_secs(reset_s)),
                quota: None,
            },
            retry_after_s,
            advertised: Some(limited.enforcement.advertised()),
        }
    }
}

/// The status of a policy that does not count refused hits (the extensions'
/// token bucket and sliding log, or any limit when requests are all or
/// nothing): over when it refused for want of room itself (a descriptor
/// refused only because another was over is OK, and was charged nothing);
/// `near_limit` counts the hits past the near-limit share of its capacity.
fn extension_status(decision: &Decision, capacity: u64, limited: &Limited, ratio: f32) -> GoStatus {
    let hits = limited.hits;
    let shadow = limited.matched.limit.shadow_mode;
    let remaining = decision.remaining.unwrap_or(u64::MAX);
    // A look at a limit with an overdraft (the admission of a request
    // charged by usage later) needs one unit left.
    let look_finds_nothing =
        hits == 0 && limited.matched.limit.overdraft.is_some() && remaining == 0;
    let over = (decision.rejected > 0 && remaining < hits) || look_finds_nothing;
    let mut stats = StatDeltas::default();
    if over {
        stats.over_limit = hits;
        if shadow {
            stats.shadow_mode = hits;
        }
    } else {
        stats.within_limit = hits;
        let near = f64::from(capacity as f32 * ratio).floor() as u64;
        let used = capacity.saturating_sub(remaining);
        if used > near {
            stats.near_limit = hits.min(used - near);
        }
    }
    GoStatus {
        over,
        remaining: if over {
            0
        } else {
            u32::try_from(remaining).unwrap_or(u32::MAX)
        },
        stats,
    }
}

fn add_stats(
    sink: &dyn StatsSink,
    names: &crate::config::stats::LimitStatNames,
    deltas: StatDeltas,
) {
    for (name, by) in [
        (&names.over_limit, deltas.over_limit),
        (&names.near_limit, deltas.near_limit),
        (&names.within_limit, deltas.within_limit),
        (&names.shadow_mode, deltas.shadow_mode),
        (
            &names.over_limit_with_local_cache,
            deltas.over_limit_with_local_cache,
        ),
    ] {
        if by > 0 {
            sink.add(name, by);
        }
    }
}

/// A store failure as the Go service reports a Redis one: its message.
pub(super) fn store_error(error: tollgate_core::StoreError) -> ServiceError {
    match error {
        tollgate_core::StoreError::Unavailable(message) => ServiceError::Store(message),
        other => ServiceError::Store(other.to_string()),
    }
}
