//! [`Limiter`]: the in-memory limiter. It resolves each key's policy (default,
//! tier or exempt) and applies the algorithm's transition to the key's state in a
//! sharded store, with idle eviction, a cap on tracked keys and exact counters.

mod give_back;
mod limit;
mod policy_set;
mod shard;
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
use crate::policy::{Policy, PolicyError};
use crate::resolution::Resolution;

use limit::Demand;
pub use limit::{Limit, LimitDecision, LimitUnits, PreparedPolicy};
use policy_set::{PolicySet, VersionedRule};
use shard::{Check, Shard};
use tracked::KeyCount;

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
/// A key is idle once `now - last_request >= idle_eviction_s` and then loses its
/// state, as if reset. At most `max_tracked_keys` keys hold state at once: when
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
        let version = || next_version.fetch_add(1, Ordering::Relaxed);
        let compile = |name: String, policy: Policy| {
            Rule::compile(policy, resolution)
                .map(|rule| VersionedRule {
                    rule,
                    version: version(),
                })
                .map_err(|reason| ConfigError::Policy { name, reason })
        };
        let default = compile("default_policy".to_owned(), config.default_policy)?;
        let mut tiers = HashMap::with_capacity(config.tiers.len());
        for (name, policy) in &config.tiers {
            let rule = compile(format!("tiers.{name}"), *policy)?;
            tiers.insert(Arc::from(name.as_str()), rule);
        }
        let exempt = policy_set::exempt_table(&config.exempt_keys, &hasher);
        let policies = Arc::new(PolicySet {
            default,
            tiers: Arc::new(tiers),
            exempt: Arc::new(exempt),
        });
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
    pub fn request_batch(&self, key: &str, now: u64, units: NonZeroU64) -> Decision {
        let units = units.get();
        let hash = self.hasher.hash_one(key);
        let verdict = self.shard(hash).lock().decide(hash, key, now, units);
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
        let verdict = shard.apply(hash, limit.key(), limit.policy(), now, 1);
        let decision = verdict.map_or(Decision::exempt(1), |verdict| self.decision(verdict));
        limit_decision(&shard, hash, limit, decision)
    }

    /// The rule of [`Limiter::acquire_units`], for limits of any units. Its
    /// Redis twins: `handle` in `crates/tollgate-redis/lua/acquire.lua` (one
    /// script call) and `crates/tollgate-redis/src/split.rs` (limits in
    /// different cluster slots).
    fn acquire_together<D: Demand>(&self, limits: &[D], now: u64) -> Vec<LimitDecision> {
        let hashes: Vec<u64> = limits
            .iter()
            .map(|demand| {
                let limit = demand.limit();
                self.hash(limit.key(), limit.policy().is_some())
            })
            .collect();
        let mut indices: Vec<usize> = hashes.iter().map(|hash| self.shard_index(*hash)).collect();
        indices.sort_unstable();
        indices.dedup();
        let mut guards: Vec<_> = indices
            .iter()
            .map(|index| self.shards[*index].lock())
            .collect();
        let position = |hash: u64| {
            indices
                .binary_search(&self.shard_index(hash))
                .unwrap_or_default()
        };
        // Check: what each limit has now, touching nothing.
        let checks: Vec<Option<Check>> = limits
            .iter()
            .zip(&hashes)
            .map(|(demand, hash)| {
                let limit = demand.limit();
                guards[position(*hash)].peek(*hash, limit.key(), limit.policy(), now)
            })
            .collect();
        // Whether every all-or-nothing limit allows all of its units.
        let everyone_allows = limits.iter().zip(&checks).all(|(demand, check)| {
            check.is_none_or(|check| {
                check.counts_refused || check.verdict.remaining >= demand.units()
            })
        });
        limits
            .iter()
            .zip(&hashes)
            .zip(checks)
            .map(|((demand, hash), check)| {
                let (limit, units) = (demand.limit(), demand.units());
                let shard = &mut guards[position(*hash)];
                let decision = match check {
                    None => {
                        shard.apply(*hash, limit.key(), None, now, units);
                        Decision::exempt(units)
                    }
                    // A look: the check is the answer.
                    Some(check) if units == 0 => self.decision(check.verdict),
                    Some(check)
                        if check.counts_refused
                            || everyone_allows
                            || check.verdict.remaining == 0 =>
                    {
                        // Charged, or refused with nothing left (which takes
                        // nothing and says when there is more).
                        let verdict = shard.apply(*hash, limit.key(), limit.policy(), now, units);
                        verdict.map_or(Decision::exempt(units), |verdict| self.decision(verdict))
                    }
                    Some(check) => {
                        // Nothing taken: refused here (some room, not enough)
                        // or by another limit.
                        let retry_after = if check.verdict.remaining < units {
                            shard
                                .preview(*hash, limit.key(), limit.policy(), now, units)
                                .map_or(0, |preview| preview.retry_after)
                        } else {
                            0
                        };
                        shard.count_rejected(units);
                        self.decision(Verdict {
                            allowed: 0,
                            rejected: units,
                            remaining: check.verdict.remaining,
                            retry_after,
                            reset_after: check.verdict.reset_after,
                        })
                    }
                };
                limit_decision(shard, *hash, &limit, decision)
            })
            .collect()
    }

    /// Compiles `policy` for this limiter's clock, to pass in [`Limit::Policy`].
    ///
    /// # Errors
    ///
    /// [`PolicyError::WindowTooLong`] when the window does not fit the resolution.
    pub fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        Ok(PreparedPolicy::new(Rule::compile(policy, self.resolution)?))
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
        self.policies.lock().default.rule.policy
    }

    /// Replaces the default policy and drops the state of every key on it, even
    /// when the new policy equals the old. Keys on tiers keep their state.
    /// Returns the policy now in force.
    ///
    /// Each shard switches under its own lock, so every decision sees either the
    /// old policy with the old state or the new policy with fresh state.
    ///
    /// # Errors
    ///
    /// [`PolicyError::WindowTooLong`] when the window does not fit the limiter's
    /// resolution; nothing changes then.
    pub fn configure(&self, policy: Policy) -> Result<Policy, PolicyError> {
        let rule = Rule::compile(policy, self.resolution)?;
        let mut policies = self.policies.lock();
        let mut next = PolicySet::clone(&policies);
        next.default = VersionedRule {
            rule,
            version: self.next_version.fetch_add(1, Ordering::Relaxed),
        };
        let next = Arc::new(next);
        for shard in self.shards.iter() {
            shard.lock().replace_policies(Arc::clone(&next));
        }
        *policies = next;
        Ok(policy)
    }

    /// Puts a whole new configuration in force (a reload): default policy,
    /// tiers, exempt keys, idle eviction and key cap. Keys whose rule is
    /// unchanged keep their state; keys whose rule changed or disappeared start
    /// afresh; tier assignments stay (an assignment to a tier no longer
    /// configured falls back to the default policy).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the configuration is invalid; nothing changes then.
    pub fn reconfigure(&self, config: &LimiterConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let mut policies = self.policies.lock();
        let rule = |name: String, policy: Policy, current: Option<&VersionedRule>| match current {
            Some(current) if current.rule.policy == policy => Ok(*current),
            _ => Rule::compile(policy, self.resolution)
                .map(|rule| VersionedRule {
                    rule,
                    version: self.next_version.fetch_add(1, Ordering::Relaxed),
                })
                .map_err(|reason| ConfigError::Policy { name, reason }),
        };
        let default = rule(
            "default_policy".to_owned(),
            config.default_policy,
            Some(&policies.default),
        )?;
        let mut tiers = HashMap::with_capacity(config.tiers.len());
        for (name, policy) in &config.tiers {
            let current = policies.tiers.get(name.as_str());
            tiers.insert(
                Arc::from(name.as_str()),
                rule(format!("tiers.{name}"), *policy, current)?,
            );
        }
        let next = Arc::new(PolicySet {
            default,
            tiers: Arc::new(tiers),
            exempt: Arc::new(policy_set::exempt_table(&config.exempt_keys, &self.hasher)),
        });
        let idle_after = idle_ticks(config, self.resolution);
        self.count.set_cap(config.max_tracked_keys);
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.replace_policies(Arc::clone(&next));
            shard.set_idle_after(idle_after);
        }
        // A lower cap: drop least recently used keys evenly across the shards.
        let mut shed = true;
        while shed {
            shed = false;
            for shard in self.shards.iter() {
                shed |= shard.lock().shed_one();
            }
        }
        *policies = next;
        Ok(())
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
    pub fn reset(&self, key: &str, now: u64) -> bool {
        let hash = self.hasher.hash_one(key);
        self.shard(hash).lock().reset(hash, key, now)
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
/// the key's tier (read from `shard`, which holds the key).
fn limit_decision(
    shard: &Shard,
    hash: u64,
    limit: &Limit<'_>,
    decision: Decision,
) -> LimitDecision {
    let (policy, tier) = match limit.policy() {
        Some(rule) => (Some(rule.rule.policy), None),
        None => shard.plan_of(hash, limit.key()),
    };
    LimitDecision {
        decision,
        policy,
        tier,
    }
}

/// The idle eviction age in ticks.
fn idle_ticks(config: &LimiterConfig, resolution: Resolution) -> u64 {
    resolution
        .ticks_from_seconds(config.idle_eviction_s)
        .unwrap_or(u64::MAX)
}
