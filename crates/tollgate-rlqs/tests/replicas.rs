//! Two `tollgate rlqs` replicas sharing one budget through one Redis (and
//! through a Redis Cluster): each bucket's streams are kept in Redis, so a
//! stream on one replica is cut to what the streams of the other leave, and
//! a replica that is gone gives its streams' parts back once they are stale.
//! Demand is read on one manual clock; the expected parts are worked out by
//! hand from the split's rules.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tollgate_core::{BucketReport, ManualClock, QuotaAssignment};
use tollgate_redis::{RedisConfig, RedisRecords};
use tollgate_rlqs::allocator::{AllocatorSettings, BucketAnswer};
use tollgate_rlqs::bucket::BucketKey;
use tollgate_rlqs::quotas::Quotas;
use tollgate_rlqs::shared::SharedState;
use tollgate_rls::{LoaderOptions, RateLimitConfig};
use tollgate_test_support::redis::{
    OwnRedis, Stalled, keys, prefix, require_cluster_url, require_redis_url,
};

const YAML: &str = "
domain: edge
descriptors:
  - key: name
    value: shared
    rate_limit: {unit: second, requests_per_unit: 100}
";

fn replica(url: &str, prefix: &str, clock: &Arc<ManualClock>) -> Arc<Quotas> {
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.timeout = Duration::from_millis(300);
    let limits =
        RateLimitConfig::from_sources(&[("quota.yaml", YAML)], &LoaderOptions::default()).unwrap();
    Quotas::shared(
        AllocatorSettings::default(),
        Some(Arc::new(limits)),
        clock.clone(),
        Some(SharedState {
            records: RedisRecords::connect(&config).unwrap(),
            time_to_live: Duration::from_secs(90),
        }),
    )
}

fn shared(allowed: u64) -> Vec<(BucketKey, BucketReport)> {
    let key =
        BucketKey::from_map(&HashMap::from([("name".to_owned(), "shared".to_owned())])).unwrap();
    vec![(key, BucketReport { allowed, denied: 0 })]
}

fn assignment(answers: &[BucketAnswer]) -> QuotaAssignment {
    match answers {
        [BucketAnswer::Assign { assignment, .. }] => *assignment,
        other => panic!("one assignment, not {other:?}"),
    }
}

fn bucket(tokens: u32) -> QuotaAssignment {
    QuotaAssignment::TokenBucket {
        max_tokens: tokens,
        tokens_per_fill: tokens,
        fill_interval_s: 1,
    }
}

async fn two_replicas_split_one_budget(url: &str) {
    let prefix = prefix("rlqs-replicas");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let (first, second) = (replica(url, &prefix, &clock), replica(url, &prefix, &clock));
    let (outgoing, _answers_one) = mpsc::channel(8);
    let one = first.open(outgoing).unwrap();
    let (outgoing, _answers_two) = mpsc::channel(8);
    let two = second.open(outgoing).unwrap();
    assert_ne!(one, two, "stream ids are unique across replicas");
    // 250 over the first report's 5 s: 50 a second each.
    assert_eq!(
        assignment(&first.report(one, "edge", &shared(250)).await),
        bucket(100)
    );
    // The other replica's stream is cut to what the first's leaves.
    assert_eq!(
        assignment(&second.report(two, "edge", &shared(250)).await),
        QuotaAssignment::DenyAll
    );
    // 5 s on, the first reports again: 50 of 100, and 50 goes to the
    // second's stream in the record, which it takes at its next report.
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        assignment(&first.report(one, "edge", &shared(250)).await),
        bucket(50)
    );
    assert_eq!(
        assignment(&second.report(two, "edge", &shared(250)).await),
        bucket(50)
    );
    // The first replica is gone: 20 s (the 15 s TTL and one 5 s report)
    // after its stream's last report, the second's stream has the budget.
    clock.advance(Duration::from_secs(20));
    assert_eq!(
        assignment(&second.report(two, "edge", &shared(250)).await),
        bucket(100)
    );
    // The record's name hides the bucket's value, and expires.
    let names = keys(url, &format!("{{{prefix}:*"));
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(!names[0].contains("shared"));
    let mut connection = tollgate_test_support::redis::connect(url);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&names[0])
        .query(&mut connection)
        .unwrap();
    assert!(ttl > 80_000 && ttl <= 90_000, "ttl {ttl}");
    let _: i64 = redis::cmd("DEL")
        .arg(&names[0])
        .query(&mut connection)
        .unwrap();
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn two_replicas_split_one_budget_on_redis() {
    two_replicas_split_one_budget(&require_redis_url()).await;
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7000 (.ci/redis-cluster start DIR) to run"
)]
async fn two_replicas_split_one_budget_on_a_redis_cluster() {
    let url = require_cluster_url();
    let prefix = prefix("rlqs-cluster");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let (first, second) = (
        replica(&url, &prefix, &clock),
        replica(&url, &prefix, &clock),
    );
    let (outgoing, _answers_one) = mpsc::channel(8);
    let one = first.open(outgoing).unwrap();
    let (outgoing, _answers_two) = mpsc::channel(8);
    let two = second.open(outgoing).unwrap();
    assert_eq!(
        assignment(&first.report(one, "edge", &shared(250)).await),
        bucket(100)
    );
    assert_eq!(
        assignment(&second.report(two, "edge", &shared(250)).await),
        QuotaAssignment::DenyAll
    );
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        assignment(&first.report(one, "edge", &shared(250)).await),
        bucket(50)
    );
    assert_eq!(
        assignment(&second.report(two, "edge", &shared(250)).await),
        bucket(50)
    );
    for node in tollgate_test_support::redis::cluster_nodes(&url) {
        let mut connection = tollgate_test_support::redis::connect(&node);
        for name in keys(&node, &format!("{{{prefix}:*")) {
            let _: i64 = redis::cmd("DEL").arg(name).query(&mut connection).unwrap();
        }
    }
}

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 (and install redis-server) to run"
)]
async fn a_stalled_redis_never_holds_a_stream_and_backs_no_assignment() {
    // A redis-server of this test's own, to stall.
    let _ = require_redis_url();
    let redis = OwnRedis::start();
    let url = redis.url();
    let prefix = prefix("rlqs-stall");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let quotas = replica(&url, &prefix, &clock);
    let (outgoing, _answers) = mpsc::channel(8);
    let stream = quotas.open(outgoing).unwrap();
    assert_eq!(
        assignment(&quotas.report(stream, "edge", &shared(250)).await),
        bucket(100)
    );
    // Stalled: the report is answered with nothing within the store's
    // timeout (300 ms; 2 s allowed for a busy machine), and counted.
    let stalled = Stalled::stop(std::slice::from_ref(&url));
    clock.advance(Duration::from_secs(5));
    let answered = tokio::time::timeout(
        Duration::from_secs(2),
        quotas.report(stream, "edge", &shared(250)),
    )
    .await
    .expect("a stalled store does not hold the report");
    assert_eq!(answered, Vec::new());
    assert_eq!(quotas.store_failures(), 1);
    drop(stalled);
    // Once Redis answers, so does the server.
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        assignment(&quotas.report(stream, "edge", &shared(250)).await),
        bucket(100)
    );
}
