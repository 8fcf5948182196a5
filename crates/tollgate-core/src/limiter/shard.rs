//! One shard of the in-memory store: the limiter state of the keys that hash to
//! it, their tier assignments, the policies in force and the shard's share of
//! the counters. A shard is always used under its own lock.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::policy_set::{PlanRules, PolicySet, VersionedRule};
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

/// What [`Shard::plan_of`] tells of a key's plan.
#[derive(Debug, Default)]
pub(crate) struct PlanOf {
    pub(crate) policy: Option<Policy>,
    pub(crate) tier: Option<Arc<str>>,
    pub(crate) name: Option<Arc<str>>,
}

/// What a settlement does to a limit's state.
///
/// - `GiveBack`: a refund ([`State::give_back`]): a key holding no state
///   (new, idle, or under another rule) stays without state and is answered
///   as a fresh one; a state left counting nothing goes.
/// - `Overdraw`: a charge whatever is left, at most `overdraft` units past
///   the limit ([`State::overdraw`]); a key without state gets one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settle {
    GiveBack,
    Overdraw { overdraft: u64 },
}

/// One limit's state as a decision reads it: its key space, hash, key and
/// rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'k> {
    pub(crate) space: KeySpace,
    pub(crate) hash: u64,
    pub(crate) key: &'k str,
    pub(crate) rule: VersionedRule,
}

/// The key of a further policy's state (see [`KeySpace::Further`]).
pub(crate) fn further_key(name: &str, key: &str) -> String {
    let mut text = String::with_capacity(name.len() + 1 + key.len());
    text.push_str(name);
    text.push('\0');
    text.push_str(key);
    text
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
        // The rule is borrowed, not copied (it is some 200 bytes): from
        // the caller, or from the policies in force, a field apart from the
        // tracked keys the decision changes.
        let (space, rule) = match policy {
            Some(rule) => (KeySpace::Policy, rule),
            None if self.policies.is_exempt(hash, key) => {
                self.allowed += u128::from(units);
                return None;
            }
            None => (
                KeySpace::Plan,
                self.policies
                    .rule_for(tier_in(&self.assignments, hash, key)),
            ),
        };
        let verdict = use_and_decide(&mut self.tracked, space, hash, key, rule, now, units);
        self.allowed += u128::from(verdict.allowed);
        self.rejected += u128::from(verdict.rejected);
        Some(verdict)
    }

    /// Applies `units` requests of `target` at `now`; see [`Shard::apply`].
    pub(crate) fn apply_to(&mut self, target: &Target<'_>, now: u64, units: u64) -> Verdict {
        let verdict = use_and_decide(
            &mut self.tracked,
            target.space,
            target.hash,
            target.key,
            &target.rule,
            now,
            units,
        );
        self.allowed += u128::from(verdict.allowed);
        self.rejected += u128::from(verdict.rejected);
        verdict
    }

    /// What `target` would see at `now` for zero units, and whether its
    /// rule counts refused units: reads only, creates and evicts nothing, so
    /// checking several limits never disturbs any of them.
    pub(crate) fn peek_at(&self, target: &Target<'_>, now: u64) -> Check {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        let verdict = match self.tracked.get(space, hash, key, now, rule.version) {
            Some(tracked) => tracked.state.peek(&rule.rule, now),
            None => State::new(rule.rule.policy.algorithm()).peek(&rule.rule, now),
        };
        Check {
            verdict,
            counts_refused: rule.rule.policy.counts_refused(),
        }
    }

    /// What `units` requests of `target` at `now` would be told, changing
    /// nothing (the state is decided as a copy).
    pub(crate) fn preview_at(&self, target: &Target<'_>, now: u64, units: u64) -> Verdict {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        let mut state = match self.tracked.get(space, hash, key, now, rule.version) {
            Some(tracked) => tracked.state.clone(),
            None => State::new(rule.rule.policy.algorithm()),
        };
        state.decide(&rule.rule, now, units)
    }

    /// The earliest time at which `units` of `target` would be allowed,
    /// changing nothing (see [`State::earliest`]).
    pub(crate) fn earliest_at(&self, target: &Target<'_>, now: u64, units: u64) -> Option<u64> {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        match self.tracked.get(space, hash, key, now, rule.version) {
            Some(tracked) => tracked.state.earliest(&rule.rule, now, units),
            None => State::new(rule.rule.policy.algorithm()).earliest(&rule.rule, now, units),
        }
    }

    /// Charges `units` of `target` at `at` (no earlier than `now`): a
    /// reservation. Idle keys are dropped as of `now`, and the key is marked
    /// used at `now` (at `at` it would move the shard's latest time ahead of
    /// its clock, delaying every key's eviction): a caller waits no longer
    /// than the idle time (the gateway refuses a `delay` longer than
    /// `idle_eviction_s` at load), so the reservation is served before its
    /// key can go idle.
    pub(crate) fn reserve_to(
        &mut self,
        target: &Target<'_>,
        now: u64,
        at: u64,
        units: u64,
    ) -> Verdict {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        self.tracked.evict_idle(now);
        let algorithm = rule.rule.policy.algorithm();
        let state = self
            .tracked
            .use_state(space, hash, key, now, rule.version, algorithm);
        let verdict = state.reserve(&rule.rule, now, at, units);
        self.allowed += u128::from(verdict.allowed);
        self.rejected += u128::from(verdict.rejected);
        verdict
    }

    /// Takes back `units` of `target` counted at `counted_at` (see
    /// [`State::refund`]); the units given back. A key left counting nothing
    /// holds no state. The counters keep the units as allowed: they were.
    pub(crate) fn refund_to(
        &mut self,
        target: &Target<'_>,
        now: u64,
        counted_at: u64,
        units: u64,
    ) -> u64 {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        let fresh = State::new(rule.rule.policy.algorithm());
        let Some(state) = self.tracked.state_mut(space, hash, key, now, rule.version) else {
            return 0;
        };
        let given = state.refund(&rule.rule, now, counted_at, units);
        if *state == fresh {
            self.tracked.remove(space, hash, key, now);
        }
        given
    }

    /// Settles `units` of `key` at `now` (see [`Settle`]), under `policy`
    /// when given, else its plan; `None` for an exempt key. Counts nothing.
    pub(crate) fn settle(
        &mut self,
        hash: u64,
        key: &str,
        policy: Option<&VersionedRule>,
        now: u64,
        units: u64,
        settle: Settle,
    ) -> Option<Verdict> {
        let (space, rule) = self.rule_of(hash, key, policy)?;
        Some(self.settle_to(
            &Target {
                space,
                hash,
                key,
                rule,
            },
            now,
            units,
            settle,
        ))
    }

    /// Settles `units` of `target` at `now`; see [`Shard::settle`].
    pub(crate) fn settle_to(
        &mut self,
        target: &Target<'_>,
        now: u64,
        units: u64,
        settle: Settle,
    ) -> Verdict {
        let Target {
            space,
            hash,
            key,
            rule,
        } = *target;
        let fresh = State::new(rule.rule.policy.algorithm());
        if let Settle::Overdraw { overdraft } = settle {
            self.tracked.evict_idle(now);
            let algorithm = rule.rule.policy.algorithm();
            let state = self
                .tracked
                .use_state(space, hash, key, now, rule.version, algorithm);
            return state.overdraw(&rule.rule, now, units, overdraft);
        }
        let Some(state) = self.tracked.state_mut(space, hash, key, now, rule.version) else {
            return fresh.peek(&rule.rule, now);
        };
        let verdict = state.give_back(&rule.rule, now, units);
        if *state == fresh {
            // Everything given back: the key holds no state, as on Redis,
            // which deletes it.
            self.tracked.remove(space, hash, key, now);
        }
        verdict
    }

    /// The plan of `key` (of hash `hash`) when it has further rules; `None`
    /// for an exempt key and for a one-policy plan (whose decision is the
    /// first rule's alone).
    #[inline]
    pub(crate) fn plan_with_further(&self, hash: u64, key: &str) -> Option<&PlanRules> {
        if !self.policies.has_lists || self.policies.is_exempt(hash, key) {
            return None;
        }
        let plan = self.policies.plan_for(self.tier(hash, key));
        (!plan.further.is_empty()).then_some(plan)
    }

    /// `key`'s state under a further rule at `now`, as a request of zero
    /// units would see it; `None` when it holds none.
    pub(crate) fn inspect_at(&self, target: &Target<'_>, now: u64) -> Option<Verdict> {
        let tracked = self.tracked.get(
            target.space,
            target.hash,
            target.key,
            now,
            target.rule.version,
        )?;
        Some(tracked.state.peek(&target.rule.rule, now))
    }

    /// Drops the state of `target`'s key; whether it held state at `now`.
    pub(crate) fn remove_at(&mut self, target: &Target<'_>, now: u64) -> bool {
        self.tracked
            .remove(target.space, target.hash, target.key, now)
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
    ///
    /// The state of a further rule is kept while the key's plan still has a
    /// further rule of that name and version.
    pub(crate) fn replace_policies(&mut self, policies: Arc<PolicySet>, hasher: &RandomState) {
        let assignments = &self.assignments;
        self.tracked.retain(|tracked| {
            let (hash, name, key) = match tracked.space {
                KeySpace::Policy => return true,
                KeySpace::Plan => (tracked.hash(), None, tracked.key()),
                KeySpace::Further => match tracked.key().split_once('\0') {
                    Some((name, key)) => (hasher.hash_one(key), Some(name), key),
                    None => return false,
                },
            };
            if policies.is_exempt(hash, key) {
                return false;
            }
            let tier = assignments
                .find(hash, |(assigned, _)| **assigned == *key)
                .map(|(_, tier)| &**tier);
            let plan = policies.plan_for(tier);
            match name {
                None => plan.first.version == tracked.version,
                Some(name) => plan.further_version(name) == Some(tracked.version),
            }
        });
        self.policies = policies;
    }

    /// Changes the idle eviction age.
    pub(crate) fn set_idle_after(&mut self, idle_after: u64) {
        self.tracked.set_idle_after(idle_after);
    }

    /// Raises the idle eviction age to at least `idle_after`.
    pub(crate) fn raise_idle_after(&mut self, idle_after: u64) {
        self.tracked.raise_idle_after(idle_after);
    }

    /// Drops one least recently used key while the limiter is over its cap.
    pub(crate) fn shed_one(&mut self) -> bool {
        self.tracked.shed_one()
    }

    /// The policy limiting `key` by its plan first (`None` when exempt), its
    /// tier (`None` for the default plan) and the first policy's name (for
    /// a plan written as a list).
    pub(crate) fn plan_of(&self, hash: u64, key: &str) -> PlanOf {
        if self.policies.is_exempt(hash, key) {
            return PlanOf::default();
        }
        let tier = self.tier(hash, key);
        let plan = self.policies.plan_for(tier);
        let tier = tier.and_then(|tier| {
            self.policies
                .tiers
                .get_key_value(tier)
                .map(|(name, _)| Arc::clone(name))
        });
        PlanOf {
            policy: Some(plan.first.rule.policy),
            tier,
            name: plan.first_name.clone(),
        }
    }

    /// `key`'s tier, `None` for the default policy.
    pub(crate) fn tier(&self, hash: u64, key: &str) -> Option<&str> {
        tier_in(&self.assignments, hash, key)
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

/// `key`'s tier in `assignments`, `None` for the default policy.
fn tier_in<'a>(assignments: &'a HashTable<Assignment>, hash: u64, key: &str) -> Option<&'a str> {
    if assignments.is_empty() {
        return None;
    }
    assignments
        .find(hash, |(assigned, _)| **assigned == *key)
        .map(|(_, tier)| &**tier)
}

/// Drops the idle keys of `tracked` as of `now`, then applies `units`
/// requests of `key` (in `space`, of hash `hash`) at `now` under `rule`,
/// marking it used: the decision of [`Shard::apply`] and
/// [`Shard::apply_to`], which count its verdict.
fn use_and_decide(
    tracked: &mut TrackedKeys,
    space: KeySpace,
    hash: u64,
    key: &str,
    rule: &VersionedRule,
    now: u64,
    units: u64,
) -> Verdict {
    tracked.evict_idle(now);
    let algorithm = rule.rule.policy.algorithm();
    let state = tracked.use_state(space, hash, key, now, rule.version, algorithm);
    state.decide(&rule.rule, now, units)
}
