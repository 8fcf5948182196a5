//! Finding the limit of a request descriptor, as envoyproxy/ratelimit's
//! `GetLimit` (config_impl.go) does, quirks included:
//!
//! - each entry is looked up at the current level first as `key_value`, then
//!   against the level's `*` patterns (first in file order wins), then as the
//!   default `key`;
//! - a limit applies only when found at the descriptor's last entry; a lookup
//!   stops at a level without children, so a request deeper than the
//!   configuration gets no limit;
//! - a request's own `limit` replaces the configuration (but an unknown domain
//!   still gets none);
//! - the stats key is the descriptor's configured path, except that
//!   `detailed_metric` uses the request's `key_value`s (with the `*` pattern
//!   where `share_threshold` matched), and `value_to_metric` writes the
//!   request's value into the key at its level;
//! - when the stats key is rebuilt that way, or when a `detailed_metric` limit
//!   is at a leaf, the Go service makes a fresh limit and drops the
//!   descriptor's `metadata` with it; so does this lookup.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::metadata::Metadata;
use crate::config::rate_limit::{LimitOverride, RateLimit};
use crate::config::stats::{LimitStatNames, StatsSink, domain_not_found_stat};
use crate::config::tree::{DescriptorNode, RateLimitConfig};

/// One `key`/`value` entry of a request descriptor.
pub trait DescriptorEntry {
    /// The entry's key.
    fn key(&self) -> &str;
    /// The entry's value (may be empty).
    fn value(&self) -> &str;
}

impl<K: AsRef<str>, V: AsRef<str>> DescriptorEntry for (K, V) {
    fn key(&self) -> &str {
        self.0.as_ref()
    }

    fn value(&self) -> &str {
        self.1.as_ref()
    }
}

/// The limit that applies to a descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct MatchedLimit {
    /// The configured limit (or the request's override).
    pub limit: Arc<RateLimit>,
    /// The key its counters are kept under (unsanitised, without the
    /// `ratelimit.service.rate_limit.` scope): e.g. `domain.key1_value1.subkey1`.
    pub stats_key: Arc<str>,
    /// With `share_threshold`: per request entry, the `*` pattern that entry
    /// matched under `share_threshold` (empty for the others), so that every
    /// value matching a pattern shares one counter. `None` when no entry did.
    pub share_threshold_key_pattern: Option<Vec<String>>,
    /// The descriptor's `metadata` (see the module notes on when the Go
    /// service drops it).
    pub metadata: Option<Arc<Metadata>>,
}

impl MatchedLimit {
    /// The full names of the six counters of [`MatchedLimit::stats_key`]: the
    /// limit's own, built at load, when the key is the limit's configured one;
    /// built now for a key made per request (`detailed_metric`,
    /// `value_to_metric`, an override).
    pub fn stat_names(&self) -> Arc<LimitStatNames> {
        if Arc::ptr_eq(&self.stats_key, &self.limit.stats_key) {
            Arc::clone(&self.limit.stat_names)
        } else {
            Arc::new(LimitStatNames::for_key(&self.stats_key))
        }
    }
}

impl RateLimitConfig {
    /// The limit for one request descriptor of `domain`, or `None` when no
    /// limit applies (the Go service then answers OK without `current_limit`).
    ///
    /// `entries` are the descriptor's entries in order; `limit_override` its
    /// own `limit`. A lookup in an unknown domain adds 1 to
    /// `ratelimit.service.rate_limit.<domain>.domain_not_found` in `stats`; no
    /// other lookup moves a counter.
    pub fn get_limit<E: DescriptorEntry>(
        &self,
        domain: &str,
        entries: &[E],
        limit_override: Option<LimitOverride>,
        stats: &dyn StatsSink,
    ) -> Option<MatchedLimit> {
        let Some(root) = self.domains.get(domain) else {
            stats.add(&domain_not_found_stat(domain), 1);
            return None;
        };
        if let Some(limit_override) = limit_override {
            let stats_key: Arc<str> = Arc::from(descriptor_key(domain, entries));
            return Some(MatchedLimit {
                limit: Arc::new(RateLimit::from_override(limit_override, stats_key.clone())),
                stats_key,
                share_threshold_key_pattern: None,
                metadata: None,
            });
        }
        walk(root, domain, entries)
    }
}

/// The stats key of a request override: `domain.key_value.key...`, as the Go
/// service's `descriptorKey` (a value-less entry is its key alone).
fn descriptor_key<E: DescriptorEntry>(domain: &str, entries: &[E]) -> String {
    let mut key = String::new();
    for entry in entries {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(entry.key());
        if !entry.value().is_empty() {
            key.push('_');
            key.push_str(entry.value());
        }
    }
    format!("{domain}.{key}")
}

/// The descriptor tree walk of `GetLimit`.
fn walk<E: DescriptorEntry>(
    root: &DescriptorNode,
    domain: &str,
    entries: &[E],
) -> Option<MatchedLimit> {
    let mut level = root;
    let mut matched: Option<MatchedLimit> = None;
    let mut detailed_key = domain.to_owned();
    let mut value_to_metric_key = domain.to_owned();
    let mut share_patterns: BTreeMap<usize, String> = BTreeMap::new();

    for (index, entry) in entries.iter().enumerate() {
        let (key, value) = (entry.key(), entry.value());
        let mut key_value = String::with_capacity(key.len() + 1 + value.len());
        key_value.push_str(key);
        key_value.push('_');
        key_value.push_str(value);
        detailed_key.push('.');
        detailed_key.push_str(&key_value);

        let mut next = level.children.get(&key_value);
        let mut matched_wildcard: Option<&str> = None;
        if next.is_none()
            && let Some(wildcard) = level.wildcards.iter().find(|w| w.matches(&key_value))
        {
            next = level.children.get(&wildcard.key);
            matched_wildcard = Some(&wildcard.key);
        }
        let matched_using_value = next.is_some();
        if next.is_none() {
            next = level.children.get(key);
        }

        if let (Some(_), Some(node)) = (matched_wildcard, next)
            && node.share_threshold
            && !node.wildcard_pattern.is_empty()
        {
            let pattern = trim_key_prefix(&node.wildcard_pattern, key);
            share_patterns.insert(index, pattern.to_owned());
        }

        value_to_metric_key.push('.');
        value_to_metric_key.push_str(key);
        if let Some(node) = next {
            let shared = share_patterns.get(&index).filter(|p| !p.is_empty());
            let value_to_use: &str = match (matched_wildcard, shared) {
                (Some(_), Some(pattern)) => pattern,
                (Some(_), None) if node.value_to_metric => value,
                (Some(wildcard), None) => trim_key_prefix(wildcard, key),
                (None, _) if matched_using_value || node.value_to_metric => value,
                (None, _) => "",
            };
            if !value_to_use.is_empty() {
                value_to_metric_key.push('_');
                value_to_metric_key.push_str(value_to_use);
            }
        }

        if let Some(limit) = next.and_then(|node| node.limit.as_ref())
            && index + 1 == entries.len()
        {
            let pattern = (!share_patterns.is_empty()).then(|| {
                let mut pattern = vec![String::new(); entries.len()];
                for (&at, text) in &share_patterns {
                    pattern[at].clone_from(text);
                }
                pattern
            });
            matched = Some(MatchedLimit {
                limit: limit.clone(),
                stats_key: limit.stats_key.clone(),
                share_threshold_key_pattern: pattern,
                metadata: next.and_then(|node| node.metadata.clone()),
            });
        }

        match next {
            Some(node) if !node.children.is_empty() => level = node,
            _ => {
                if let Some(found) = matched.as_mut()
                    && found.limit.detailed_metric
                {
                    // The Go service rebuilds the limit here (same key),
                    // which loses the descriptor's metadata.
                    found.metadata = None;
                }
                break;
            }
        }
    }

    let mut found = matched?;
    if found.limit.detailed_metric {
        found.stats_key = match &found.share_threshold_key_pattern {
            Some(patterns) if !patterns.is_empty() => {
                Arc::from(share_threshold_key(domain, entries, patterns))
            }
            _ => Arc::from(detailed_key),
        };
    } else if *value_to_metric_key != *found.stats_key {
        found.stats_key = Arc::from(value_to_metric_key);
        found.metadata = None;
    }
    Some(found)
}

/// `text` without a leading `key_` (the Go service's `strings.TrimPrefix`).
fn trim_key_prefix<'t>(text: &'t str, key: &str) -> &'t str {
    text.strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('_'))
        .unwrap_or(text)
}

/// The detailed stats key with `share_threshold`: each entry as `key_pattern`
/// where it matched a shared pattern, `key_value` (or `key`) elsewhere.
fn share_threshold_key<E: DescriptorEntry>(
    domain: &str,
    entries: &[E],
    patterns: &[String],
) -> String {
    let mut key = domain.to_owned();
    for (index, entry) in entries.iter().enumerate() {
        key.push('.');
        key.push_str(entry.key());
        match patterns.get(index).filter(|p| !p.is_empty()) {
            Some(pattern) => {
                key.push('_');
                key.push_str(pattern);
            }
            None if !entry.value().is_empty() => {
                key.push('_');
                key.push_str(entry.value());
            }
            None => {}
        }
    }
    key
}
