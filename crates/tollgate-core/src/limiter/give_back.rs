//! [`Limiter::give_back_units`]: refunds, units given back to limits that
//! took them (Envoy's `is_negative_hits`), each limit on its own.

use std::sync::Arc;

use super::shard::further_key;
use super::{Limit, LimitDecision, LimitUnits, Limiter, PolicyDecision, limit_decision};
use crate::decision::Decision;

impl Limiter {
    /// Gives back to each limit of `limits` its `units` at `now` (ticks): a
    /// refund, such as an Envoy descriptor's `hits_addend` sent with
    /// `is_negative_hits` to return an over-estimate. Never grants more than
    /// the policy allows:
    ///
    /// - fixed window (counting refused units or not): the count of the
    ///   window a request at `now` counts in goes down by `units`, not below
    ///   0; a state of an earlier window is fresh already and stays as it is;
    /// - sliding log: up to `units` of the newest units still counted at
    ///   `now` are dropped;
    /// - token bucket: up to `units` tokens (at most `burst`) go back in,
    ///   never past full.
    ///
    /// A refund is not a request: it moves no time (a `now` older than the
    /// state's is taken as [`Limiter::acquire_units`] takes it: in the stored
    /// window, at the newest run's time), does not mark the key used, counts
    /// nothing in [`Stats`](super::Stats), and a key holding no state (new,
    /// idle, reset) stays without state. A key left with nothing counted at
    /// `now` (a count of 0, no unit counting, a full bucket) is as if it had
    /// never been charged: a later request, even at an older `now`, finds a
    /// fresh state. Each limit is given back on its own, atomically (nothing
    /// is refused, so nothing is decided together).
    ///
    /// Returns one decision per limit, in order: what a look (0 units) at
    /// `now` sees after the refund: `allowed` and `rejected` 0, `remaining`
    /// after it, `retry_after` zero (except for a window counting refused
    /// units still past its limit: the wait until it ends) and
    /// `reset_after`. A [`Limit::Plan`] of an exempt key holds no state and
    /// gets [`Decision::exempt`] of 0 units. A plan of several policies
    /// gives back `units` to each of them ([`LimitDecision::further`]).
    pub fn give_back_units(&self, limits: &[LimitUnits<'_>], now: u64) -> Vec<LimitDecision> {
        limits
            .iter()
            .map(|demand| {
                let limit: &Limit<'_> = &demand.limit;
                let hash = self.hash(limit.key(), limit.policy().is_some());
                let mut shard = self.shard(hash).lock();
                let verdict = shard.give_back(hash, limit.key(), limit.policy(), now, demand.units);
                let decision =
                    verdict.map_or(Decision::exempt(0), |verdict| self.decision(verdict));
                let mut decided = limit_decision(&shard, hash, limit, decision);
                // A plan of several policies: each gives back on its own.
                let plan = match limit.policy() {
                    None => shard.plan_with_further(hash, limit.key()).cloned(),
                    Some(_) => None,
                };
                for named in plan.iter().flat_map(|plan| plan.further.iter()) {
                    let further = further_key(&named.name, limit.key());
                    let target = self.further_target(hash, limit.key(), named, &further);
                    let verdict = shard.give_back_to(&target, now, demand.units);
                    decided.further.push(PolicyDecision {
                        name: Arc::clone(&named.name),
                        policy: named.rule.rule.policy,
                        decision: self.decision(verdict),
                    });
                }
                decided
            })
            .collect()
    }
}
