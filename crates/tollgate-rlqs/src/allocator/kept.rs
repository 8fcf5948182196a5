//! The allocator's side of a shared store (Redis): a bucket's streams read
//! from the store are put in force by the next report of it
//! ([`Allocator::keep`]), and what the report left is read back to be
//! written ([`Allocator::shared_demand`]).

use std::sync::Arc;

use tollgate_core::QuotaDemand;

use super::{Allocator, BucketKey};
use crate::limit::BucketLimit;

impl Allocator {
    /// Puts `demand` (the bucket's streams as the store keeps them) in
    /// force for the next report of the bucket `key` in `domain`.
    pub fn keep(&mut self, domain: &str, key: &BucketKey, demand: QuotaDemand) {
        let id = (Arc::from(domain), key.clone());
        match self.buckets.get_mut(&id) {
            Some(bucket) => bucket.demand = demand,
            None => {
                self.kept.insert(id, demand);
            }
        }
    }

    /// The streams of the bucket `key` in `domain`, to be written to the
    /// store: `None` unless the bucket is kept and its limit is shared (the
    /// blanket rules need no shared state).
    pub fn shared_demand(&mut self, domain: &str, key: &BucketKey) -> Option<QuotaDemand> {
        let id = (Arc::from(domain), key.clone());
        self.kept.remove(&id);
        let bucket = self.buckets.get(&id)?;
        match bucket.limit {
            BucketLimit::Shared(_) => Some(bucket.demand.clone()),
            BucketLimit::AllowAll | BucketLimit::DenyAll => None,
        }
    }

    /// Every domain reported so far.
    pub fn domains(&self) -> Vec<Arc<str>> {
        self.counters.keys().cloned().collect()
    }

    /// The buckets `stream` holds in `domain`s, as (domain, key).
    pub fn buckets_of(&self, stream: u64) -> Vec<(Arc<str>, BucketKey)> {
        self.streams
            .get(&stream)
            .map(|buckets| buckets.iter().cloned().collect())
            .unwrap_or_default()
    }
}
