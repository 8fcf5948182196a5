//! One shard of the in-memory store: the limiter state of the keys that hash to
//! it, ordered by last use, their tier assignments and the shard's share of the
//! counters. A shard is always used under its own lock.

use std::hash::BuildHasher;
use std::sync::Arc;

use compact_str::CompactString;
use foldhash::fast::RandomState;
use hashbrown::HashTable;
use hashlink::LinkedHashMap;
use hashlink::linked_hash_map::RawEntryMut;

use super::policy_set::{PolicySet, VersionedRule};
use crate::algorithm::{State, Verdict};

/// One key's limiter state.
#[derive(Debug)]
struct Tracked {
    state: State,
    /// The `now` of the key's latest request, allowed or not, in ticks.
    last_request: u64,
    /// The version of the rule the state was built under.
    version: u64,
}

impl Tracked {
    fn new(rule: &VersionedRule, now: u64) -> Self {
        Tracked {
            state: State::new(rule.rule.policy.algorithm()),
            last_request: now,
            version: rule.version,
        }
    }

    fn is_idle(&self, now: u64, idle_after: u64) -> bool {
        now.saturating_sub(self.last_request) >= idle_after
    }
}

/// A tier assignment: the key and its tier's name.
type Assignment = (Box<str>, Arc<str>);

#[derive(Debug)]
pub(crate) struct Shard {
    /// The policies in force for this shard's keys; replaced by `configure`
    /// under this shard's lock, so each decision sees one consistent set.
    pub(crate) policies: Arc<PolicySet>,
    /// Keys holding limiter state, least recently used first.
    /// Keys are stored inline up to 24 bytes, saving a memory access per lookup.
    tracked: LinkedHashMap<CompactString, Tracked, RandomState>,
    /// Tier assignments; never dropped by eviction, reset or `configure`.
    assignments: HashTable<Assignment>,
    /// The most keys this shard tracks at once.
    capacity: usize,
    /// Ticks without a request after which a key's state is dropped.
    idle_after: u64,
    /// A lower bound of every tracked key's `last_request`, so that eviction
    /// reads no key's state while nothing can be idle.
    oldest_request: u64,
    pub(crate) allowed: u128,
    pub(crate) rejected: u128,
}

impl Shard {
    pub(crate) fn new(
        policies: Arc<PolicySet>,
        hasher: RandomState,
        capacity: usize,
        idle_after: u64,
    ) -> Self {
        Shard {
            policies,
            tracked: LinkedHashMap::with_hasher(hasher),
            assignments: HashTable::new(),
            capacity,
            idle_after,
            oldest_request: u64::MAX,
            allowed: 0,
            rejected: 0,
        }
    }

    /// Applies `units` requests of `key` at `now`; `None` for an exempt key,
    /// which is counted as allowed and holds no state.
    pub(crate) fn decide(&mut self, hash: u64, key: &str, now: u64, units: u64) -> Option<Verdict> {
        if self.policies.is_exempt(hash, key) {
            self.allowed += u128::from(units);
            return None;
        }
        self.evict_idle(now);
        let rule = *self.policies.rule_for(self.tier(hash, key));
        let tracked = self.entry(hash, key, &rule, now);
        let verdict = tracked.state.decide(&rule.rule, now, units);
        tracked.last_request = tracked.last_request.max(now);
        self.allowed += u128::from(verdict.allowed);
        self.rejected += u128::from(verdict.rejected);
        Some(verdict)
    }

    /// Reads `key`'s state at `now` as a request of zero units would see it,
    /// without using budget, touching its last use or creating state.
    pub(crate) fn inspect(&self, hash: u64, key: &str, now: u64) -> Option<Verdict> {
        let rule = self.policies.rule_for(self.tier(hash, key));
        let (_, tracked) = self
            .tracked
            .raw_entry()
            .from_key_hashed_nocheck(hash, key)?;
        if tracked.version != rule.version || tracked.is_idle(now, self.idle_after) {
            return None;
        }
        Some(tracked.state.clone().decide(&rule.rule, now, 0))
    }

    /// The key's state, made fresh when it is new, idle or built under another
    /// rule; marked most recently used.
    fn entry(&mut self, hash: u64, key: &str, rule: &VersionedRule, now: u64) -> &mut Tracked {
        if self.tracked.len() >= self.capacity
            && self
                .tracked
                .raw_entry()
                .from_key_hashed_nocheck(hash, key)
                .is_none()
        {
            self.tracked.pop_front();
        }
        let idle_after = self.idle_after;
        // A hot key is already the most recently used: leave the order alone.
        let is_most_recent = self
            .tracked
            .back()
            .is_some_and(|(newest, _)| newest.as_str() == key);
        match self
            .tracked
            .raw_entry_mut()
            .from_key_hashed_nocheck(hash, key)
        {
            RawEntryMut::Occupied(mut entry) => {
                if !is_most_recent {
                    entry.to_back();
                }
                let tracked = entry.into_mut();
                if tracked.version != rule.version || tracked.is_idle(now, idle_after) {
                    *tracked = Tracked::new(rule, now);
                }
                tracked
            }
            RawEntryMut::Vacant(entry) => {
                self.oldest_request = self.oldest_request.min(now);
                entry
                    .insert_hashed_nocheck(hash, key.into(), Tracked::new(rule, now))
                    .1
            }
        }
    }

    /// Drops the state of keys idle at `now`, least recently used first.
    /// Amortised O(1): each key is dropped once per time it was added, and while
    /// no key can be idle yet, no key is read at all.
    pub(crate) fn evict_idle(&mut self, now: u64) {
        if now.saturating_sub(self.oldest_request) < self.idle_after {
            return;
        }
        while let Some((_, oldest)) = self.tracked.front() {
            if !oldest.is_idle(now, self.idle_after) {
                self.oldest_request = oldest.last_request;
                return;
            }
            self.tracked.pop_front();
        }
        self.oldest_request = u64::MAX;
    }

    /// Drops `key`'s state; whether it had state at `now`.
    pub(crate) fn reset(&mut self, hash: u64, key: &str, now: u64) -> bool {
        match self
            .tracked
            .raw_entry_mut()
            .from_key_hashed_nocheck(hash, key)
        {
            RawEntryMut::Occupied(entry) => !entry.remove().is_idle(now, self.idle_after),
            RawEntryMut::Vacant(_) => false,
        }
    }

    /// Keys holding state (after [`Shard::evict_idle`], exactly the non-idle ones).
    pub(crate) fn tracked_keys(&self) -> usize {
        self.tracked.len()
    }

    /// Puts `policies` in force and drops the state of every key whose rule is
    /// no longer in force.
    pub(crate) fn replace_policies(&mut self, policies: Arc<PolicySet>) {
        self.tracked
            .retain(|_, tracked| policies.is_current(tracked.version));
        self.policies = policies;
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
        self.tracked.remove(key);
        let rehash = |(assigned, _): &Assignment| hasher.hash_one(&**assigned);
        let slot = self
            .assignments
            .entry(hash, |(assigned, _)| **assigned == *key, rehash);
        match (slot, tier) {
            (hashbrown::hash_table::Entry::Occupied(entry), Some(tier)) => {
                entry.into_mut().1 = tier;
            }
            (hashbrown::hash_table::Entry::Occupied(entry), None) => {
                entry.remove();
            }
            (hashbrown::hash_table::Entry::Vacant(entry), Some(tier)) => {
                entry.insert((key.into(), tier));
            }
            (hashbrown::hash_table::Entry::Vacant(_), None) => {}
        }
    }
}
