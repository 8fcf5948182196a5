//! [`Limiter`]: the in-memory limiter. It resolves each key's policy (default,
//! tier or exempt) and applies the algorithm's transition to the key's state in a
//! sharded store, with idle eviction, a cap on tracked keys and exact counters.

mod configure;
use configure::{compile_policies, idle_ticks};
mod give_back;
mod limit;
mod policy_set;
mod reserve;
mod shard;
mod together;
mod tracked;

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use foldhash::fast::RandomState;
use parking_lot::Mutex;

use crate::algorithm::{Rule, Verdict};
use crate::config::{ConfigError, DEFAULT_TIER, LimiterConfig};
use crate::decision::Decision;
use crate::plan::{NamedPolicy, PlanPolicies};
use crate::policy::{Policy, PolicyError};
use crate::resolution::Resolution;

use limit::Demand;
pub use limit::{Limit, LimitDecision, LimitUnits, PolicyDecision, PolicyReport, PreparedPolicy};
use policy_set::{NamedRule, PlanRules, PolicySet, VersionedRule};
pub use reserve::Reservation;
use shard::{Check, Shard, Target, further_key};
use tracked::{KeyCount, KeySpace};

/// Shards of the store; a power of two. Each has its own lock, so decisions for
/// keys in different shards never wait for each other.
const SHARDS: usize = 64;

/// A tier name that is neither configured nor `default`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier: {0}")]
pub struct UnknownTier(pub String);

/// Totals since the limiter started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Keys holding limiter state now (never an idle key, never an exempt one).
    pub tracked_keys: u64,
    /// Units allowed, exempt keys included. Exact: 128 bits never wrap.
    pub allowed: u128,
    /// Units rejected.
    pub rejected: u128,
}

/// The in-memory rate limiter for many keys.
///
/// Each key is limited by exactly one policy: its tier's, or the default policy.
/// Exempt keys are never limited and hold no state. Time is passed in as `now`,
/// an integer count of ticks of the limiter's [`Resolution`] (seconds for the
/// operations harness, nanoseconds from a [`Clock`](crate::Clock) for a server).
/// A key is idle once `now - last_request >= idle_eviction_s` (or longer: the
/// longest [`Policy::counted_span_s`] of the policies configured or prepared, so
/// a day's or a month's quota is not forgotten before its end) and then loses
/// its state, as if reset. At most `max_tracked_keys` keys hold state at once: when
/// the cap is reached, a new key pushes out the least recently used key of its
/// shard (one of 64), an approximation of the least recently used key overall;
/// a new key landing in an empty shard is admitted, so the count can pass the
/// cap by at most 64. A key pushed out starts afresh when it returns, so under
/// that pressure it may get more than its limit.
///
/// The limiter is shared by reference between threads: keys are spread over 64
/// shards, each under its own lock, so there is no global lock on the decision
/// path. A `configure` or `assign_tier` takes effect for decisions that start
/// after it returns; a decision already under way when the default policy is
/// replaced may still finish under the old one.
///
/// ```
/// use std::num::NonZeroU64;
/// use tollgate_core::{Limiter, LimiterConfig, Resolution};
///
/// let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
/// // The default policy: 5 requests per aligned 60 s window.
/// let first = limiter.request("sk_a", 120);
/// assert!(first.is_allowed());
/// assert_eq!(first.remaining, Some(4));
/// let batch = limiter.request_batch("sk_a", 121, NonZeroU64::new(7).unwrap());
/// assert_eq!((batch.allowed, batch.rejected), (4, 3));
/// assert_eq!(batch.retry_after_seconds(), 59);
/// ```
pub struct Limiter {
    /// The policies in force; each shard holds the same `Arc`. Locked only to
    /// replace them, never on the decision path.
    policies: Mutex<Arc<PolicySet>>,
    /// The cap on tracked keys and their number, shared by the shards.
    count: Arc<KeyCount>,
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    hasher: RandomState,
    resolution: Resolution,
    /// The next rule version to hand out.
    next_version: AtomicU64,
    /// The longest `Policy::counted_span_s` of the policies prepared.
    prepared_whole_after_s: AtomicU64,
}

impl std::fmt::Debug for Limiter {
    /// Counts and policies only: never a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("resolution", &self.resolution)
            .field("policies", &*self.policies.lock())
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter limiting by `config`, counting time in ticks of `resolution`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the configuration is invalid, or when a window does
    /// not fit the resolution (windows over about 584 years in nanoseconds).
    pub fn new(config: &LimiterConfig, resolution: Resolution) -> Result<Self, ConfigError> {
        config.validate()?;
        let hasher = RandomState::default();
        let next_version = AtomicU64::new(0);
        let policies = Arc::new(compile_policies(
            config,
            None,
            resolution,
            &next_version,
            &hasher,
        )?);
        let idle_after = idle_ticks(config, resolution);
        let count = KeyCount::new(config.max_tracked_keys, resolution);
        let shards = (0..SHARDS)
            .map(|_| {
                let shard = Shard::new(Arc::clone(&policies), Arc::clone(&count), idle_after);
                CachePadded::new(Mutex::new(shard))
            })
            .collect();
        Ok(Limiter {
            policies: Mutex::new(policies),
            count,
            shards,
            hasher,
            resolution,
            next_version,
            prepared_whole_after_s: AtomicU64::new(0),
        })
    }

    /// The unit of `now` in every call.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// One request of `key` at `now` (ticks): a batch of one unit.
    pub fn request(&self, key: &str, now: u64) -> Decision {
        self.request_batch(key, now, NonZeroU64::MIN)
    }

    /// `units` requests of `key` at `now` (ticks), decided exactly as that many
    /// consecutive single requests, in O(1) whatever `units` is.
    ///
    /// A plan of several policies holds each of those single requests to
    /// every policy at once, as [`Limiter::acquire`] does: the batch's
    /// allowed units are those every policy allows (each charged them), the
    /// rest are refused (a refused unit uses nothing); `remaining` and
    /// `reset_after` are those of the policy with the least remaining after
    /// the batch (the longer reset among equals), `retry_after` the longest
    /// wait for one more unit among the policies.
    pub fn request_batch(&self, key: &str, now: u64, units: NonZeroU64) -> Decision {
        let units = units.get();
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        if let Some(plan) = shard.plan_with_further(hash, key).cloned() {
            let verdict = self.plan_batch(&mut shard, hash, key, &plan, now, units);
            return self.decision(verdict);
        }
        let verdict = shard.decide(hash, key, now, units);
        drop(shard);
        match verdict {
            Some(verdict) => self.decision(verdict),
            None => Decision::exempt(units),
        }
    }

    /// One request held to every limit in `limits` at once, all or nothing: the
    /// request takes one unit from each limit if every one of them allows it,
    /// and otherwise takes nothing from any. Returns one decision per limit, in
    /// order:
    ///
    /// - allowed: `allowed = 1`, as [`Limiter::request`] would say;
    /// - refused by this limit: `rejected = 1` with its own `retry_after`;
    /// - allowed by this limit but refused by another: `rejected = 1`,
    ///   `retry_after` zero and `remaining` unchanged, since nothing was taken.
    ///
    /// A limit whose policy counts refused units
    /// ([`Policy::counts_refused`]) is the exception: it is charged its unit
    /// whatever the others decide, and refuses none of them; see
    /// [`Limiter::acquire_units`], of which this is the case of one unit per
    /// limit.
    ///
    /// A [`Limit::Plan`] of an exempt key is always allowed and holds no state.
    /// The shards involved are locked together (in index order, so concurrent
    /// calls never deadlock), so no other decision comes between the check and
    /// the charge. The limits' keys should be distinct.
    pub fn acquire(&self, limits: &[Limit<'_>], now: u64) -> Vec<LimitDecision> {
        if let [limit] = limits {
            return vec![self.acquire_one(limit, now)];
        }
        self.acquire_together(limits, now)
    }

    /// One request held to every limit in `limits` at once, each charged its
    /// own `units`. The rule:
    ///
    /// - A limit whose policy counts refused units
    ///   ([`Policy::counts_refused`]) decides alone and is always charged its
    ///   units, whatever the others decide; nor does it refuse the others. This
    ///   is envoyproxy/ratelimit's rule: each descriptor's counter is
    ///   incremented by the request's hits whether or not another descriptor
    ///   is over its limit.
    /// - The other limits are all or nothing among themselves: each is checked
    ///   with its units, and each is charged its units only if every one of
    ///   them allows all of its units. Otherwise none of them is charged
    ///   anything: one that would have allowed its units reports
    ///   `rejected = units`, `retry_after` zero and `remaining` unchanged; one
    ///   that refuses reports `rejected = units`, `remaining` what it has, and
    ///   the `retry_after` a batch of `units` would be told there (how long
    ///   until one more unit than it has now is allowed: waiting that long
    ///   does not promise room for all `units`).
    /// - `units = 0` looks at a limit: nothing charged, nothing changed,
    ///   nothing refused (its decision says what it has left).
    /// - A [`Limit::Plan`] of an exempt key allows its units and holds no state.
    ///
    /// A single limit of `units` is therefore all or nothing too (unlike
    /// [`Limiter::request_batch`], which allows what fits), unless its policy
    /// counts refused units. Every limit with one unit is exactly
    /// [`Limiter::acquire`]. Returns one decision per limit, in order. The
    /// shards involved are locked together, so the whole call is atomic; the
    /// limits' keys should be distinct.
    pub fn acquire_units(&self, limits: &[LimitUnits<'_>], now: u64) -> Vec<LimitDecision> {
        if let [LimitUnits { limit, units: 1 }] = limits {
            return vec![self.acquire_one(limit, now)];
        }
        self.acquire_together(limits, now)
    }

    /// One unit of a lone limit at `now`: the same decision as
    /// `acquire(&[limit], now)[0]`, without a `Vec` (its own decision is the
    /// whole answer, so the check before the charge is not needed).
    #[inline]
    pub fn acquire_one(&self, limit: &Limit<'_>, now: u64) -> LimitDecision {
        let hash = self.hash(limit.key(), limit.policy().is_some());
        let mut shard = self.shard(hash).lock();
        if limit.policy().is_none() && shard.plan_with_further(hash, limit.key()).is_some() {
            // A plan of several policies: decided together.
            drop(shard);
            let mut decisions = self.acquire_together(std::slice::from_ref(limit), now);
            if let Some(decision) = decisions.pop() {
                return decision;
            }
            shard = self.shard(hash).lock();
        }
        let verdict = shard.apply(hash, limit.key(), limit.policy(), now, 1);
        let decision = verdict.map_or(Decision::exempt(1), |verdict| self.decision(verdict));
        limit_decision(&shard, hash, limit, decision)
    }

    /// The hash of the state of `key`'s further policy `name`, for a key of
    /// plan hash `hash`: its own, but with the bits that pick the shard taken
    /// from `hash`, so every policy of a plan lives in the shard of the key
    /// (and its tier assignment), decided under one lock.
    fn further_hash(&self, hash: u64, name: &str, key: &str) -> u64 {
        let shard_bits = (SHARDS as u64 - 1) << 40;
        (self.hasher.hash_one((2u8, name, key)) & !shard_bits) | (hash & shard_bits)
    }

    /// Compiles `policy` for this limiter's clock, to pass in [`Limit::Policy`].
    ///
    /// # Errors
    ///
    /// [`PolicyError::WindowTooLong`] when the window does not fit the resolution.
    pub fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        let prepared = PreparedPolicy::new(Rule::compile(policy, self.resolution)?);
        self.keep_state_for(policy.counted_span_s());
        Ok(prepared)
    }

    /// Whether `key` is exempt from its plan.
    pub fn is_exempt(&self, key: &str) -> bool {
        let hash = self.hasher.hash_one(key);
        self.shard(hash).lock().policies.is_exempt(hash, key)
    }

    /// `key`'s budget at `now` (ticks) without using any: what is left and when
    /// it refills. `None` for a key holding no state (new, idle or reset), whose
    /// budget is the whole of its policy; a [`Decision::exempt`] of 0 units for an
    /// exempt key.
    pub fn inspect(&self, key: &str, now: u64) -> Option<Decision> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        if shard.policies.is_exempt(hash, key) {
            return Some(Decision::exempt(0));
        }
        let verdict = shard.inspect(hash, key, now)?;
        drop(shard);
        Some(self.decision(verdict))
    }

    /// The policy that limits `key`: its tier's or the default; `None` when the
    /// key is exempt.
    pub fn policy_for(&self, key: &str) -> Option<Policy> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        if shard.policies.is_exempt(hash, key) {
            return None;
        }
        Some(shard.policies.rule_for(shard.tier(hash, key)).rule.policy)
    }

    /// The default policy in force.
    pub fn default_policy(&self) -> Policy {
        self.policies.lock().default.first.rule.policy
    }

    /// Puts `key` on `tier` (`"default"`: the default policy). Assigning another
    /// tier drops the key's state; assigning the tier it has keeps it. The
    /// assignment itself is kept for good: eviction, `reset` and `configure` leave
    /// it. An exempt key may be assigned a tier and stays exempt.
    ///
    /// # Errors
    ///
    /// [`UnknownTier`] when `tier` is neither configured nor `default`; nothing
    /// changes then.
    pub fn assign_tier(&self, key: &str, tier: &str) -> Result<(), UnknownTier> {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let tier = if tier == DEFAULT_TIER {
            None
        } else {
            let (name, _) = shard
                .policies
                .tiers
                .get_key_value(tier)
                .ok_or_else(|| UnknownTier(tier.to_owned()))?;
            Some(Arc::clone(name))
        };
        if shard.tier(hash, key) != tier.as_deref() {
            self.remove_further(&mut shard, hash, key, 0);
        }
        shard.assign_tier(hash, key, tier, &self.hasher);
        Ok(())
    }

    /// `key`'s tier, `"default"` when it has none.
    pub fn tier_of(&self, key: &str) -> String {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.tier(hash, key).unwrap_or(DEFAULT_TIER).to_owned()
    }

    /// Drops `key`'s limiter state (not its tier); whether it had state at `now`
    /// (ticks). A key idle at `now` has none.
    ///
    /// For a plan of several policies, every policy's state goes; whether
    /// any of them had state.
    pub fn reset(&self, key: &str, now: u64) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let further = self.remove_further(&mut shard, hash, key, now);
        shard.reset(hash, key, now) | further
    }

    /// Drops the state of `key`'s further policies (those of its plan in
    /// force); whether any held state at `now`.
    fn remove_further(&self, shard: &mut Shard, hash: u64, key: &str, now: u64) -> bool {
        let Some(plan) = shard.plan_with_further(hash, key).cloned() else {
            return false;
        };
        let mut removed = false;
        for named in plan.further.iter() {
            let further = further_key(&named.name, key);
            removed |= shard.remove_at(&self.further_target(hash, key, named, &further), now);
        }
        removed
    }

    /// The state of `key`'s further policy `named`, whose state key is
    /// `further` ([`further_key`]).
    fn further_target<'k>(
        &self,
        hash: u64,
        key: &str,
        named: &NamedRule,
        further: &'k str,
    ) -> Target<'k> {
        Target {
            space: KeySpace::Further,
            hash: self.further_hash(hash, &named.name, key),
            key: further,
            rule: named.rule,
        }
    }

    /// What the further policies of `key`'s plan have at `now`, using none
    /// of it: the first policy's name (`None` for a one-policy plan) and
    /// each further policy's name, policy and state (`None` when it holds
    /// none). Nothing for an exempt key or a one-policy plan.
    pub fn inspect_further(&self, key: &str, now: u64) -> (Option<String>, Vec<PolicyReport>) {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        if shard.policies.is_exempt(hash, key) {
            return (None, Vec::new());
        }
        let plan = shard.policies.plan_for(shard.tier(hash, key));
        let first_name = plan.first_name.as_deref().map(str::to_owned);
        let reports = plan
            .further
            .iter()
            .map(|named| {
                let further = further_key(&named.name, key);
                let target = self.further_target(hash, key, named, &further);
                PolicyReport {
                    name: named.name.to_string(),
                    policy: named.rule.rule.policy,
                    state: shard
                        .inspect_at(&target, now)
                        .map(|verdict| self.decision(verdict)),
                }
            })
            .collect();
        (first_name, reports)
    }

    /// A batch of `units` for a plan of several policies; see
    /// [`Limiter::request_batch`].
    fn plan_batch(
        &self,
        shard: &mut Shard,
        hash: u64,
        key: &str,
        plan: &PlanRules,
        now: u64,
        units: u64,
    ) -> Verdict {
        let keys: Vec<String> = plan
            .further
            .iter()
            .map(|named| further_key(&named.name, key))
            .collect();
        let targets: Vec<Target<'_>> = std::iter::once(Target {
            space: KeySpace::Plan,
            hash,
            key,
            rule: plan.first,
        })
        .chain(
            plan.further
                .iter()
                .zip(&keys)
                .map(|(named, further)| self.further_target(hash, key, named, further)),
        )
        .collect();
        let counts = |target: &Target<'_>| target.rule.rule.policy.counts_refused();
        // Units every all-or-nothing policy allows: a single request is
        // allowed only if all allow it, and a refused one changes nothing.
        let fits = targets
            .iter()
            .filter(|target| !counts(target))
            .map(|target| shard.preview_at(target, now, units).allowed)
            .min()
            .unwrap_or(units);
        let mut allowed = fits;
        let mut after = Vec::with_capacity(targets.len());
        for target in &targets {
            let verdict = if counts(target) {
                // Charged every unit, refusing none of the others.
                let verdict = shard.apply_to(target, now, units);
                allowed = allowed.min(verdict.allowed);
                verdict
            } else if fits > 0 {
                let verdict = shard.apply_to(target, now, fits);
                shard.count_rejected(units - fits);
                verdict
            } else {
                shard.count_rejected(units);
                shard.peek_at(target, now).verdict
            };
            after.push(verdict);
        }
        let retry_after = if allowed < units {
            targets
                .iter()
                .map(|target| shard.preview_at(target, now, 1).retry_after)
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        let binding = after
            .iter()
            .min_by_key(|verdict| (verdict.remaining, std::cmp::Reverse(verdict.reset_after)))
            .copied()
            .unwrap_or_default();
        Verdict {
            allowed,
            rejected: units - allowed,
            remaining: binding.remaining,
            retry_after,
            reset_after: binding.reset_after,
        }
    }

    /// Drops the state of every key idle at `now` (ticks) and returns the totals.
    /// Visits each shard once; the eviction is amortised O(1) per key.
    pub fn stats(&self, now: u64) -> Stats {
        let mut stats = Stats::default();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.evict_idle(now);
            stats.tracked_keys += shard.tracked_keys() as u64;
            stats.allowed += shard.allowed;
            stats.rejected += shard.rejected;
        }
        stats
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[self.shard_index(hash)]
    }

    fn shard_index(&self, hash: u64) -> usize {
        // The table inside a shard indexes by the low bits and tags by the top 7;
        // pick the shard from bits in between so the three stay independent.
        (hash >> 40) as usize & (SHARDS - 1)
    }

    /// The hash of a plan key, or of a key of an explicit policy (another key
    /// space: the same text hashes differently).
    fn hash(&self, key: &str, explicit_policy: bool) -> u64 {
        if explicit_policy {
            self.hasher.hash_one((1u8, key))
        } else {
            self.hasher.hash_one(key)
        }
    }

    fn decision(&self, verdict: Verdict) -> Decision {
        Decision {
            allowed: verdict.allowed,
            rejected: verdict.rejected,
            remaining: Some(verdict.remaining),
            retry_after: self.resolution.duration(verdict.retry_after),
            reset_after: self.resolution.duration(verdict.reset_after),
        }
    }
}

/// A limit's `decision` with the policy it was decided under and, for a plan,
/// the key's tier and its first policy's name (read from `shard`, which holds
/// the key). Its further policies' decisions are added by the caller.
fn limit_decision(
    shard: &Shard,
    hash: u64,
    limit: &Limit<'_>,
    decision: Decision,
) -> LimitDecision {
    let plan = match limit.policy() {
        Some(rule) => shard::PlanOf {
            policy: Some(rule.rule.policy),
            ..Default::default()
        },
        None => shard.plan_of(hash, limit.key()),
    };
    LimitDecision {
        decision,
        policy: plan.policy,
        tier: plan.tier,
        name: plan.name,
        further: Vec::new(),
    }
}
