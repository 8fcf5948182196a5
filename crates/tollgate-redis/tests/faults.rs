//! Redis going away and coming back: calls fail within the timeout with
//! `StoreError::Unavailable` (never a panic, never a hang), and decisions resume
//! once Redis is back.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Limit, LimitUnits, LimiterConfig, ManualClock, Policy, Store, StoreError};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn calls_fail_within_the_timeout_while_redis_is_down_and_resume_after() {
    let mut redis = support::OwnRedis::start();
    let mut config = RedisConfig::new(redis.url());
    config.prefix = support::prefix("faults");
    config.timeout = Duration::from_millis(50);
    let store = RedisStore::connect(config, &LimiterConfig::default()).unwrap();
    assert!(
        store.acquire(&[Limit::Plan("sk_a")]).await.unwrap()[0]
            .decision
            .is_allowed()
    );

    redis.stop();
    for _ in 0..5 {
        // Never a hang: the store's own timeout answers; the 30 s here only
        // turns a hang into a failure instead of a stuck test.
        let outcome = tokio::time::timeout(
            Duration::from_secs(30),
            store.acquire(&[Limit::Plan("sk_a")]),
        )
        .await
        .expect("the call hung past the store's timeout");
        assert!(
            matches!(outcome, Err(StoreError::Unavailable(_))),
            "{outcome:?}"
        );
    }
    let reset = store.reset("sk_a").await;
    assert!(
        matches!(reset, Err(StoreError::Unavailable(_))),
        "{reset:?}"
    );

    redis.run().unwrap();
    let mut resumed = false;
    for _ in 0..200 {
        if let Ok(decisions) = store.acquire(&[Limit::Plan("sk_a")]).await {
            // Redis kept nothing: a fresh budget of 5.
            assert_eq!(decisions[0].decision.remaining, Some(4));
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(resumed, "decisions did not resume after Redis came back");
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_timeout_too_long_to_count_is_no_timeout() {
    let url = support::require_redis_url();
    let mut config = RedisConfig::new(url.as_str());
    config.prefix = support::prefix("long-timeout");
    let prefix = config.prefix.clone();
    config.timeout = Duration::MAX;
    // At second 0 of a manual clock: the minute's window (and the state's
    // TTL) cannot end during the test.
    config.time = TimeSource::Clock(Arc::new(ManualClock::new(0)));
    let store = RedisStore::connect(config, &LimiterConfig::default()).unwrap();
    // The default policy: 5 a minute; this is the first request.
    let decisions = store.acquire(&[Limit::Plan("sk_a")]).await.unwrap();
    assert_eq!(decisions[0].decision.remaining, Some(4));
    // Counting keys allows a hundred timeouts: still no overflow. sk_a's
    // state is the one key under this prefix.
    assert_eq!(store.stats().await.unwrap().tracked_keys, 1);
    assert!(store.reset("sk_a").await.unwrap());
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_counting_window_on_a_redis_out_of_memory_fails_and_keeps_its_count() {
    // 2100-01-01T00:00:10Z in microseconds: ten seconds into a minute.
    const T: u64 = 4_102_444_810_000_000;
    let redis = support::OwnRedis::start();
    let mut config = RedisConfig::new(redis.url());
    config.prefix = support::prefix("faults-oom");
    config.timeout = Duration::from_secs(5);
    let store = RedisStore::connect(config, &LimiterConfig::default()).unwrap();
    let policy = store
        .prepare(Policy::fixed_window_counting_refused(3, 60).unwrap())
        .unwrap();
    let hit = |units: u64| {
        let store = &store;
        let policy = &policy;
        async move {
            let request = [LimitUnits {
                limit: Limit::Policy {
                    key: "counted",
                    policy,
                },
                units,
            }];
            store
                .acquire_units_at(&request, Some(T))
                .await
                .map(|mut decisions| decisions.remove(0).decision)
        }
    };
    // 4 hits of a limit of 3: three allowed, the fourth refused (and counted).
    for _ in 0..3 {
        assert!(hit(1).await.unwrap().is_allowed());
    }
    assert!(!hit(1).await.unwrap().is_allowed());
    // Redis over its memory limit refuses the script's write: the hit fails,
    // and nothing is dropped or granted.
    let mut connection = support::connect(&redis.url());
    let filler = "x".repeat(2 << 20);
    let _: () = redis::cmd("SET")
        .arg("filler")
        .arg(&filler)
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1mb")
        .query(&mut connection)
        .unwrap();
    for _ in 0..3 {
        let outcome = hit(1).await;
        assert!(outcome.is_err(), "{outcome:?}");
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut connection)
        .unwrap();
    // Still 4 of 3 counted: a look is refused, 50 s before the minute ends.
    let look = hit(0).await.unwrap();
    assert_eq!(look.remaining, Some(0));
    assert_eq!(look.retry_after, Duration::from_secs(50));
}
