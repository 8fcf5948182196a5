//! The policies in force, as one immutable snapshot: the default plan, the
//! tier plans (each a first rule and, for a plan written as a list, further
//! named rules) and the exempt keys. Each rule carries a version; a key's
//! state records the version it was built under, so a replaced rule never
//! decides with state from another.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::algorithm::Rule;
use crate::key::ApiKey;

/// A compiled rule and the version it was installed under.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VersionedRule {
    pub(crate) rule: Rule,
    pub(crate) version: u64,
}

/// A further rule of a plan written as a list, with its policy's name. Its
/// keys' states live in a key space of their own (the name and the key).
#[derive(Clone, Debug)]
pub(crate) struct NamedRule {
    pub(crate) name: Arc<str>,
    pub(crate) rule: VersionedRule,
}

/// The rules of one plan: the first (whose state is the key's own, as a
/// one-policy plan's), the first's name when the plan is a list, and the
/// further rules (none for a one-policy plan).
#[derive(Clone, Debug)]
pub(crate) struct PlanRules {
    pub(crate) first: VersionedRule,
    pub(crate) first_name: Option<Arc<str>>,
    pub(crate) further: Arc<[NamedRule]>,
}

impl PlanRules {
    /// The version of the further rule called `name`, if the plan has one.
    pub(crate) fn further_version(&self, name: &str) -> Option<u64> {
        self.further
            .iter()
            .find(|named| &*named.name == name)
            .map(|named| named.rule.version)
    }
}

/// One snapshot of the policies; replaced whole, never mutated.
#[derive(Clone)]
pub(crate) struct PolicySet {
    pub(crate) default: PlanRules,
    pub(crate) tiers: Arc<HashMap<Arc<str>, PlanRules>>,
    /// Exempt keys, stored by the limiter's key hash.
    pub(crate) exempt: Arc<HashTable<Box<str>>>,
    /// Whether any plan has further rules: when none has, a plan's decision
    /// never looks for them.
    pub(crate) has_lists: bool,
    /// How long each plan's requests may wait for their turn, in ticks
    /// (`[limits.tier_defaults.NAME] delay`), by plan name (`default` or a
    /// tier's); a plan absent has none.
    pub(crate) waits: Arc<HashMap<Arc<str>, u64>>,
}

impl std::fmt::Debug for PolicySet {
    /// The policies, and only the number of exempt keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("default", &self.default.first.rule.policy)
            .field("default_further", &self.default.further.len())
            .field("tiers", &self.tiers.len())
            .field("exempt_keys", &self.exempt.len())
            .finish()
    }
}

impl PolicySet {
    /// The rule for a key on `tier` (`None`: no tier, or tier `default`). A tier
    /// that is no longer configured falls back to the default rule.
    #[inline]
    pub(crate) fn rule_for(&self, tier: Option<&str>) -> &VersionedRule {
        &self.plan_for(tier).first
    }

    /// The plan for a key on `tier`, as [`PolicySet::rule_for`] picks it.
    #[inline]
    pub(crate) fn plan_for(&self, tier: Option<&str>) -> &PlanRules {
        tier.and_then(|tier| self.tiers.get(tier))
            .unwrap_or(&self.default)
    }

    /// How long, in ticks, a request of a key on `tier` may wait for its
    /// turn ([`MaxWait::TierDelay`](crate::MaxWait::TierDelay)): that
    /// plan's delay, the default plan's for a tier no longer configured
    /// (held to the default plan, as [`PolicySet::rule_for`] holds it).
    pub(crate) fn wait_for(&self, tier: Option<&str>) -> u64 {
        let plan = tier
            .filter(|tier| self.tiers.contains_key(*tier))
            .unwrap_or(crate::DEFAULT_TIER);
        self.waits.get(plan).copied().unwrap_or(0)
    }

    /// Whether `key`, of hash `hash`, is exempt.
    #[inline]
    pub(crate) fn is_exempt(&self, hash: u64, key: &str) -> bool {
        !self.exempt.is_empty() && self.exempt.find(hash, |exempt| **exempt == *key).is_some()
    }
}

/// The exempt keys, parsed like any API key, in a table by the limiter's hash.
pub(crate) fn exempt_table(raw_keys: &[String], hasher: &RandomState) -> HashTable<Box<str>> {
    let mut table: HashTable<Box<str>> = HashTable::new();
    for key in raw_keys.iter().filter_map(|raw| ApiKey::parse(raw)) {
        let key = key.as_str();
        let hash = hasher.hash_one(key);
        if table.find(hash, |known| **known == *key).is_none() {
            table.insert_unique(hash, key.into(), |known| hasher.hash_one(&**known));
        }
    }
    table
}
