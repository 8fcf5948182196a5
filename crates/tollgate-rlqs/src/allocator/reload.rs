//! A new configuration put in force: each bucket's limit looked up again,
//! and every stream of a bucket whose limit changed told at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use tollgate_core::{QuotaAssignment, QuotaDemand, QuotaRate};
use tollgate_rls::RateLimitConfig;

use super::{Allocator, BucketAnswer, BucketKey, counted_domain};
use crate::limit::{BucketLimit, resolve};

/// A bucket whose new limit is shared and whose streams are kept in a shared
/// store: its parts are to be split again in its record
/// ([`QuotaDemand::assign_all`]), then sent ([`Allocator::reshared`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reshare {
    /// The domain.
    pub domain: Arc<str>,
    /// The bucket.
    pub bucket: BucketKey,
    /// Its new limit.
    pub rate: QuotaRate,
}

impl Allocator {
    /// Puts `config` in force: each bucket's limit is looked up again, and
    /// every stream of a bucket whose limit changed is given its new
    /// assignment at once (the parts by demand, adding up to the new budget),
    /// by stream. With a shared store, a bucket whose new limit is shared is
    /// given back instead, to be split again in its record.
    pub fn reload(
        &mut self,
        config: Option<Arc<RateLimitConfig>>,
    ) -> (BTreeMap<u64, Vec<BucketAnswer>>, Vec<Reshare>) {
        self.config = config;
        let ttl_s = self.settings.ttl_s;
        let mut pushes: BTreeMap<u64, Vec<BucketAnswer>> = BTreeMap::new();
        let mut reshares = Vec::new();
        for (id, bucket) in &mut self.buckets {
            let (limit, detailed) = resolve(self.config.as_deref(), &id.0, &id.1);
            bucket.detailed = detailed;
            if limit == bucket.limit {
                continue;
            }
            bucket.limit = limit;
            bucket.budget = None;
            let assignments: Vec<(u64, QuotaAssignment)> = match bucket.sharing() {
                Some(rate) if self.shared => {
                    reshares.push(Reshare {
                        domain: Arc::clone(&id.0),
                        bucket: id.1.clone(),
                        rate,
                    });
                    continue;
                }
                Some(rate) => bucket
                    .demand
                    .assign_all(rate.tokens, rate.per_s)
                    .into_iter()
                    .map(|(stream, part)| (stream, rate.assignment(part)))
                    .collect(),
                None => {
                    let blanket = if limit == BucketLimit::AllowAll {
                        QuotaAssignment::AllowAll
                    } else {
                        QuotaAssignment::DenyAll
                    };
                    bucket
                        .demand
                        .demands()
                        .into_iter()
                        .map(|(stream, _)| (stream, blanket))
                        .collect()
                }
            };
            let counters = self
                .counters
                .entry(counted_domain(self.config.as_deref(), &id.0))
                .or_default();
            for sent in assignments {
                bucket.push((&id.1, ttl_s), sent, counters, &mut pushes);
            }
        }
        (pushes, reshares)
    }

    /// Puts in force `demand`, the streams of a [`Reshare`]d bucket as its
    /// record now holds them (split again), and gives the new assignments of
    /// the streams `local` says are this server's, by stream.
    pub fn reshared(
        &mut self,
        reshare: &Reshare,
        demand: QuotaDemand,
        local: impl Fn(u64) -> bool,
    ) -> BTreeMap<u64, Vec<BucketAnswer>> {
        let ttl_s = self.settings.ttl_s;
        let mut pushes: BTreeMap<u64, Vec<BucketAnswer>> = BTreeMap::new();
        let id = (Arc::clone(&reshare.domain), reshare.bucket.clone());
        let Some(bucket) = self.buckets.get_mut(&id) else {
            return pushes;
        };
        let counters = self
            .counters
            .entry(counted_domain(self.config.as_deref(), &id.0))
            .or_default();
        for (stream, record) in demand.records() {
            if !local(stream) {
                continue;
            }
            let assignment = reshare.rate.assignment(record.assigned);
            bucket.push((&id.1, ttl_s), (stream, assignment), counters, &mut pushes);
        }
        bucket.demand = demand;
        pushes
    }
}
