//! One shard of the in-memory store: the limiter state of the keys that hash to
//! it, their tier assignments, the policies in force and the shard's share of
//! the counters. A shard is always used under its own lock.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::policy_set::{PolicySet, VersionedRule};
use super::tracked::{KeyCount, KeySpace, TrackedKeys};
use crate::algorithm::{State, Verdict};
use crate::policy::Policy;

/// A tier assignment: the key and its tier's name.
type Assignment = (Box<str>, Arc<str>);

/// What a limit has now, read by [`Shard::peek`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Check {
    /// A request of zero units' verdict.
    pub(crate) verdict: Verdict,
    /// Whether the limit's rule counts refused units.
    pub(crate) counts_refused: bool,
}

pub(crate) struct Shard {
    /// The policies in force for this shard's keys; replaced by `configure`
    /// under this shard's lock, so each decision sees one consistent set.
    pub(crate) policies: Arc<PolicySet>,
    /// Keys holding limiter state.
    tracked: TrackedKeys,
    /// Tier assignments; never dropped by eviction, reset or `configure`.
    assignments: HashTable<Assignment>,
    pub(crate) allowed: u128,
    pub(crate) rejected: u128,
}

impl std::fmt::Debug for Shard {
    /// Counts only: never a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("tracked", &self.tracked)
            .field("assignments", &self.assignments.len())
            .finish_non_exhaustive()
    }
}

impl Shard {
    pub(crate) fn new(policies: Arc<PolicySet>, count: Arc<KeyCount>, idle_after: u64) -> Self {
        Shard {
            policies,
            tracked: TrackedKeys::new(count, idle_after),
            assignments: HashTable::new(),
            allowed: 0,
            rejected: 0,
        }
    }

    /// Applies `units` requests of `key` at `now` under its plan; `None` for
    /// an exempt key, which is counted as allowed and holds no state.
    pub(crate) fn decide(&mut self, hash: u64, key: &str, now: u64, units: u64) -> Option<Verdict> {
        self.apply(hash, key, None, now, units)
    }

    /// Applies `units` requests of `key` at `now`, under `policy` when given,
    /// else under the key's plan (`None` for an exempt key). `units == 0`
    /// inspects, marking the key used but counting nothing.
    pub(crate) fn apply(
        &mut self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
        now: u64,
        units: u64,
    ) -> Option<Verdict> {
        let Some((space, rule)) = self.rule_of(hash, key, policy) else {
            self.allowed += u128::from(units);
            return None;
        };
        self.tracked.evict_idle(now);
        let algorithm = rule.rule.policy.algorithm();
        let state = self
            .tracked
            .use_state(space, hash, key, now, rule.version, algorithm);
        let verdict = state.decide(&rule.rule, now, units);
        self.allowed += u128::from(verdict.allowed);
        self.rejected += u128::from(verdict.rejected);
        Some(verdict)
    }

    /// What `key` would see at `now` for zero units, under `policy` when given,
    /// else its plan (`None` for an exempt key), and whether its rule counts
    /// refused units: reads only, creates and evicts nothing, so checking
    /// several limits never disturbs any of them.
    pub(crate) fn peek(
        &self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
        now: u64,
    ) -> Option<Check> {
        let (space, rule) = self.rule_of(hash, key, policy)?;
        let verdict = match self.tracked.get(space, hash, key, now, rule.version) {
            Some(tracked) => tracked.state.peek(&rule.rule, now),
            None => State::new(rule.rule.policy.algorithm()).peek(&rule.rule, now),
        };
        Some(Check {
            verdict,
            counts_refused: rule.rule.policy.counts_refused(),
        })
    }

    /// What `units` requests of `key` at `now` would be told, changing
    /// nothing (the state is decided as a copy); `None` for an exempt key.
    pub(crate) fn preview(
        &self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
        now: u64,
        units: u64,
    ) -> Option<Verdict> {
        let (space, rule) = self.rule_of(hash, key, policy)?;
        let mut state = match self.tracked.get(space, hash, key, now, rule.version) {
            Some(tracked) => tracked.state.clone(),
            None => State::new(rule.rule.policy.algorithm()),
        };
        Some(state.decide(&rule.rule, now, units))
    }

    /// Gives back `units` of `key` at `now` (see [`State::give_back`]), under
    /// `policy` when given, else its plan; `None` for an exempt key. A key
    /// holding no state (new, idle, or under another rule) stays without
    /// state, and is answered as a fresh one. Counts nothing.
    pub(crate) fn give_back(
        &mut self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
        now: u64,
        units: u64,
    ) -> Option<Verdict> {
        let (space, rule) = self.rule_of(hash, key, policy)?;
        let fresh = State::new(rule.rule.policy.algorithm());
        let Some(state) = self.tracked.state_mut(space, hash, key, now, rule.version) else {
            return Some(fresh.peek(&rule.rule, now));
        };
        let verdict = state.give_back(&rule.rule, now, units);
        if *state == fresh {
            // Everything given back: the key holds no state, as on Redis,
            // which deletes it.
            self.tracked.remove(space, hash, key, now);
        }
        Some(verdict)
    }

    /// The key space and rule limiting `key`: `policy` when given, else the
    /// key's plan; `None` when the key is exempt from its plan.
    fn rule_of(
        &self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
    ) -> Option<(KeySpace, VersionedRule)> {
        match policy {
            Some(rule) => Some((KeySpace::Policy, *rule)),
            None if self.policies.is_exempt(hash, key) => None,
            None => Some((
                KeySpace::Plan,
                *self.policies.rule_for(self.tier(hash, key)),
            )),
        }
    }

    /// Counts `units` rejected without touching any state: a request refused by
    /// another limit.
    pub(crate) fn count_rejected(&mut self, units: u64) {
        self.rejected += u128::from(units);
    }

    /// Reads `key`'s state at `now` as a request of zero units would see it,
    /// without using budget, touching its last use or creating state.
    pub(crate) fn inspect(&self, hash: u64, key: &str, now: u64) -> Option<Verdict> {
        let rule = self.policies.rule_for(self.tier(hash, key));
        let tracked = self
            .tracked
            .get(KeySpace::Plan, hash, key, now, rule.version)?;
        Some(tracked.state.peek(&rule.rule, now))
    }

    /// Drops the state of keys idle at `now`.
    pub(crate) fn evict_idle(&mut self, now: u64) {
        self.tracked.evict_every_idle(now);
    }

    /// Drops `key`'s state; whether it had state at `now`.
    pub(crate) fn reset(&mut self, hash: u64, key: &str, now: u64) -> bool {
        self.tracked.remove(KeySpace::Plan, hash, key, now)
    }

    /// Keys holding state (after [`Shard::evict_idle`], exactly the non-idle ones).
    pub(crate) fn tracked_keys(&self) -> usize {
        self.tracked.len()
    }

    /// Puts `policies` in force and drops the state of every plan key that is
    /// now exempt or whose own rule (its tier's, or the default) is not the
    /// one its state was built under. Keys with explicit policies keep theirs
    /// (their policies come with each request).
    pub(crate) fn replace_policies(&mut self, policies: Arc<PolicySet>) {
        let assignments = &self.assignments;
        self.tracked.retain(|tracked| {
            if tracked.space == KeySpace::Policy {
                return true;
            }
            let (hash, key) = (tracked.hash(), tracked.key());
            if policies.is_exempt(hash, key) {
                return false;
            }
            let tier = assignments
                .find(hash, |(assigned, _)| **assigned == *key)
                .map(|(_, tier)| &**tier);
            policies.rule_for(tier).version == tracked.version
        });
        self.policies = policies;
    }

    /// Changes the idle eviction age.
    pub(crate) fn set_idle_after(&mut self, idle_after: u64) {
        self.tracked.set_idle_after(idle_after);
    }

    /// Drops one least recently used key while the limiter is over its cap.
    pub(crate) fn shed_one(&mut self) -> bool {
        self.tracked.shed_one()
    }

    /// The policy limiting `key` by its plan (`None` when exempt) and its tier
    /// (`None` for the default policy).
    pub(crate) fn plan_of(&self, hash: u64, key: &str) -> (Option<Policy>, Option<Arc<str>>) {
        if self.policies.is_exempt(hash, key) {
            return (None, None);
        }
        let tier = self.tier(hash, key);
        let policy = self.policies.rule_for(tier).rule.policy;
        let tier = tier.and_then(|tier| {
            self.policies
                .tiers
                .get_key_value(tier)
                .map(|(name, _)| Arc::clone(name))
        });
        (Some(policy), tier)
    }

    /// `key`'s tier, `None` for the default policy.
    pub(crate) fn tier(&self, hash: u64, key: &str) -> Option<&str> {
        if self.assignments.is_empty() {
            return None;
        }
        self.assignments
            .find(hash, |(assigned, _)| **assigned == *key)
            .map(|(_, tier)| &**tier)
    }

    /// Puts `key` on `tier` (`None`: the default policy). A change of tier drops
    /// the key's state; the same tier keeps it.
    pub(crate) fn assign_tier(
        &mut self,
        hash: u64,
        key: &str,
        tier: Option<Arc<str>>,
        hasher: &RandomState,
    ) {
        if self.tier(hash, key) == tier.as_deref() {
            return;
        }
        self.tracked.remove(KeySpace::Plan, hash, key, 0);
        let rehash = |(assigned, _): &Assignment| hasher.hash_one(&**assigned);
        let slot = self
            .assignments
            .entry(hash, |(assigned, _)| **assigned == *key, rehash);
        match (slot, tier) {
            (Entry::Occupied(entry), Some(tier)) => entry.into_mut().1 = tier,
            (Entry::Occupied(entry), None) => {
                entry.remove();
            }
            (Entry::Vacant(entry), Some(tier)) => {
                entry.insert((key.into(), tier));
            }
            (Entry::Vacant(_), None) => {}
        }
    }
}
