//! The debug page's view of the buckets (`/rlqs`): each bucket's limit, its
//! streams, their demand and their assignments.

use std::collections::BTreeMap;
use std::sync::Arc;

use tollgate_core::{QuotaAssignment, QuotaDemand};

use crate::bucket::BucketKey;
use crate::limit::BucketLimit;

/// One bucket as the debug page shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSnapshot {
    /// The domain.
    pub domain: Arc<str>,
    /// `key=value` entries, or `key=*` unless `detailed_metric`.
    pub bucket: String,
    /// The limit.
    pub limit: BucketLimit,
    /// A counted fixed window's requests reported so far in it.
    pub window_used: u64,
    /// A counted fixed window's budget at its last report (tokens per
    /// window).
    pub budget: Option<u64>,
    /// Its streams, in id order.
    pub streams: Vec<StreamSnapshot>,
}

/// One stream of a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSnapshot {
    /// The server's number for the stream.
    pub stream: u64,
    /// Its demand, thousandths of a request a second.
    pub demand_milli: u64,
    /// Its part of the budget (tokens per the limit's period).
    pub part: u64,
    /// What it was last sent.
    pub assignment: Option<QuotaAssignment>,
}

type Row<'a> = (
    &'a Arc<str>,
    &'a BucketKey,
    (BucketLimit, u64, Option<u64>),
    bool,
    &'a QuotaDemand,
    &'a BTreeMap<u64, QuotaAssignment>,
);

/// The snapshots of `buckets`, ordered by domain and bucket.
pub(super) fn of<'a>(buckets: impl Iterator<Item = Row<'a>>) -> Vec<BucketSnapshot> {
    let mut snapshots: Vec<BucketSnapshot> = buckets
        .map(
            |(domain, key, (limit, window_used, budget), detailed, demand, sent)| {
                let parts: BTreeMap<u64, u64> = demand.assigned().into_iter().collect();
                BucketSnapshot {
                    domain: Arc::clone(domain),
                    bucket: if detailed {
                        key.describe()
                    } else {
                        key.describe_redacted()
                    },
                    limit,
                    window_used,
                    budget,
                    streams: demand
                        .demands()
                        .into_iter()
                        .map(|(stream, demand_milli)| StreamSnapshot {
                            stream,
                            demand_milli,
                            part: parts.get(&stream).copied().unwrap_or(0),
                            assignment: sent.get(&stream).copied(),
                        })
                        .collect(),
                }
            },
        )
        .collect();
    snapshots
        .sort_by(|left, right| (&left.domain, &left.bucket).cmp(&(&right.domain, &right.bucket)));
    snapshots
}
