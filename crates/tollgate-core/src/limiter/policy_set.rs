//! The policies in force, as one immutable snapshot: the default rule, the tier
//! rules and the exempt keys. Each rule carries a version; a key's state records
//! the version it was built under, so a replaced rule never decides with state
//! from another.

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

/// One snapshot of the policies; replaced whole, never mutated.
#[derive(Clone)]
pub(crate) struct PolicySet {
    pub(crate) default: VersionedRule,
    pub(crate) tiers: Arc<HashMap<Arc<str>, VersionedRule>>,
    /// Exempt keys, stored by the limiter's key hash.
    pub(crate) exempt: Arc<HashTable<Box<str>>>,
}

impl std::fmt::Debug for PolicySet {
    /// The policies, and only the number of exempt keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("default", &self.default.rule.policy)
            .field("tiers", &self.tiers.len())
            .field("exempt_keys", &self.exempt.len())
            .finish()
    }
}

impl PolicySet {
    /// The rule for a key on `tier` (`None`: no tier, or tier `default`). A tier
    /// that is no longer configured falls back to the default rule.
    pub(crate) fn rule_for(&self, tier: Option<&str>) -> &VersionedRule {
        tier.and_then(|tier| self.tiers.get(tier))
            .unwrap_or(&self.default)
    }

    /// Whether `key`, of hash `hash`, is exempt.
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
