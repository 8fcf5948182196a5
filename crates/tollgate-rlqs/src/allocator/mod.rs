//! The allocator: every bucket the Envoys report, the streams that share
//! each, and the assignment each stream holds. It translates reports into
//! `tollgate-core`'s rules ([`QuotaDemand`] for demand and parts,
//! [`QuotaRate`] for the token bucket of a part) and keeps their state; it
//! decides nothing of its own but the bounds on memory.
//!
//! A stream's report of a bucket subscribes the stream to it (Envoy 1.40's
//! first message on a new stream is an ordinary report). Each report is
//! answered with the stream's assignment for every bucket it reported, with
//! a time to live of [`AllocatorSettings::ttl_s`]. Buckets whose reports
//! have counted no request for [`AllocatorSettings::idle_ns`] are abandoned
//! ([`Allocator::take_idle`]); a closed stream's parts return at once
//! ([`Allocator::close`]); a new configuration is pushed to every stream of
//! a bucket whose limit changed ([`Allocator::reload`]).

mod counters;
mod kept;
mod reload;
mod snapshot;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tollgate_core::{
    BucketReport, QuotaAssignment, QuotaDemand, QuotaRate, WindowCount, stale_after_ns, unreported,
};
use tollgate_rls::RateLimitConfig;

use crate::bucket::BucketKey;
use crate::limit::{BucketLimit, resolve};

pub use counters::DomainCounters;
pub use kept::Kept;
pub use reload::Reshare;
pub use snapshot::{BucketSnapshot, StreamSnapshot};

/// The allocator's bounds and timings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatorSettings {
    /// Each assignment's time to live, whole seconds (Envoy 1.40 cuts it to
    /// them), above Envoy's fixed 5 s reporting interval so that an
    /// assignment renewed at every report never expires while the server
    /// answers.
    pub ttl_s: u64,
    /// A stream whose reports of a bucket count no request for this long
    /// (nanoseconds) is sent an abandon.
    pub idle_ns: u64,
    /// The most buckets one stream may hold.
    pub max_buckets_per_stream: usize,
    /// The most buckets the server keeps.
    pub max_buckets: usize,
    /// What a bucket past either cap is told (not kept, not counted in any
    /// budget).
    pub over_cap: QuotaAssignment,
    /// The most streams open at once; past it a new stream is refused
    /// (`RESOURCE_EXHAUSTED`).
    pub max_streams: usize,
}

impl Default for AllocatorSettings {
    /// 15 s assignments (three of Envoy's reports), abandon after 60 s idle,
    /// at most 10,000 buckets a stream and 1,000,000 in all, past which a
    /// bucket is refused (`DENY_ALL`), at most 100,000 streams.
    fn default() -> Self {
        AllocatorSettings {
            ttl_s: 15,
            idle_ns: 60_000_000_000,
            max_buckets_per_stream: 10_000,
            max_buckets: 1_000_000,
            over_cap: QuotaAssignment::DenyAll,
            max_streams: 100_000,
        }
    }
}

/// The domain every domain the configuration lacks is kept and counted
/// under (its buckets are all `ALLOW_ALL`).
pub const UNKNOWN_DOMAIN: &str = "(unknown)";

/// What the server sends a stream for one bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketAnswer {
    /// Enforce `assignment` for `ttl_s` seconds.
    Assign {
        /// The bucket.
        bucket: BucketKey,
        /// What to enforce.
        assignment: QuotaAssignment,
        /// Its time to live, whole seconds.
        ttl_s: u64,
    },
    /// Forget the bucket (`AbandonAction`).
    Abandon {
        /// The bucket.
        bucket: BucketKey,
    },
}

/// A bucket abandoned on a stream: the stream, the domain, the bucket.
pub type Abandoned = (u64, Arc<str>, BucketKey);

/// One reported bucket: its key and counts.
pub type Usage = (BucketKey, BucketReport);

type BucketId = (Arc<str>, BucketKey);

/// One bucket's state.
#[derive(Debug)]
struct Bucket {
    limit: BucketLimit,
    /// The matched descriptor's `detailed_metric`: its values may be shown.
    detailed: bool,
    demand: QuotaDemand,
    /// A counted fixed window's count ([`BucketLimit::Window`]).
    window: WindowCount,
    /// A counted fixed window's budget at its last report (tokens per
    /// window), which the parts split; the limit itself before any.
    budget: Option<u64>,
    /// The assignment each stream was last sent.
    sent: BTreeMap<u64, QuotaAssignment>,
}

impl Bucket {
    /// Notes `assignment` as sent to `stream` and queues it in `pushes`,
    /// counted.
    fn push(
        &mut self,
        (key, ttl_s): (&BucketKey, u64),
        (stream, assignment): (u64, QuotaAssignment),
        counters: &mut DomainCounters,
        pushes: &mut BTreeMap<u64, Vec<BucketAnswer>>,
    ) {
        self.sent.insert(stream, assignment);
        counters.assignments += 1;
        pushes
            .entry(stream)
            .or_default()
            .push(BucketAnswer::Assign {
                bucket: key.clone(),
                assignment,
                ttl_s,
            });
    }

    /// The rate the parts split now: the limit's own, or a counted
    /// window's budget for its time left (with a burst of one second of
    /// it).
    fn sharing(&self) -> Option<QuotaRate> {
        match self.limit {
            BucketLimit::Shared(rate) => Some(rate),
            BucketLimit::Window(rate) => {
                let tokens = self.budget.unwrap_or(rate.tokens);
                Some(QuotaRate {
                    tokens,
                    per_s: rate.per_s,
                    burst: tokens.div_ceil(rate.per_s.max(1)).max(1),
                })
            }
            BucketLimit::AllowAll | BucketLimit::DenyAll => None,
        }
    }
}

/// Every bucket and stream (see the module's notes).
#[derive(Debug, Default)]
pub struct Allocator {
    settings: AllocatorSettings,
    config: Option<Arc<RateLimitConfig>>,
    buckets: HashMap<BucketId, Bucket>,
    /// Each stream's buckets.
    streams: HashMap<u64, BTreeSet<BucketId>>,
    counters: BTreeMap<Arc<str>, DomainCounters>,
    /// Buckets' streams as a shared store keeps them, read before a report
    /// and put in force by it ([`Allocator::keep`]).
    kept: HashMap<BucketId, Kept>,
    /// Whether the buckets' streams are kept in a shared store: then a part
    /// is raised only in a report, whose record is read and written around
    /// it, never by a close, an abandon or a reload here.
    shared: bool,
}

/// The name a domain is counted under: itself when `config` has it, else
/// [`UNKNOWN_DOMAIN`], so that a client naming ever new domains grows
/// neither the counters nor the metrics' labels.
fn counted_domain(config: Option<&RateLimitConfig>, domain: &str) -> Arc<str> {
    let known = config.is_some_and(|config| config.domains().any(|name| name == domain));
    Arc::from(if known { domain } else { UNKNOWN_DOMAIN })
}

impl Allocator {
    /// No bucket yet; limits from `config` (every bucket allowed without
    /// one).
    pub fn new(settings: AllocatorSettings, config: Option<Arc<RateLimitConfig>>) -> Allocator {
        Allocator {
            settings,
            config,
            ..Allocator::default()
        }
    }

    /// This allocator with its buckets' streams kept in a shared store (see
    /// [`Allocator::reload`], [`Allocator::close`], [`Allocator::take_idle`]).
    pub fn kept_in_a_shared_store(mut self) -> Allocator {
        self.shared = true;
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> Option<&RateLimitConfig> {
        self.config.as_deref()
    }

    /// The settings in force.
    pub fn settings(&self) -> &AllocatorSettings {
        &self.settings
    }

    /// Takes `stream`'s report of `usages` in `domain` at `now_ns` (the
    /// server's clock) and gives the answer for each bucket, in the report's
    /// order, and the new assignments of the other streams that the report
    /// freed part of a budget for ([`QuotaDemand::top_up`]), by stream.
    pub fn report(
        &mut self,
        stream: u64,
        domain: &str,
        usages: &[Usage],
        now_ns: u64,
    ) -> (Vec<BucketAnswer>, BTreeMap<u64, Vec<BucketAnswer>>) {
        let mut pushes: BTreeMap<u64, Vec<BucketAnswer>> = BTreeMap::new();
        let counted = counted_domain(self.config.as_deref(), domain);
        let domain: Arc<str> = Arc::from(domain);
        let ttl_s = self.settings.ttl_s;
        let mut answers = Vec::with_capacity(usages.len());
        for (key, report) in usages {
            let counters = self.counters.entry(Arc::clone(&counted)).or_default();
            let id: BucketId = (Arc::clone(&domain), key.clone());
            let held = self.streams.get(&stream).map_or(0, BTreeSet::len);
            let known_to_stream = self
                .streams
                .get(&stream)
                .is_some_and(|buckets| buckets.contains(&id));
            if !known_to_stream
                && (held >= self.settings.max_buckets_per_stream
                    || (!self.buckets.contains_key(&id)
                        && self.buckets.len() >= self.settings.max_buckets))
            {
                counters.over_cap += 1;
                counters.assignments += 1;
                answers.push(BucketAnswer::Assign {
                    bucket: key.clone(),
                    assignment: self.settings.over_cap,
                    ttl_s,
                });
                continue;
            }
            let config = self.config.as_deref();
            let kept = self.kept.remove(&id);
            let bucket = self.buckets.entry(id.clone()).or_insert_with(|| {
                let (limit, detailed) = resolve(config, &domain, key);
                Bucket {
                    limit,
                    detailed,
                    demand: QuotaDemand::new(),
                    window: WindowCount::default(),
                    budget: None,
                    sent: BTreeMap::new(),
                }
            });
            if let Some(kept) = kept {
                (bucket.demand, bucket.window) = kept;
            }
            bucket
                .demand
                .take_stale(stale_after_ns(self.settings.ttl_s), now_ns);
            bucket.demand.report(stream, *report, now_ns);
            let assignment = match bucket.limit {
                BucketLimit::AllowAll => QuotaAssignment::AllowAll,
                BucketLimit::DenyAll => QuotaAssignment::DenyAll,
                BucketLimit::Shared(_) | BucketLimit::Window(_) => {
                    if let BucketLimit::Window(limit) = bucket.limit {
                        bucket.window.count(limit.per_s, report.allowed, now_ns);
                        let unreported = unreported(&bucket.demand, stream, limit.per_s, now_ns);
                        bucket.budget = Some(bucket.window.budget(
                            limit.tokens,
                            limit.per_s,
                            unreported,
                            now_ns,
                        ));
                    }
                    let rate = bucket.sharing().unwrap_or(QuotaRate {
                        tokens: 0,
                        per_s: 1,
                        burst: 1,
                    });
                    bucket.demand.assign(stream, rate.tokens, rate.per_s);
                    // What the report freed goes to the others at once; the
                    // reporter's own raise, if any, is in its answer.
                    top_up(key, bucket, ttl_s, counters, &mut pushes, Some(stream));
                    rate.assignment(bucket.demand.part_of(stream).unwrap_or(0))
                }
            };
            bucket.sent.insert(stream, assignment);
            self.streams.entry(stream).or_default().insert(id);
            counters.assignments += 1;
            answers.push(BucketAnswer::Assign {
                bucket: key.clone(),
                assignment,
                ttl_s,
            });
        }
        (answers, pushes)
    }

    /// Counts what a report says the Envoy allowed and denied, in `domain`.
    pub fn count_reported(&mut self, domain: &str, usages: &[Usage]) {
        let domain = counted_domain(self.config.as_deref(), domain);
        let counters = self.counters.entry(domain).or_default();
        for (_, report) in usages {
            counters.reported(*report);
        }
    }

    /// Forgets `stream` (its gRPC stream ended): its parts return to the
    /// other streams of its buckets at once, and their new assignments are
    /// given by stream (with a shared store, none: the others take the parts
    /// at their next report, from the record).
    pub fn close(&mut self, stream: u64) -> BTreeMap<u64, Vec<BucketAnswer>> {
        let mut pushes = BTreeMap::new();
        let Some(buckets) = self.streams.remove(&stream) else {
            return pushes;
        };
        for id in buckets {
            if let Some(bucket) = self.buckets.get_mut(&id) {
                bucket.demand.close(stream);
                bucket.sent.remove(&stream);
                if bucket.demand.is_empty() {
                    self.buckets.remove(&id);
                } else if !self.shared {
                    let counters = self
                        .counters
                        .entry(counted_domain(self.config.as_deref(), &id.0))
                        .or_default();
                    top_up(
                        &id.1,
                        bucket,
                        self.settings.ttl_s,
                        counters,
                        &mut pushes,
                        None,
                    );
                }
            }
        }
        pushes
    }

    /// Takes out every stream's buckets idle for [`AllocatorSettings::idle_ns`]
    /// at `now_ns`, and gives the abandons to send, with the new assignments
    /// of the streams their parts went to (none with a shared store), by
    /// stream; and each (stream, domain, bucket) abandoned.
    pub fn take_idle(&mut self, now_ns: u64) -> (BTreeMap<u64, Vec<BucketAnswer>>, Vec<Abandoned>) {
        let mut abandons: BTreeMap<u64, Vec<BucketAnswer>> = BTreeMap::new();
        let mut abandoned = Vec::new();
        let idle_ns = self.settings.idle_ns;
        let mut emptied = Vec::new();
        for (id, bucket) in &mut self.buckets {
            for stream in bucket.demand.take_idle(idle_ns, now_ns) {
                bucket.sent.remove(&stream);
                // Another replica's stream (in a shared store's copy) is
                // abandoned by its own replica.
                let Some(buckets) = self.streams.get_mut(&stream) else {
                    continue;
                };
                buckets.remove(id);
                self.counters
                    .entry(counted_domain(self.config.as_deref(), &id.0))
                    .or_default()
                    .abandons += 1;
                abandons
                    .entry(stream)
                    .or_default()
                    .push(BucketAnswer::Abandon {
                        bucket: id.1.clone(),
                    });
                abandoned.push((stream, Arc::clone(&id.0), id.1.clone()));
            }
            if bucket.demand.is_empty() {
                emptied.push(id.clone());
            } else if !self.shared {
                let counters = self
                    .counters
                    .entry(counted_domain(self.config.as_deref(), &id.0))
                    .or_default();
                top_up(
                    &id.1,
                    bucket,
                    self.settings.ttl_s,
                    counters,
                    &mut abandons,
                    None,
                );
            }
        }
        for id in emptied {
            self.buckets.remove(&id);
        }
        self.streams.retain(|_, buckets| !buckets.is_empty());
        (abandons, abandoned)
    }

    /// The counters of each domain, with its streams and buckets now.
    pub fn counters(&self) -> BTreeMap<Arc<str>, DomainCounters> {
        let mut counters = self.counters.clone();
        for stats in counters.values_mut() {
            stats.buckets = 0;
            stats.streams = 0;
        }
        let config = self.config.as_deref();
        for (domain, _) in self.buckets.keys() {
            counters
                .entry(counted_domain(config, domain))
                .or_default()
                .buckets += 1;
        }
        for buckets in self.streams.values() {
            let domains: BTreeSet<Arc<str>> = buckets
                .iter()
                .map(|(domain, _)| counted_domain(config, domain))
                .collect();
            for domain in domains {
                counters.entry(domain).or_default().streams += 1;
            }
        }
        counters
    }

    /// Counts a report refused as malformed in `domain` ("" when it has
    /// none).
    pub fn refused(&mut self, domain: &str) {
        let domain = counted_domain(self.config.as_deref(), domain);
        self.counters.entry(domain).or_default().refused += 1;
    }

    /// Each bucket, for the debug page: values shown only where the matched
    /// descriptor has `detailed_metric`.
    pub fn snapshot(&self) -> Vec<BucketSnapshot> {
        snapshot::of(self.buckets.iter().map(|((domain, key), bucket)| {
            (
                domain,
                key,
                (bucket.limit, bucket.window.used, bucket.budget),
                bucket.detailed,
                &bucket.demand,
                &bucket.sent,
            )
        }))
    }
}

/// Gives the parts of `bucket`'s budget no stream holds to the streams
/// short of their part by demand ([`QuotaDemand::top_up`]), noting each new
/// assignment in `pushes`.
fn top_up(
    key: &BucketKey,
    bucket: &mut Bucket,
    ttl_s: u64,
    counters: &mut DomainCounters,
    pushes: &mut BTreeMap<u64, Vec<BucketAnswer>>,
    reporter: Option<u64>,
) {
    let Some(rate) = bucket.sharing() else {
        return;
    };
    for (stream, part) in bucket.demand.top_up(rate.tokens, rate.per_s) {
        if Some(stream) == reporter {
            continue;
        }
        bucket.push(
            (key, ttl_s),
            (stream, rate.assignment(part)),
            counters,
            pushes,
        );
    }
}

#[cfg(test)]
mod tests;
