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

use generators::{starts, with_calendars};
use proptest::prelude::*;
use tollgate_core::Store;
use tollgate_core::{
    Limit, LimitUnits, Limiter, LimiterConfig, MaxWait, Policy, Reservation, Resolution,
    TierDefaults,
};
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
        tier_defaults: [
            ("default".to_owned(), delay(1_500)),
            ("t1".to_owned(), delay(3_000)),
        ]
        .into(),
        ..LimiterConfig::default()
    }
}

/// A plan's defaults with a delay of `milliseconds`.
fn delay(milliseconds: u64) -> TierDefaults {
    TierDefaults {
        delay: Duration::from_millis(milliseconds),
        max_in_flight: None,
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
    /// `count` of the three, with `units` each, waiting up to `max_wait` µs
    /// (`None`: the delay of the plan's tier, `MaxWait::TierDelay`).
    Reserve {
        key: usize,
        units: Vec<u64>,
        count: usize,
        max_wait: Option<u64>,
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
    let max_wait = prop_oneof![4 => max_wait.prop_map(Some), 1 => Just(None)];
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
    // sk_b on tier t1 (another delay), sk_a on the default plan.
    core.assign_tier("sk_b", "t1").unwrap();
    runtime.block_on(store.assign_tier("sk_b", "t1")).unwrap();
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
                let expected: Reservation = core.reserve_units_within(&limits, now, max_wait);
                let wait = max_wait.map_or(MaxWait::TierDelay, |max_wait| {
                    MaxWait::UpTo(Duration::from_micros(max_wait))
                });
                let got = runtime
                    .block_on(store.reserve_units_at(&limits, wait, Some(now)))
                    .unwrap();
                prop_assert_eq!(
                    (&got.decisions, got.wait),
                    (&expected.decisions, expected.wait),
                    "{:?} units of {} waiting up to {:?} us, the limits {:?}, at {}",
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
        policies in prop::collection::vec(with_calendars(), 4),
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
        policies in prop::collection::vec(with_calendars(), 4),
        steps in steps(),
        start in starts(),
    ) {
        let url = support::require_cluster_url();
        same_reservations(&url, &policies, steps, start, true)?;
    }
}

/// A tier assigned through another gateway (this one's remembered tier is
/// stale): the script finds the new tier, and the call is sent again
/// waiting up to that tier's delay, as core waits.
#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn a_tier_changed_elsewhere_waits_up_to_the_new_tiers_delay() {
    let url = support::require_redis_url();
    let runtime = runtime();
    // One token every 500 ms, a bucket one deep; default waits 1.5 s, t1 3 s.
    let bucket = Policy::token_bucket(2, 1, 1).unwrap();
    let limits = config(bucket, bucket);
    let prefix = support::prefix("reserve_tier");
    let connect = || {
        let mut redis_config = RedisConfig::new(&url);
        redis_config.prefix = prefix.clone();
        redis_config.timeout = Duration::from_secs(5);
        support::by_message_only(&mut redis_config);
        runtime
            .block_on(async { RedisStore::connect(redis_config, &limits) })
            .unwrap()
    };
    let (here, elsewhere) = (connect(), connect());
    let plan = [LimitUnits {
        limit: Limit::Plan("sk_c"),
        units: 1,
    }];
    let now = 1_000_000_000;
    let reserve = |at: u64| {
        runtime
            .block_on(here.reserve_units_at(&plan, MaxWait::TierDelay, Some(at)))
            .unwrap()
    };
    // On the default plan: served at 0, 500, 1000 and 1500 ms; the fifth
    // (2000 ms) is 500 ms past the delay.
    let waits: Vec<Option<u64>> = (0..5)
        .map(|_| {
            let reservation = reserve(now);
            reservation
                .is_admitted()
                .then_some(reservation.wait.as_millis() as u64)
        })
        .collect();
    assert_eq!(waits, [Some(0), Some(500), Some(1000), Some(1500), None]);
    // Moved to t1 by the other gateway: its state starts afresh, and it may
    // wait 3 s: served at 0, 500, ..., 3000 ms (seven), the eighth refused.
    runtime
        .block_on(elsewhere.assign_tier("sk_c", "t1"))
        .unwrap();
    let waits: Vec<Option<u64>> = (0..8)
        .map(|_| {
            let reservation = reserve(now);
            reservation
                .is_admitted()
                .then_some(reservation.wait.as_millis() as u64)
        })
        .collect();
    assert_eq!(
        waits,
        [
            Some(0),
            Some(500),
            Some(1000),
            Some(1500),
            Some(2000),
            Some(2500),
            Some(3000),
            None
        ]
    );
    support::cleanup(&url, &prefix);
}
