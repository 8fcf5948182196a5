//! The edges of what the Redis store computes, written out by hand: policies
//! whose quantities are 2^52 - 1 are taken and those reaching 2^52 refused,
//! naming the quantity; decisions next to 2^52 are exact; units past 2^52 (up
//! to 2^64 - 1) are decided whole; a token bucket or a sliding log asked at
//! a time behind its state (a lagging clock) grants nothing it would not
//! have granted then, and a counting window counts it in its newest window;
//! a key whose policy changes rule starts afresh; and a batch of 10^15 units costs one script call.

use std::time::Duration;

use tollgate_core::{Decision, Limit, LimitUnits, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::redis as support;

/// 2^52: the first quantity the store refuses.
const BOUND: u64 = 1 << 52;

/// 2100-01-01T00:00:10Z in microseconds: ten seconds into a minute.
const T: u64 = 4_102_444_810_000_000;

const SECOND: u64 = 1_000_000;

/// One second in microseconds, as decisions' durations give them.
const S: u128 = 1_000_000;

/// A store on `url` under a prefix of its own (returned too), deciding at
/// the times given.
fn store(url: &str, test: &str) -> (RedisStore, String) {
    // Redis expires keys on its own clock: none expires during the test.
    store_keeping_at_least(url, test, Duration::from_secs(600))
}

/// As [`store`], its keys kept at least `minimum_ttl` (zero: exactly their
/// useful life).
fn store_keeping_at_least(url: &str, test: &str, minimum_ttl: Duration) -> (RedisStore, String) {
    let prefix = support::prefix(test);
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.clone();
    config.timeout = Duration::from_secs(5);
    config.minimum_ttl = minimum_ttl;
    let store = RedisStore::connect(config, &LimiterConfig::default()).unwrap();
    (store, prefix)
}

/// What `store` decides for `units` of the policy limit `key` at `now`.
async fn decide(store: &RedisStore, policy: Policy, key: &str, units: u64, now: u64) -> Decision {
    let policy = store.prepare(policy).unwrap();
    let request = [LimitUnits {
        limit: Limit::Policy {
            key,
            policy: &policy,
        },
        units,
    }];
    store
        .acquire_units_at(&request, Some(now))
        .await
        .unwrap()
        .remove(0)
        .decision
}

/// A decision's numbers: allowed, rejected, remaining, retry_after and
/// reset_after (microseconds).
fn numbers(decision: Decision) -> (u64, u64, Option<u64>, u128, u128) {
    (
        decision.allowed,
        decision.rejected,
        decision.remaining,
        decision.retry_after.as_micros(),
        decision.reset_after.as_micros(),
    )
}

#[tokio::test]
async fn quantities_below_2_to_the_52_are_taken_and_2_to_the_52_is_refused() {
    // No Redis needed: the store refuses a policy before any call.
    let (store, _) = store("redis://127.0.0.1:1", "bounds-policies");
    let largest_window = (BOUND - 1) / SECOND; // 4_503_599_627 s
    let taken = [
        Policy::fixed_window(BOUND - 1, 1).unwrap(),
        Policy::fixed_window_counting_refused(BOUND - 1, 1).unwrap(),
        Policy::sliding_log(BOUND - 1, 1).unwrap(),
        Policy::fixed_window(5, largest_window).unwrap(),
        Policy::token_bucket(BOUND - 1, 1, 1).unwrap(),
        // 4_503_599_627 tokens of a second each: 4_503_599_627_000_000 < 2^52.
        Policy::token_bucket(1, 1, largest_window).unwrap(),
    ];
    for policy in taken {
        assert!(store.prepare(policy).is_ok(), "{policy:?}");
    }
    let refused = [
        (Policy::fixed_window(BOUND, 1).unwrap(), "limit"),
        (
            Policy::fixed_window_counting_refused(BOUND, 1).unwrap(),
            "limit",
        ),
        (Policy::sliding_log(BOUND, 1).unwrap(), "limit"),
        (
            Policy::fixed_window(5, largest_window + 1).unwrap(),
            "window_s in microseconds",
        ),
        (Policy::token_bucket(BOUND, 1, 1).unwrap(), "limit"),
        (Policy::token_bucket(1, 1, BOUND).unwrap(), "burst"),
        (
            Policy::token_bucket(1, 1, largest_window + 1).unwrap(),
            "burst x window_s in microseconds",
        ),
    ];
    for (policy, what) in refused {
        let error = store.prepare(policy).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("the Redis store computes exactly up to 2^52: {what} is larger"),
            "{policy:?}"
        );
    }
    // The default policy of a store's configuration is held to the same.
    let limits = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::sliding_log(BOUND, 60).unwrap(),
        ..LimiterConfig::default()
    };
    let error = RedisStore::connect(RedisConfig::new("redis://127.0.0.1:1"), &limits)
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "the default policy: the Redis store computes exactly up to 2^52: limit is larger"
    );
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn decisions_next_to_2_to_the_52_are_exact() {
    let url = support::require_redis_url();
    let (store, prefix) = store(&url, "bounds-decisions");
    let largest = BOUND - 1;
    // A fixed window of 2^52 - 1 a minute: 2^52 units at once are refused
    // whole, 2^52 - 1 taken whole, then one more refused until the minute
    // ends, 50 s later.
    let window = Policy::fixed_window(largest, 60).unwrap();
    assert_eq!(
        numbers(decide(&store, window, "fixed", BOUND, T).await),
        (0, BOUND, Some(largest), 50 * S, 0)
    );
    assert_eq!(
        numbers(decide(&store, window, "fixed", largest, T).await),
        (largest, 0, Some(0), 0, 50 * S)
    );
    assert_eq!(
        numbers(decide(&store, window, "fixed", 1, T + SECOND).await),
        (0, 1, Some(0), 49 * S, 49 * S)
    );
    // Counting refused units: 2^52 + 5 units allow 2^52 - 1 and count the
    // rest; then 2^64 - 1 units, all refused.
    let counting = Policy::fixed_window_counting_refused(largest, 60).unwrap();
    assert_eq!(
        numbers(decide(&store, counting, "counting", BOUND + 5, T).await),
        (largest, 6, Some(0), 50 * S, 50 * S)
    );
    assert_eq!(
        numbers(decide(&store, counting, "counting", u64::MAX, T).await),
        (0, u64::MAX, Some(0), 50 * S, 50 * S)
    );
    // A sliding log of 2^52 - 1 a minute: 2^52 - 2 at T, 1 at T + 1 s, then
    // nothing until the run at T leaves the window, 58 s after T + 2 s.
    let log = Policy::sliding_log(largest, 60).unwrap();
    assert_eq!(
        numbers(decide(&store, log, "log", largest - 1, T).await),
        (largest - 1, 0, Some(1), 0, 60 * S)
    );
    assert_eq!(
        numbers(decide(&store, log, "log", 1, T + SECOND).await),
        (1, 0, Some(0), 0, 60 * S)
    );
    assert_eq!(
        numbers(decide(&store, log, "log", 1, T + 2 * SECOND).await),
        (0, 1, Some(0), 58 * S, 59 * S)
    );
    // A bucket of 4_503_599_627 tokens, one a second (burst x window just
    // below 2^52 microseconds): emptied at once, full again 4_503_599_627 s
    // later; the next token comes in a second.
    let deep = (BOUND - 1) / SECOND;
    let bucket = Policy::token_bucket(1, 1, deep).unwrap();
    assert_eq!(
        numbers(decide(&store, bucket, "bucket", deep, T).await),
        (deep, 0, Some(0), 0, u128::from(deep) * S)
    );
    assert_eq!(
        numbers(decide(&store, bucket, "bucket", 1, T).await),
        (0, 1, Some(0), S, u128::from(deep) * S)
    );
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_bucket_asked_by_a_lagging_clock_grants_nothing() {
    let url = support::require_redis_url();
    let (store, prefix) = store(&url, "bounds-lagging");
    // One token a second, one deep: taken at T, so the next one comes at
    // T + 1 s. A clock 10 s behind (T - 10 s) is told 11 s, and gets nothing.
    let bucket = Policy::token_bucket(1, 1, 1).unwrap();
    assert_eq!(
        numbers(decide(&store, bucket, "slow", 1, T).await),
        (1, 0, Some(0), 0, S)
    );
    let behind = T - 10 * SECOND;
    assert_eq!(
        numbers(decide(&store, bucket, "slow", 1, behind).await),
        (0, 1, Some(0), 11 * S, 11 * S)
    );
    // A look from there waits for nothing, and changes nothing: the token
    // is there at T + 1 s.
    assert_eq!(
        numbers(decide(&store, bucket, "slow", 0, behind).await),
        (0, 0, Some(0), 0, 11 * S)
    );
    assert_eq!(
        numbers(decide(&store, bucket, "slow", 1, T + SECOND).await),
        (1, 0, Some(0), 0, S)
    );
    // 2^52 - 1 tokens a second, one deep: a token is worth one microsecond.
    // Taken at T; 5 µs behind, the wait is 5 µs plus the token's one.
    let fast = Policy::token_bucket(BOUND - 1, 1, 1).unwrap();
    assert_eq!(
        numbers(decide(&store, fast, "fast", 1, T).await),
        (1, 0, Some(0), 0, 1)
    );
    assert_eq!(
        numbers(decide(&store, fast, "fast", 1, T - 5).await),
        (0, 1, Some(0), 6, 6)
    );
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_counting_window_asked_by_a_lagging_clock_counts_in_its_newest_window() {
    let url = support::require_redis_url();
    let (store, prefix) = store(&url, "bounds-counting-lagging");
    // 5 a minute, counting refused hits. 3 at T + 60 s (the next minute, 50 s
    // before its end); then a clock a minute behind (T) counts in that newest
    // window, as the engine does: its end is 110 s after T.
    let counting = Policy::fixed_window_counting_refused(5, 60).unwrap();
    assert_eq!(
        numbers(decide(&store, counting, "late", 3, T + 60 * SECOND).await),
        (3, 0, Some(2), 0, 50 * S)
    );
    assert_eq!(
        numbers(decide(&store, counting, "late", 1, T).await),
        (1, 0, Some(1), 0, 110 * S)
    );
    // 2 more: one fits, both count (6 of 5).
    assert_eq!(
        numbers(decide(&store, counting, "late", 2, T).await),
        (1, 1, Some(0), 110 * S, 110 * S)
    );
    // The next minute's clock sees the same 6.
    assert_eq!(
        numbers(decide(&store, counting, "late", 0, T + 60 * SECOND).await),
        (0, 0, Some(0), 50 * S, 50 * S)
    );
    // Redis holds one hash of one field (the newest window's count), with a
    // TTL (beside the store's shared configuration; the TTL itself is
    // checked by the next test, without this store's minimum).
    let keys = support::state_keys_and_ttls(&url, &prefix);
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].1 > 0, "{keys:?}");
    let mut connection = support::connect(&url);
    let fields: Vec<(String, u64)> = redis::cmd("HGETALL")
        .arg(&keys[0].0)
        .query(&mut connection)
        .unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert_eq!(fields[0].1, 6);
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_counting_window_lives_one_window_past_its_end() {
    let url = support::require_redis_url();
    let (store, prefix) = store_keeping_at_least(&url, "bounds-counting-ttl", Duration::ZERO);
    // At T, 50 s before its minute ends: kept 50 s + one more minute, so a
    // caller whose clock lags by less than a window still finds the count.
    // Later hits leave the TTL as it is.
    let counting = Policy::fixed_window_counting_refused(5, 60).unwrap();
    decide(&store, counting, "kept", 1, T).await;
    decide(&store, counting, "kept", 1, T + 40 * SECOND).await;
    let keys = support::state_keys_and_ttls(&url, &prefix);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl_ms = keys[0].1;
    assert!((100_000..=110_000).contains(&ttl_ms), "{keys:?}");
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_key_whose_policy_changes_rule_starts_afresh() {
    let url = support::require_redis_url();
    let (store, prefix) = store(&url, "bounds-rule-change");
    // One key under a token bucket (a string state), then a window counting
    // refused hits (a hash), then the bucket again: each change of rule is a
    // new state, as a new version is, whatever Redis held.
    let bucket = Policy::token_bucket(1, 1, 1).unwrap();
    let counting = Policy::fixed_window_counting_refused(2, 60).unwrap();
    assert_eq!(
        numbers(decide(&store, bucket, "changing", 1, T).await),
        (1, 0, Some(0), 0, S)
    );
    assert_eq!(
        numbers(decide(&store, counting, "changing", 1, T).await),
        (1, 0, Some(1), 0, 50 * S)
    );
    assert_eq!(
        numbers(decide(&store, bucket, "changing", 1, T).await),
        (1, 0, Some(0), 0, S)
    );
    // Fresh again: 1 of 2, not 2 of 2.
    assert_eq!(
        numbers(decide(&store, counting, "changing", 1, T).await),
        (1, 0, Some(1), 0, 50 * S)
    );
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_log_asked_by_a_lagging_clock_after_a_look_grants_nothing_more() {
    let url = support::require_redis_url();
    let (store, prefix) = store(&url, "bounds-lagging-log");
    // 12 in any 4 s: 5 at T and 1 at T + 3 s.
    let log = Policy::sliding_log(12, 4).unwrap();
    assert_eq!(
        numbers(decide(&store, log, "log", 5, T).await),
        (5, 0, Some(7), 0, 4 * S)
    );
    assert_eq!(
        numbers(decide(&store, log, "log", 1, T + 3 * SECOND).await),
        (1, 0, Some(6), 0, 4 * S)
    );
    // A look at T + 5 s: the 5 of T no longer count then.
    assert_eq!(
        numbers(decide(&store, log, "log", 0, T + 5 * SECOND).await),
        (0, 0, Some(11), 0, 2 * S)
    );
    // A clock behind, at T + 3.5 s: the 5 of T still count there, so 6 are
    // left, and 11 would make 17 in the 4 s from T. Refused; the 5 leave
    // the window half a second later.
    assert_eq!(
        numbers(decide(&store, log, "log", 11, T + 3_500_000).await),
        (0, 11, Some(6), S / 2, 3_500_000)
    );
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_batch_of_10_to_the_15_costs_one_call_and_is_exact() {
    // A server of its own, whose script calls are counted.
    let redis = support::OwnRedis::start();
    let url = redis.url();
    let (store, _) = store(&url, "bounds-batch");
    const UNITS: u64 = 1_000_000_000_000_000;
    // Each policy with the units it holds (its limit, or a bucket's burst),
    // and whether it counts refused units.
    let policies = [
        (Policy::fixed_window(5, 60).unwrap(), 5, false),
        (
            Policy::fixed_window_counting_refused(5, 60).unwrap(),
            5,
            true,
        ),
        (Policy::sliding_log(20, 60).unwrap(), 20, false),
        (Policy::token_bucket(60, 60, 5).unwrap(), 5, false),
    ];
    for (index, (policy, holds, counts_refused)) in policies.into_iter().enumerate() {
        let key = format!("big-{index}");
        // The script is loaded by a first call, not counted below.
        decide(&store, policy, "warm", 0, T).await;
        support::reset_stats(&url);
        let decision = decide(&store, policy, &key, UNITS, T).await;
        assert_eq!(support::script_calls(&url), 1, "{policy:?}: one call");
        if counts_refused {
            // Counted whole: what fits allowed, the counter far past the limit.
            assert_eq!(
                (decision.allowed, decision.rejected, decision.remaining),
                (holds, UNITS - holds, Some(0))
            );
        } else {
            // All or nothing: refused whole, nothing taken.
            assert_eq!(
                (decision.allowed, decision.rejected, decision.remaining),
                (0, UNITS, Some(holds))
            );
        }
    }
}
