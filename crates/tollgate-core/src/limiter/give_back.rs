//! Settlements, each limit on its own: [`Limiter::give_back_units`],
//! refunds, units given back to limits that took them (Envoy's
//! `is_negative_hits`); and [`Limiter::overdraw_units`], units charged
//! whatever is left, into a bounded debt (a request's usage reported after
//! its response, beyond its admission's cost).

use std::sync::Arc;

use super::shard::{Settle, further_key};
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
        self.settle_units(limits, now, Settle::GiveBack)
    }

    /// Charges each limit of `limits` its `units` at `now` (ticks) whatever
    /// it has left, into a debt of at most `overdraft` units: the usage of
    /// a request reported after its response (a route's `charge`), past the
    /// `cost` its admission took. Units past the overdraft are not counted.
    /// While in debt a limit refuses every request, with `retry_after` until
    /// the debt is repaid:
    ///
    /// - fixed window (a calendar window too): the count of the window a
    ///   request at `now` counts in goes up, to at most `limit + overdraft`;
    ///   refused until the window ends;
    /// - sliding log: a run of the units at `now` (the newest run's time
    ///   when `now` is older), the units counted at most `limit +
    ///   overdraft`; refused until enough of the oldest units stop counting;
    /// - token bucket: "full at" moves on by the units' worth, the bucket at
    ///   most `overdraft` tokens below empty; refused until it refills to one
    ///   token.
    ///
    /// Like a refund it moves no time and counts nothing in
    /// [`Stats`](super::Stats); unlike one, a key without state gets one
    /// (marked used at `now`). Returns one decision per limit, in order: what
    /// a look (0 units) at `now` sees after the charge (`remaining` 0 while
    /// in debt). A plan of several policies charges each of them.
    pub fn overdraw_units(
        &self,
        limits: &[LimitUnits<'_>],
        overdraft: u64,
        now: u64,
    ) -> Vec<LimitDecision> {
        self.settle_units(limits, now, Settle::Overdraw { overdraft })
    }

    fn settle_units(
        &self,
        limits: &[LimitUnits<'_>],
        now: u64,
        settle: Settle,
    ) -> Vec<LimitDecision> {
        limits
            .iter()
            .map(|demand| {
                let limit: &Limit<'_> = &demand.limit;
                let hash = self.hash(limit.key(), limit.policy().is_some());
                let mut shard = self.shard(hash).lock();
                let verdict =
                    shard.settle(hash, limit.key(), limit.policy(), now, demand.units, settle);
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
                    let verdict = shard.settle_to(&target, now, demand.units, settle);
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
