//! Two stores on one Redis behave as one: tiers, the default policy and the
//! budget are shared; every state key has a TTL no longer than needed.

mod support;

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Clock, Limit, LimiterConfig, ManualClock, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};

/// 2026-12-01T00:00:10Z in nanoseconds: ten seconds into a minute, so the
/// 60-second windows below do not end during the test.
const START: u64 = 1_796_083_210_000_000_000;

/// Two stores on one clock that stands still (Redis would expire keys on its
/// own clock: the shortest TTL is raised to ten minutes).
fn two_stores(url: &str, prefix: &str) -> (RedisStore, RedisStore) {
    let config = LimiterConfig::default(); // default 5 per 60 s; pro, enterprise
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let store = || {
        let mut redis = RedisConfig::new(url);
        redis.prefix = prefix.to_owned();
        redis.timeout = Duration::from_secs(5);
        redis.time = TimeSource::Clock(Arc::clone(&clock));
        redis.minimum_ttl = Duration::from_secs(600);
        RedisStore::connect(redis, &config).unwrap()
    };
    (store(), store())
}

async fn allowed(store: &RedisStore, key: &str) -> bool {
    store.acquire(&[Limit::Plan(key)]).await.unwrap()[0]
        .decision
        .is_allowed()
}

#[tokio::test]
async fn two_gateways_share_one_budget_tiers_and_policy() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let prefix = support::prefix("shared");
    let (first, second) = two_stores(&url, &prefix);
    // One budget: 5 per minute across both.
    let mut passed = 0;
    for index in 0..10 {
        let store = if index % 2 == 0 { &first } else { &second };
        passed += usize::from(allowed(store, "sk_shared").await);
    }
    assert_eq!(passed, 5);
    // A tier assigned through one holds through the other (which learns it
    // from the script's answer).
    first.assign_tier("sk_pro", "pro").await.unwrap();
    let decisions = second.acquire(&[Limit::Plan("sk_pro")]).await.unwrap();
    assert_eq!(decisions[0].tier.as_deref(), Some("pro"));
    assert_eq!(decisions[0].decision.remaining, Some(19));
    assert_eq!(second.inspect("sk_pro").await.unwrap().tier, "pro");
    // The default policy replaced through one reaches the other.
    let policy = Policy::fixed_window(2, 60).unwrap();
    first.configure(policy).await.unwrap();
    assert_eq!(
        support::wait_for_default_policy(&second, policy).await,
        policy
    );
    // ...and keys on the default policy start afresh under it.
    assert!(allowed(&second, "sk_shared").await);
    assert!(allowed(&first, "sk_shared").await);
    assert!(!allowed(&second, "sk_shared").await);
    // Reset through one clears the state the other sees.
    assert!(second.reset("sk_shared").await.unwrap());
    assert!(allowed(&first, "sk_shared").await);
    support::cleanup(&url, &prefix);
}

#[tokio::test]
async fn a_damaged_log_restarts_its_key_and_fails_nobody_else() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let prefix = support::prefix("damaged");
    let config = LimiterConfig {
        default_policy: Policy::sliding_log(3, 60).unwrap(),
        ..LimiterConfig::default()
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    let store = RedisStore::connect(redis, &config).unwrap();
    for _ in 0..3 {
        assert!(allowed(&store, "sk_log").await);
    }
    assert!(!allowed(&store, "sk_log").await);
    // The log's list goes (evicted under memory pressure, say) while its
    // count stays.
    let lists = support::keys(&url, &format!("{prefix}:*:l"));
    assert_eq!(lists.len(), 1);
    let _: i64 = redis::cmd("DEL")
        .arg(&lists)
        .query(&mut support::connect(&url))
        .unwrap();
    // Concurrent requests share calls: neither fails, the damaged key starts afresh.
    let (damaged, other) = tokio::join!(
        store.acquire(&[Limit::Plan("sk_log")]),
        store.acquire(&[Limit::Plan("sk_other")])
    );
    assert_eq!(damaged.unwrap()[0].decision.remaining, Some(2));
    assert_eq!(other.unwrap()[0].decision.remaining, Some(2));
    support::cleanup(&url, &prefix);
}

#[tokio::test]
async fn every_state_key_has_a_ttl_no_longer_than_needed() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let prefix = support::prefix("ttl");
    let config = LimiterConfig {
        default_policy: Policy::fixed_window(10, 3600).unwrap(),
        tiers: [
            ("log".to_owned(), Policy::sliding_log(10, 60).unwrap()),
            (
                "bucket".to_owned(),
                Policy::token_bucket(1, 60, 10).unwrap(),
            ),
        ]
        .into(),
        ..LimiterConfig::default()
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    let store = RedisStore::connect(redis, &config).unwrap();
    store.assign_tier("sk_log", "log").await.unwrap();
    store.assign_tier("sk_bucket", "bucket").await.unwrap();
    for key in ["sk_hour", "sk_log", "sk_bucket"] {
        for _ in 0..3 {
            store.acquire(&[Limit::Plan(key)]).await.unwrap();
        }
    }
    let keys = support::keys_and_ttls(&url, &prefix);
    assert!(!keys.is_empty());
    for (key, ttl) in &keys {
        if key.ends_with(":config") || key.ends_with(":tier") {
            // Configuration, not state: the shared default policy and tier
            // assignments are kept until changed.
            continue;
        }
        assert!(*ttl > 0, "{key} has no TTL ({ttl})");
        // No longer than needed: an hour at most (the longest window here).
        assert!(*ttl <= 3_600_000, "{key}: {ttl} ms");
    }
    support::cleanup(&url, &prefix);
}

#[tokio::test]
async fn an_hourly_window_outlives_its_hour_and_no_longer() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let prefix = support::prefix("hour");
    let config = LimiterConfig {
        default_policy: Policy::fixed_window(10, 3600).unwrap(),
        ..LimiterConfig::default()
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    let store = RedisStore::connect(redis, &config).unwrap();
    let hour = store
        .acquire(&[Limit::Plan("sk_hour")])
        .await
        .unwrap()
        .remove(0)
        .decision;
    let states: Vec<i64> = support::keys_and_ttls(&url, &prefix)
        .into_iter()
        .filter(|(key, _)| key.ends_with(":s"))
        .map(|(_, ttl)| ttl)
        .collect();
    // The one state lives until its window ends (to the millisecond, less
    // what passed since the decision): not less, not more.
    let window_left_ms = i64::try_from(hour.reset_after.as_millis()).unwrap();
    assert_eq!(states.len(), 1);
    assert!(
        (window_left_ms - 1000..=window_left_ms + 1).contains(&states[0]),
        "{states:?} vs {window_left_ms}"
    );
    support::cleanup(&url, &prefix);
}
