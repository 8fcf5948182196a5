//! Deciding several limits at once, all or nothing
//! ([`Limiter::acquire_units`] and [`Limiter::acquire`]): the shards
//! involved locked in index order, every limit checked, then charged only
//! if every one allows (except limits counting refused hits).

use super::*;

impl Limiter {
    /// The rule of [`Limiter::acquire_units`], for limits of any units. Its
    /// Redis twins: `handle` in `crates/tollgate-redis/lua/acquire.lua` (one
    /// script call) and `crates/tollgate-redis/src/split.rs` (limits in
    /// different cluster slots).
    ///
    /// A plan of several policies is several limits here, one per policy,
    /// all in the shard of its key (see [`Limiter::further_hash`]).
    pub(super) fn acquire_together<D: Demand>(&self, limits: &[D], now: u64) -> Vec<LimitDecision> {
        let hashes: Vec<u64> = limits
            .iter()
            .map(|demand| {
                let limit = demand.limit();
                self.hash(limit.key(), limit.policy().is_some())
            })
            .collect();
        let mut locked = self.lock_shards(&hashes);
        let parts = self.parts(limits, &hashes, &locked);
        // Check: what each part has now, touching nothing.
        let checks: Vec<Option<Check>> = parts
            .iter()
            .map(|part| {
                part.target()
                    .map(|target| locked.shard(part.hash).peek_at(&target, now))
            })
            .collect();
        // Whether every all-or-nothing part allows all of its units.
        let everyone_allows = parts.iter().zip(&checks).all(|(part, check)| {
            check.is_none_or(|check| check.counts_refused || check.verdict.remaining >= part.units)
        });
        self.charge(limits, &parts, checks, everyone_allows, &mut locked, now)
    }

    /// The shards holding `hashes`, locked in index order (so that callers
    /// locking several never deadlock).
    pub(super) fn lock_shards(&self, hashes: &[u64]) -> Locked<'_> {
        let mut indices: Vec<usize> = hashes.iter().map(|hash| self.shard_index(*hash)).collect();
        indices.sort_unstable();
        indices.dedup();
        let guards = indices
            .iter()
            .map(|index| self.shards[*index].lock())
            .collect();
        Locked {
            limiter: self,
            indices,
            guards,
        }
    }

    /// Every limit's parts: one per policy (a plan of several has more),
    /// with its rule as the locked shard has it.
    pub(super) fn parts<'k, D: Demand>(
        &self,
        limits: &'k [D],
        hashes: &[u64],
        locked: &Locked<'_>,
    ) -> Vec<Part<'k>> {
        let mut parts: Vec<Part<'k>> = Vec::with_capacity(limits.len());
        for (index, (demand, hash)) in limits.iter().zip(hashes).enumerate() {
            let limit = demand.limit();
            let shard = locked.shard(*hash);
            let rule = match limit.policy() {
                Some(rule) => Some((KeySpace::Policy, *rule)),
                None if shard.policies.is_exempt(*hash, limit.key()) => None,
                None => Some((
                    KeySpace::Plan,
                    *shard.policies.rule_for(shard.tier(*hash, limit.key())),
                )),
            };
            let further = match limit.policy() {
                None => shard.plan_with_further(*hash, limit.key()).cloned(),
                Some(_) => None,
            };
            parts.push(Part {
                limit: index,
                name: None,
                hash: *hash,
                key: std::borrow::Cow::Borrowed(limit.key()),
                rule,
                units: demand.units(),
            });
            for named in further.iter().flat_map(|plan| plan.further.iter()) {
                parts.push(Part {
                    limit: index,
                    name: Some(Arc::clone(&named.name)),
                    hash: self.further_hash(*hash, &named.name, limit.key()),
                    key: std::borrow::Cow::Owned(further_key(&named.name, limit.key())),
                    rule: Some((KeySpace::Further, named.rule)),
                    units: demand.units(),
                });
            }
        }
        parts
    }

    /// Each part charged, or refused, by its `check`: every part's units
    /// are taken when `everyone_allows`, a part counting refused hits is
    /// always charged, and a refused part takes nothing. A limit's further
    /// policies' decisions go into its decision's `further`.
    fn charge<D: Demand>(
        &self,
        limits: &[D],
        parts: &[Part<'_>],
        checks: Vec<Option<Check>>,
        everyone_allows: bool,
        locked: &mut Locked<'_>,
        now: u64,
    ) -> Vec<LimitDecision> {
        let mut decisions: Vec<LimitDecision> = Vec::with_capacity(limits.len());
        for (part, check) in parts.iter().zip(checks) {
            let units = part.units;
            let shard = locked.shard_mut(part.hash);
            let target = part.target();
            let decision = match (check, target) {
                (Some(check), Some(target)) => {
                    let verdict = if units == 0 {
                        // A look: the check is the answer.
                        check.verdict
                    } else if check.counts_refused
                        || everyone_allows
                        || check.verdict.remaining == 0
                    {
                        // Charged, or refused with nothing left (which takes
                        // nothing and says when there is more).
                        shard.apply_to(&target, now, units)
                    } else {
                        // Nothing taken: refused here (some room, not enough)
                        // or by another limit.
                        let retry_after = if check.verdict.remaining < units {
                            shard.preview_at(&target, now, units).retry_after
                        } else {
                            0
                        };
                        shard.count_rejected(units);
                        Verdict {
                            allowed: 0,
                            rejected: units,
                            remaining: check.verdict.remaining,
                            retry_after,
                            reset_after: check.verdict.reset_after,
                        }
                    };
                    self.decision(verdict)
                }
                _ => {
                    // An exempt key's plan.
                    shard.apply(part.hash, &part.key, None, now, units);
                    Decision::exempt(units)
                }
            };
            push_decision(
                &mut decisions,
                part,
                decision,
                &limits[part.limit].limit(),
                shard,
            );
        }
        decisions
    }
}

/// The shards one call holds, locked in index order.
pub(super) struct Locked<'a> {
    limiter: &'a Limiter,
    /// The shards' indices, ascending.
    indices: Vec<usize>,
    /// Their locks, in the same order.
    guards: Vec<parking_lot::MutexGuard<'a, Shard>>,
}

impl Locked<'_> {
    /// The position of the shard of `hash` among the locked ones.
    fn position(&self, hash: u64) -> usize {
        self.indices
            .binary_search(&self.limiter.shard_index(hash))
            .unwrap_or_default()
    }

    /// The locked shard holding `hash`.
    pub(super) fn shard(&self, hash: u64) -> &Shard {
        &self.guards[self.position(hash)]
    }

    /// The locked shard holding `hash`, to change.
    pub(super) fn shard_mut(&mut self, hash: u64) -> &mut Shard {
        let position = self.position(hash);
        &mut self.guards[position]
    }
}

/// One limit of [`Limiter::acquire_together`]: a limit's policy (a plan of
/// several has one part per policy).
pub(super) struct Part<'a> {
    /// The limit's index in the call.
    pub(super) limit: usize,
    /// The further policy's name; `None` for a limit's own (first) policy.
    pub(super) name: Option<Arc<str>>,
    pub(super) hash: u64,
    pub(super) key: std::borrow::Cow<'a, str>,
    /// The key space and rule; `None` for an exempt key's plan.
    pub(super) rule: Option<(KeySpace, VersionedRule)>,
    pub(super) units: u64,
}

impl Part<'_> {
    pub(super) fn target(&self) -> Option<Target<'_>> {
        self.rule.map(|(space, rule)| Target {
            space,
            hash: self.hash,
            key: &self.key,
            rule,
        })
    }
}

/// Adds `part`'s `decision` to `decisions`: a plan's further policy to the
/// further decisions of its limit (the last one added), anything else as
/// the decision of `limit` (kept in `shard`).
pub(super) fn push_decision(
    decisions: &mut Vec<LimitDecision>,
    part: &Part<'_>,
    decision: Decision,
    limit: &Limit<'_>,
    shard: &Shard,
) {
    match (&part.name, part.target()) {
        (Some(name), Some(target)) => {
            if let Some(last) = decisions.last_mut() {
                last.further.push(PolicyDecision {
                    name: Arc::clone(name),
                    policy: target.rule.rule.policy,
                    decision,
                });
            }
        }
        _ => decisions.push(limit_decision(shard, part.hash, limit, decision)),
    }
}
