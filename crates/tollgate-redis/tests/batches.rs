//! Concurrent requests of every shape share script calls on one Redis server,
//! and each is still decided on its own keys and its own rule: plans on the
//! default policy and on tiers (one of them named `*`), route budgets alone,
//! and a plan with a route budget.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Limit, LimiterConfig, Policy, PreparedPolicy, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::redis as support;

/// The limits of one request: a plan key, a route budget, or both.
#[derive(Clone)]
enum Shape {
    Plan(String),
    Route(String, Arc<PreparedPolicy>),
    Both(String, String, Arc<PreparedPolicy>),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn every_shape_in_one_call_is_decided_on_its_own_keys() {
    let url = support::require_redis_url();
    let prefix = support::prefix("batches");
    // Hour-long windows and a bucket that refills one token every 720 s:
    // nothing comes back during the test, whatever Redis's clock says.
    let mut config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::token_bucket(5, 3600, 5).unwrap(),
        ..LimiterConfig::default()
    };
    config.tiers.clear();
    config
        .tiers
        .insert("pro".into(), Policy::sliding_log(8, 3600).unwrap());
    config
        .tiers
        .insert("*".into(), Policy::sliding_log(3, 3600).unwrap());
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(5);
    let store = Arc::new(RedisStore::connect(redis, &config).unwrap());
    let route = Arc::new(
        store
            .prepare(Policy::sliding_log(4, 3600).unwrap())
            .unwrap(),
    );
    let narrow = Arc::new(
        store
            .prepare(Policy::token_bucket(2, 3600, 2).unwrap())
            .unwrap(),
    );
    let mut shapes = Vec::new();
    for index in 0..4 {
        store
            .assign_tier(&format!("sk_pro_{index}"), "pro")
            .await
            .unwrap();
        store
            .assign_tier(&format!("sk_star_{index}"), "*")
            .await
            .unwrap();
        shapes.push((Shape::Plan(format!("sk_default_{index}")), 5));
        shapes.push((Shape::Plan(format!("sk_pro_{index}")), 8));
        shapes.push((Shape::Plan(format!("sk_star_{index}")), 3));
        shapes.push((
            Shape::Route(format!("route_{index}"), Arc::clone(&route)),
            4,
        ));
        shapes.push((
            Shape::Both(
                format!("sk_both_{index}"),
                format!("narrow_{index}"),
                Arc::clone(&narrow),
            ),
            2,
        ));
    }
    // Ten requests for every key, all at once.
    let tasks: Vec<_> = (0..10)
        .flat_map(|_| shapes.iter().enumerate())
        .map(|(which, (shape, _))| {
            let store = Arc::clone(&store);
            let shape = shape.clone();
            tokio::spawn(async move {
                let decisions = match &shape {
                    Shape::Plan(key) => store.acquire(&[Limit::Plan(key)]).await,
                    Shape::Route(key, policy) => {
                        store.acquire(&[Limit::Policy { key, policy }]).await
                    }
                    Shape::Both(plan, key, policy) => {
                        store
                            .acquire(&[Limit::Plan(plan), Limit::Policy { key, policy }])
                            .await
                    }
                };
                let decisions = decisions.unwrap();
                let allowed = decisions.iter().all(|limit| limit.decision.is_allowed());
                (which, u64::from(allowed))
            })
        })
        .collect();
    let mut passed = vec![0u64; shapes.len()];
    for task in tasks {
        let (which, allowed) = task.await.unwrap();
        passed[which] += allowed;
    }
    let expected: Vec<u64> = shapes.iter().map(|(_, limit)| *limit).collect();
    assert_eq!(passed, expected);
    // The plans behind a route budget were charged only for the 2 that passed.
    for index in 0..4 {
        let plan = store.inspect(&format!("sk_both_{index}")).await.unwrap();
        assert_eq!(plan.state.unwrap().remaining, Some(3), "5 - 2");
        let star = store.inspect(&format!("sk_star_{index}")).await.unwrap();
        assert_eq!(star.tier, "*");
    }
    support::cleanup(&url, &prefix);
}

/// The tier key of the plan `key` under `prefix`, as the store documents it:
/// `PREFIX:{DIGEST}:tier`, the digest the first 16 bytes of SHA-256 of
/// `plan\0` and the key, in hex.
fn tier_key(prefix: &str, key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("plan\0{key}").as_bytes());
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{prefix}:{{{hex}}}:tier")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn an_empty_tier_written_by_someone_else_counts_as_none() {
    let url = support::require_redis_url();
    let prefix = support::prefix("empty-tier");
    let _: () = redis::cmd("SET")
        .arg(tier_key(&prefix, "sk_empty"))
        .arg("")
        .query(&mut support::connect(&url))
        .unwrap();
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::token_bucket(5, 3600, 5).unwrap(),
        ..LimiterConfig::default()
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(5);
    let store = Arc::new(RedisStore::connect(redis, &config).unwrap());
    // Ten requests for each of the two keys, at once, twice: sharing calls.
    let mut passed = [0u64; 2];
    for _ in 0..2 {
        let tasks: Vec<_> = (0..20)
            .map(|index| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let key = if index % 2 == 0 {
                        "sk_empty"
                    } else {
                        "sk_other"
                    };
                    let decisions = store.acquire(&[Limit::Plan(key)]).await.unwrap();
                    assert_eq!(decisions[0].tier, None, "{key}: the default policy");
                    (index % 2, decisions[0].decision.allowed)
                })
            })
            .collect();
        for task in tasks {
            let (which, allowed) = task.await.unwrap();
            passed[which] += allowed;
        }
    }
    assert_eq!(passed, [5, 5]);
    assert_eq!(store.inspect("sk_empty").await.unwrap().tier, "default");
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn concurrent_requests_of_every_shape_share_one_script_call() {
    // A server of its own, whose script calls are counted (`INFO
    // commandstats` counts for the whole server).
    let redis = support::OwnRedis::start();
    let url = redis.url();
    let prefix = support::prefix("one-call");
    let mut config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::token_bucket(5, 3600, 5).unwrap(),
        ..LimiterConfig::default()
    };
    config.tiers.clear();
    config
        .tiers
        .insert("pro".into(), Policy::sliding_log(8, 3600).unwrap());
    let mut redis_config = RedisConfig::new(url.as_str());
    redis_config.prefix = prefix.clone();
    redis_config.timeout = Duration::from_secs(5);
    let store = RedisStore::connect(redis_config, &config).unwrap();
    let route = store
        .prepare(Policy::fixed_window(4, 3600).unwrap())
        .unwrap();
    store.assign_tier("sk_pro", "pro").await.unwrap();
    // The acquire script is loaded by a first call, not counted below.
    store.acquire(&[Limit::Plan("sk_warm")]).await.unwrap();
    support::reset_stats(&url);
    // Ten requests for each of four shapes, all polled before the batcher
    // runs (one thread): one call carries the forty (a call takes up to 128).
    let plan = [Limit::Plan("sk_default")];
    let pro = [Limit::Plan("sk_pro")];
    let alone = [Limit::Policy {
        key: "route",
        policy: &route,
    }];
    let both = [
        Limit::Plan("sk_both"),
        Limit::Policy {
            key: "route_both",
            policy: &route,
        },
    ];
    let requests: Vec<&[Limit<'_>]> = (0..10)
        .flat_map(|_| [&plan[..], &pro[..], &alone[..], &both[..]])
        .collect();
    let decided =
        futures_util::future::join_all(requests.iter().map(|limits| store.acquire(limits))).await;
    assert_eq!(support::script_calls(&url), 1, "forty requests, one call");
    // Each still decided on its own keys and rule: 5, 8, 4 and 4 pass.
    let mut passed = [0u64; 4];
    for (index, decisions) in decided.into_iter().enumerate() {
        let decisions = decisions.unwrap();
        passed[index % 4] += u64::from(decisions.iter().all(|limit| limit.decision.is_allowed()));
    }
    assert_eq!(passed, [5, 8, 4, 4]);
}
