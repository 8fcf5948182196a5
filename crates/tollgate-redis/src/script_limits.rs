//! What a request's limits become on their way to the acquire script
//! ([`RedisStore::script_limits`]: exempt plans decided here, a plan of
//! several policies sent as one script limit per policy) and the decisions
//! made of the script's outcomes ([`RedisStore::decide_units`], for
//! `acquire_units` and, with a `max_wait`, `reserve_units`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tollgate_core::{Decision, Limit, LimitDecision, LimitUnits, PolicyDecision, StoreError};

use crate::RedisStore;
use crate::call::ScriptLimit;
use crate::keys::Space;
use crate::plans::Plans;
use crate::protocol::DEFAULT_TIER;
use crate::reserve::ScriptWait;
use crate::store::Owner;

impl RedisStore {
    /// The script limits `limits` send (a plan of several policies one per
    /// policy), each with its owner, and the decisions made here: exempt
    /// plans' (`Some`), the others to be made by the scripts (`None`).
    pub(crate) fn script_limits(
        &self,
        limits: &[LimitUnits<'_>],
        plans: &Plans,
    ) -> Result<ScriptLimits, StoreError> {
        // Exempt plans are decided here; the rest go to Redis.
        let decisions: Vec<Option<LimitDecision>> = limits
            .iter()
            .map(|limit| match limit.limit {
                Limit::Plan(key) if plans.exempt.contains(key) => Some(LimitDecision {
                    decision: Decision::exempt(limit.units),
                    policy: None,
                    tier: None,
                    name: None,
                    further: Vec::new(),
                }),
                _ => None,
            })
            .collect();
        let mut sent: Vec<ScriptLimit> = Vec::with_capacity(limits.len());
        // Whose each sent limit is: the index of its limit in `limits`, and
        // the name of a plan's further policy (a plan of several policies
        // sends one script limit per policy, decided together).
        let mut owners: Vec<Owner> = Vec::with_capacity(limits.len());
        for (index, (limit, decided)) in limits.iter().zip(&decisions).enumerate() {
            if decided.is_some() {
                continue;
            }
            let script_limit = match limit.limit {
                Limit::Plan(key) => {
                    let names = Arc::new(self.context.names(Space::Plan, key));
                    let tier = self.context.remembered_tier(&names.tier);
                    let tier = tier.unwrap_or_else(|| Arc::from(DEFAULT_TIER));
                    ScriptLimit::plan(names, tier, plans, limit.units)
                }
                Limit::Policy { key, policy } => {
                    let names = Arc::new(self.context.names(Space::Policy, key));
                    ScriptLimit::policy(names, self.context.policy_rule(policy)?, limit.units)
                }
            };
            let further = script_limit.further(plans);
            sent.push(script_limit);
            owners.push((index, None));
            for (name, further) in further {
                sent.push(further);
                owners.push((index, Some(name)));
            }
        }
        Ok((decisions, sent, owners))
    }

    /// [`RedisStore::acquire_units_at`], or, with `max_wait` (µs), core's
    /// `Limiter::reserve_units` (see `reserve` in `lua/acquire.lua`): the
    /// decisions, the wait (µs) and the time the units count at (µs; the
    /// latest of the limits').
    pub(crate) async fn decide_units(
        &self,
        limits: &[LimitUnits<'_>],
        now: Option<u64>,
        max_wait: Option<ScriptWait>,
    ) -> Result<Decided, StoreError> {
        let plans = self.context.plans.load_full();
        let (mut decisions, mut sent, mut owners) = self.script_limits(limits, &plans)?;
        let mut wait = 0;
        let mut counted_at = 0;
        if !sent.is_empty() {
            let (outcomes, waited) = self
                .run(&mut sent, &mut owners, &plans, now, max_wait)
                .await?;
            wait = waited;
            counted_at = outcomes
                .iter()
                .map(|outcome| outcome.counted_at)
                .max()
                .unwrap_or(0);
            for ((limit, (index, name)), outcome) in sent.iter().zip(&owners).zip(outcomes) {
                let units = limits.get(*index).map_or(0, |limit| limit.units);
                let decision = Decision {
                    allowed: outcome.allowed,
                    rejected: units.saturating_sub(outcome.allowed),
                    remaining: Some(outcome.remaining),
                    retry_after: Duration::from_micros(outcome.retry_after),
                    reset_after: Duration::from_micros(outcome.reset_after),
                };
                let Some(slot) = decisions.get_mut(*index) else {
                    break;
                };
                match (name, slot) {
                    (None, slot) => {
                        let tier = limit.tier.clone();
                        *slot = Some(LimitDecision {
                            decision,
                            policy: Some(limit.rule.policy),
                            name: tier
                                .as_deref()
                                .and_then(|tier| plans.list_for(tier).first_name.clone()),
                            further: Vec::new(),
                            tier: tier.filter(|tier| &**tier != DEFAULT_TIER),
                        });
                    }
                    (Some(name), Some(plan)) => plan.further.push(PolicyDecision {
                        name: Arc::clone(name),
                        policy: limit.rule.policy,
                        decision,
                    }),
                    (Some(_), None) => {}
                }
            }
        }
        let decisions: Vec<LimitDecision> = decisions.into_iter().flatten().collect();
        for decision in decisions.iter().flat_map(|decision| {
            std::iter::once(&decision.decision)
                .chain(decision.further.iter().map(|further| &further.decision))
        }) {
            self.allowed.fetch_add(decision.allowed, Ordering::Relaxed);
            self.rejected
                .fetch_add(decision.rejected, Ordering::Relaxed);
        }
        Ok(Decided {
            decisions,
            wait,
            counted_at,
        })
    }
}

/// What a request's limits become ([`RedisStore::script_limits`]): the
/// decisions made without Redis (exempt plans'), the script limits to send
/// and whose each is.
pub(crate) type ScriptLimits = (Vec<Option<LimitDecision>>, Vec<ScriptLimit>, Vec<Owner>);

/// What [`RedisStore::decide_units`] decided.
pub(crate) struct Decided {
    pub(crate) decisions: Vec<LimitDecision>,
    /// Microseconds the request waits (0 unless it was sent to wait).
    pub(crate) wait: u64,
    /// The time (µs) its units count at, the latest of its limits'.
    pub(crate) counted_at: u64,
}
