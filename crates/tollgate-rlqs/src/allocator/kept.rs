//! The allocator's side of a shared store (Redis): a bucket's streams read
//! from the store are put in force by the next report of it
//! ([`Allocator::keep`]), and what the report left is read back to be
//! written ([`Allocator::shared_demand`]).

use std::sync::Arc;

use tollgate_core::{QuotaDemand, WindowCount};

use super::{Allocator, BucketKey};

/// A bucket's state as a shared store keeps it: its streams, and its fixed
/// window's count (unused for other limits).
pub type Kept = (QuotaDemand, WindowCount);

impl Allocator {
    /// Puts `record` (the bucket's streams as the store keeps them; `None`
    /// when it keeps none) in force for the next report of the bucket `key`
    /// in `domain`. A bucket whose limit is a blanket rule keeps no record:
    /// its own streams stay, so that it goes idle as in memory.
    pub fn keep(&mut self, domain: &str, key: &BucketKey, record: Option<Kept>) {
        let id = (Arc::from(domain), key.clone());
        match self.buckets.get_mut(&id) {
            Some(bucket) => {
                if bucket.limit.rate().is_some() {
                    (bucket.demand, bucket.window) = record.unwrap_or_default();
                }
            }
            None => {
                if let Some(record) = record {
                    self.kept.insert(id, record);
                }
            }
        }
    }

    /// Whether `stream` is one of this server's (it has reported here and
    /// not closed).
    pub fn holds_stream(&self, stream: u64) -> bool {
        self.streams.contains_key(&stream)
    }

    /// The streams of the bucket `key` in `domain`, to be written to the
    /// store: `None` unless the bucket is kept and its limit is shared (the
    /// blanket rules need no shared state).
    pub fn shared_demand(&mut self, domain: &str, key: &BucketKey) -> Option<Kept> {
        let id = (Arc::from(domain), key.clone());
        self.kept.remove(&id);
        let bucket = self.buckets.get(&id)?;
        bucket
            .limit
            .rate()
            .map(|_| (bucket.demand.clone(), bucket.window))
    }

    /// The buckets `stream` holds in `domain`s, as (domain, key).
    pub fn buckets_of(&self, stream: u64) -> Vec<(Arc<str>, BucketKey)> {
        self.streams
            .get(&stream)
            .map(|buckets| buckets.iter().cloned().collect())
            .unwrap_or_default()
    }
}
