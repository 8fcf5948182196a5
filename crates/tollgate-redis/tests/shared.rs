//! Two stores on one Redis behave as one: tiers, the default policy and the
//! budget are shared; a damaged key fails nobody sharing its script call;
//! every state key has a TTL no longer than needed.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Clock, Limit, LimiterConfig, ManualClock, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

/// 2100-01-01T00:00:10Z in nanoseconds: ten seconds into a minute (and an
/// hour), so the windows below do not end during the test; far from today,
/// so a decision that took Redis's clock instead would show.
const START: u64 = 4_102_444_810_000_000_000;

/// Two stores on one clock that stands still (Redis would expire keys on its
/// own clock: the shortest TTL is raised to ten minutes), learning of a new
/// default policy only by message.
fn two_stores(url: &str, prefix: &str) -> (RedisStore, RedisStore) {
    let config = LimiterConfig::default(); // default 5 per 60 s; pro, enterprise
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let store = || {
        let mut redis = RedisConfig::new(url);
        redis.prefix = prefix.to_owned();
        redis.timeout = Duration::from_secs(5);
        redis.time = TimeSource::Clock(Arc::clone(&clock));
        redis.minimum_ttl = Duration::from_secs(600);
        support::by_message_only(&mut redis);
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
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn two_gateways_share_one_budget_tiers_and_policy() {
    let url = support::require_redis_url();
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
    // The default policy replaced through one reaches the other, by message.
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
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_damaged_log_restarts_its_key_and_fails_nobody_else() {
    // A server of its own: its script calls are counted.
    let redis = support::OwnRedis::start();
    let url = redis.url();
    let prefix = support::prefix("damaged");
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::sliding_log(3, 60).unwrap(),
        ..LimiterConfig::default()
    };
    let mut redis_config = RedisConfig::new(url.as_str());
    redis_config.prefix = prefix.clone();
    redis_config.timeout = Duration::from_secs(5);
    let store = RedisStore::connect(redis_config, &config).unwrap();
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
    // Two requests at once (both queued before the batcher runs, on this
    // one-thread runtime) share one script call: neither fails, the damaged
    // key starts afresh.
    support::reset_stats(&url);
    let (damaged, other) = tokio::join!(
        store.acquire(&[Limit::Plan("sk_log")]),
        store.acquire(&[Limit::Plan("sk_other")])
    );
    assert_eq!(support::script_calls(&url), 1, "one call for both");
    assert_eq!(damaged.unwrap()[0].decision.remaining, Some(2));
    assert_eq!(other.unwrap()[0].decision.remaining, Some(2));
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn every_state_key_has_a_ttl_no_longer_than_needed() {
    let url = support::require_redis_url();
    let prefix = support::prefix("ttl");
    let config = LimiterConfig {
        policy_lists: Default::default(),
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
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn an_hourly_window_outlives_its_hour_and_no_longer() {
    let url = support::require_redis_url();
    let prefix = support::prefix("hour");
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::fixed_window(10, 3600).unwrap(),
        ..LimiterConfig::default()
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(5);
    // Ten seconds into an hour on a clock that stands still.
    redis.time = TimeSource::Clock(Arc::new(ManualClock::new(START)));
    let store = RedisStore::connect(redis, &config).unwrap();
    let hour = store
        .acquire(&[Limit::Plan("sk_hour")])
        .await
        .unwrap()
        .remove(0)
        .decision;
    assert_eq!(hour.reset_after, Duration::from_secs(3590), "3600 s - 10 s");
    let states: Vec<i64> = support::keys_and_ttls(&url, &prefix)
        .into_iter()
        .filter(|(key, _)| key.ends_with(":s"))
        .map(|(_, ttl)| ttl)
        .collect();
    // The one state lives until its window ends, 3590 s after the decision:
    // not less, not more (less what passed since, on Redis's clock: under
    // a second).
    assert_eq!(states.len(), 1);
    assert!(
        (3_589_000..=3_590_000).contains(&states[0]),
        "{states:?} ms"
    );
    support::cleanup(&url, &prefix);
}
