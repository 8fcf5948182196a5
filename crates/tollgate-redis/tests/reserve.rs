//! Waiting instead of refusing on Redis (`reserve` in `lua/acquire.lua`,
//! cancellations through `lua/refund.lua`) held to core's
//! `Limiter::reserve_units` and `Limiter::cancel_reservation`: the same
//! requests at the same times, each waiting up to a generated delay, some
//! leaving while they wait, give the same reservations, step by step. The
//! limits are a plan (a tier's or an exempt key's too) and up to two route
//! policies, each with its units; the policies over the whole range the
//! store accepts (`generators::policies`). On a Redis Cluster a request of
//! one limit reserves the same (a request whose limits sit in different
//! slots is decided at once there: see `src/reserve.rs`).

mod generators;

use std::time::Duration;

use generators::{policies, starts};
use proptest::prelude::*;
use tollgate_core::{Limit, LimitUnits, Limiter, LimiterConfig, Policy, Reservation, Resolution};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

const KEYS: [&str; 3] = ["sk_a", "sk_b", "sk_exempt"];

fn config(plan: Policy, tier: Policy) -> LimiterConfig {
    LimiterConfig {
        policy_lists: Default::default(),
        default_policy: plan,
        tiers: [("t1".to_owned(), tier)].into(),
        exempt_keys: vec!["sk_exempt".into()],
        idle_eviction_s: 1 << 40,
        ..LimiterConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One step: a request that may wait, one that may not (a plain decision,
/// which must not count ahead of those waiting), or a reservation given
/// back.
#[derive(Clone, Debug)]
enum Step {
    /// The plan of `key`, then the route and the other limit, the first
    /// `count` of the three, with `units` each, waiting up to `max_wait` µs.
    Reserve {
        key: usize,
        units: Vec<u64>,
        count: usize,
        max_wait: u64,
    },
    /// The same limits decided at once (`acquire_units`).
    Decide {
        key: usize,
        units: Vec<u64>,
        count: usize,
    },
    /// The `which`-th reservation still waiting (modulo their number) leaves.
    Cancel { which: usize },
}

fn steps() -> impl Strategy<Value = Vec<(u64, Step)>> {
    let max_wait = prop_oneof![
        Just(0u64),
        1u64..2_000_000,
        Just(10_000_000u64),
        Just(1u64 << 40),
    ];
    let step = prop_oneof![
        6 => (0..KEYS.len(), prop::collection::vec(0u64..4, 3), 1usize..=3, max_wait)
            .prop_map(|(key, units, count, max_wait)| Step::Reserve { key, units, count, max_wait }),
        2 => (0..KEYS.len(), prop::collection::vec(0u64..4, 3), 1usize..=3)
            .prop_map(|(key, units, count)| Step::Decide { key, units, count }),
        2 => any::<usize>().prop_map(|which| Step::Cancel { which }),
    ];
    let gap = prop_oneof![3 => 0u64..3_000_000, 2 => Just(0u64), 1 => 0u64..100_000_000];
    prop::collection::vec((gap, step), 1..40)
}

/// The steps on core and on the Redis store at `url`, compared.
/// `single`: requests of one limit only (a cluster).
fn same_reservations(
    url: &str,
    policies: &[Policy],
    steps: Vec<(u64, Step)>,
    start: u64,
    single: bool,
) -> Result<(), TestCaseError> {
    let runtime = runtime();
    let limits = config(policies[0], policies[3]);
    let core = Limiter::new(&limits, Resolution::Microseconds).unwrap();
    let route = core.prepare(policies[1]).unwrap();
    let other = core.prepare(policies[2]).unwrap();
    let prefix = support::prefix("reserve");
    let mut redis_config = RedisConfig::new(url);
    redis_config.prefix = prefix.clone();
    redis_config.time = TimeSource::Redis;
    redis_config.minimum_ttl = Duration::from_secs(600);
    redis_config.timeout = Duration::from_secs(5);
    support::by_message_only(&mut redis_config);
    let store = runtime
        .block_on(async { RedisStore::connect(redis_config, &limits) })
        .unwrap();
    let mut now = start.min(generators::MAX_NOW / 2);
    // Reservations still waiting: (key, units, count, counted_at).
    let mut waiting: Vec<(usize, Vec<u64>, usize, u64)> = Vec::new();
    let request = |key: usize, units: &[u64], count: usize| -> Vec<LimitUnits<'_>> {
        let all = [
            Limit::Plan(KEYS[key]),
            Limit::Policy {
                key: "route",
                policy: &route,
            },
            Limit::Policy {
                key: "other",
                policy: &other,
            },
        ];
        let skip = if single && count == 1 { key % 3 } else { 0 };
        all[skip..skip + count]
            .iter()
            .zip(units)
            .map(|(limit, units)| LimitUnits {
                limit: *limit,
                units: *units,
            })
            .collect()
    };
    for (gap, step) in steps {
        now += gap;
        match step {
            Step::Reserve {
                key,
                units,
                count,
                max_wait,
            } => {
                let count = if single { 1 } else { count };
                let limits = request(key, &units, count);
                let expected: Reservation = core.reserve_units(&limits, now, max_wait);
                let got = runtime
                    .block_on(store.reserve_units_at(
                        &limits,
                        Duration::from_micros(max_wait),
                        Some(now),
                    ))
                    .unwrap();
                prop_assert_eq!(
                    (&got.decisions, got.wait),
                    (&expected.decisions, expected.wait),
                    "{:?} units of {} waiting up to {} us, the limits {:?}, at {}",
                    &units[..count],
                    KEYS[key],
                    max_wait,
                    policies,
                    now
                );
                if !expected.wait.is_zero() {
                    prop_assert_eq!(got.counted_at, expected.counted_at);
                    waiting.push((key, units, count, expected.counted_at));
                }
            }
            Step::Decide { key, units, count } => {
                let count = if single { 1 } else { count };
                let limits = request(key, &units, count);
                let expected = core.acquire_units(&limits, now);
                let got = runtime
                    .block_on(store.acquire_units_at(&limits, Some(now)))
                    .unwrap();
                prop_assert_eq!(
                    got,
                    expected,
                    "{:?} units of {} decided, the limits {:?}, at {}",
                    &units[..count],
                    KEYS[key],
                    policies,
                    now
                );
            }
            Step::Cancel { which } => {
                if waiting.is_empty() {
                    continue;
                }
                let (key, units, count, counted_at) = waiting.remove(which % waiting.len());
                let limits = request(key, &units, count);
                let expected = core.cancel_reservation(&limits, now, counted_at);
                let got = runtime
                    .block_on(store.cancel_reservation_at(&limits, counted_at, Some(now)))
                    .unwrap();
                prop_assert_eq!(got, expected, "given back at {} of {}", now, counted_at);
            }
        }
    }
    support::cleanup(url, &prefix);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_reserves_what_core_reserves(
        policies in prop::collection::vec(policies(), 4),
        steps in steps(),
        start in starts(),
    ) {
        let url = support::require_redis_url();
        same_reservations(&url, &policies, steps, start, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    #[cfg_attr(
        not(has_redis_cluster),
        ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
    )]
    fn redis_reserves_what_core_reserves_on_a_cluster(
        policies in prop::collection::vec(policies(), 4),
        steps in steps(),
        start in starts(),
    ) {
        let url = support::require_cluster_url();
        same_reservations(&url, &policies, steps, start, true)?;
    }
}
