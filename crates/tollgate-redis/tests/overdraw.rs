//! Charging past the limit on Redis (`Store::overdraw_units`, the
//! `*_overdraw` functions run by `lua/give_back.lua`; issue #29's usage
//! settled after the response): the hand-worked timelines of core's
//! `tests/overdraw.rs`, on the store's clock, against the Redis at
//! `REDIS_URL` (ignored without it). The property test in `give_back.rs`
//! holds the store to the in-memory one over generated steps.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Limit, LimitUnits, LimiterConfig, ManualClock, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

/// 2100-01-01T00:00:00Z in seconds: a minute's start, far from today.
const BASE: u64 = 4_102_444_800;

fn store(url: &str, prefix: &str, clock: &ManualClock) -> RedisStore {
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.time = TimeSource::Clock(Arc::new(clock.clone()));
    config.minimum_ttl = Duration::from_secs(600);
    config.timeout = Duration::from_secs(5);
    support::by_message_only(&mut config);
    RedisStore::connect(config, &LimiterConfig::default()).unwrap()
}

/// (allowed, remaining, retry_after s) of `units` of `limit` now.
async fn ask(store: &RedisStore, limit: Limit<'_>, units: u64) -> (u64, u64, u64) {
    let decided = store
        .acquire_units(&[LimitUnits { limit, units }])
        .await
        .unwrap();
    let decision = &decided[0].decision;
    (
        decision.allowed,
        decision.remaining.unwrap(),
        decision.retry_after.as_secs(),
    )
}

/// Charges `units` past the limit (debt at most `overdraft`): the look's
/// (remaining, reset_after s).
async fn overdraw(store: &RedisStore, limit: Limit<'_>, units: u64, overdraft: u64) -> (u64, u64) {
    let looked = store
        .overdraw_units(&[LimitUnits { limit, units }], overdraft)
        .await
        .unwrap();
    let decision = &looked[0].decision;
    (decision.remaining.unwrap(), decision.reset_after.as_secs())
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn debts_refuse_until_repaid_as_core_says() {
    let url = support::require_redis_url();
    let prefix = support::prefix("overdraw");
    let clock = ManualClock::new(BASE * 1_000_000_000);
    let store = store(&url, &prefix, &clock);
    let window = store.prepare(Policy::fixed_window(5, 60).unwrap()).unwrap();
    let bucket = store
        .prepare(Policy::token_bucket(60, 60, 5).unwrap())
        .unwrap();
    let log = store.prepare(Policy::sliding_log(5, 10).unwrap()).unwrap();
    let window = Limit::Policy {
        key: "window",
        policy: &window,
    };
    let bucket = Limit::Policy {
        key: "bucket",
        policy: &bucket,
    };
    let log = Limit::Policy {
        key: "log",
        policy: &log,
    };
    let second = |seconds: &str| clock.advance_by(seconds).unwrap();

    // At 0: the window takes 1 (4 left), the bucket 1 (4 left), the log 2.
    assert_eq!(ask(&store, window, 1).await, (1, 4, 0));
    assert_eq!(ask(&store, bucket, 1).await, (1, 4, 0));
    assert_eq!(ask(&store, log, 2).await, (2, 3, 0));
    // The bucket: 7 more go to -3 tokens, full in 8 s, one token in 4 s.
    assert_eq!(overdraw(&store, bucket, 7, 10).await, (0, 8));
    assert_eq!(ask(&store, bucket, 1).await, (0, 0, 4));
    second("1s");
    // At 1: the window 7 more, a count of 8; refused to its end at 60.
    assert_eq!(overdraw(&store, window, 7, 10).await, (0, 59));
    assert_eq!(ask(&store, log, 2).await, (2, 1, 0));
    second("1s");
    // At 2: the log 5 more, 9 counted, the newest counting to 12.
    assert_eq!(overdraw(&store, log, 5, 10).await, (0, 10));
    assert_eq!(ask(&store, window, 1).await, (0, 0, 58));
    second("1s");
    // At 3: one unit of the log fits once the runs of 0, 1 and 2 are gone.
    assert_eq!(ask(&store, log, 1).await, (0, 0, 9));
    // The window's count stops at 5 + 10 whatever is charged: giving 10
    // back leaves 5 counted (none remaining), 1 more leaves 1 remaining.
    overdraw(&store, window, 1 << 40, 10).await;
    let give_back = |units| {
        let store = &store;
        async move {
            store
                .give_back_units(&[LimitUnits {
                    limit: window,
                    units,
                }])
                .await
                .unwrap()[0]
                .decision
                .remaining
        }
    };
    assert_eq!(give_back(10).await, Some(0));
    assert_eq!(give_back(1).await, Some(1));
    overdraw(&store, window, 20, 10).await;
    second("1s");
    // At 4 the bucket has its token.
    assert_eq!(ask(&store, bucket, 1).await, (1, 0, 0));
    second("6s");
    // At 10 the run of 0 has gone: 7 counted, to 12.
    assert_eq!(ask(&store, log, 1).await, (0, 0, 2));
    second("2s");
    assert_eq!(ask(&store, log, 1).await, (1, 4, 0));
    second("47s");
    assert_eq!(ask(&store, window, 1).await, (0, 0, 1));
    second("1s");
    assert_eq!(ask(&store, window, 1).await, (1, 4, 0));
    support::cleanup(&url, &prefix);
}
