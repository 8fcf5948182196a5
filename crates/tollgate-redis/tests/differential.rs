//! The Redis store against the in-memory gateway: the same operations with the
//! same timestamps give the same decisions, batches and several limits
//! included.

mod support;

use std::num::NonZeroU64;
use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::{Limit, Limiter, LimiterConfig, Policy, Resolution};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};

fn policies() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (1u64..=8, 1u64..=20)
            .prop_map(|(limit, window)| Policy::fixed_window(limit, window).unwrap()),
        (1u64..=8, 1u64..=20)
            .prop_map(|(limit, window)| Policy::sliding_log(limit, window).unwrap()),
        (1u64..=8, 1u64..=20, 1u64..=8)
            .prop_map(|(limit, window, burst)| Policy::token_bucket(limit, window, burst).unwrap()),
    ]
}

/// (microseconds since the previous step, batch size, key, with the route limit)
fn steps() -> impl Strategy<Value = Vec<(u64, u64, usize, bool)>> {
    prop::collection::vec(
        (
            prop_oneof![Just(0u64), 0u64..3_000_000, Just(1_000_000)],
            1u64..=10,
            0usize..3,
            any::<bool>(),
        ),
        1..40,
    )
}

fn config(policy: Policy) -> LimiterConfig {
    LimiterConfig {
        default_policy: policy,
        tiers: Default::default(),
        exempt_keys: vec!["sk_exempt".into()],
        // Never idle in the test's span: Redis forgets by TTL, on its own clock.
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn redis_decides_what_the_memory_gateway_decides(
        plan in policies(),
        route in policies(),
        steps in steps(),
        start in 1_700_000_000_000_000u64..1_800_000_000_000_000,
    ) {
        let Some(url) = support::redis_url() else { return Ok(()) };
        let runtime = runtime();
        let gateway = Limiter::new(&config(plan), Resolution::Microseconds).unwrap();
        let route_policy = gateway.prepare(route).unwrap();
        let prefix = support::prefix("differential");
        let mut redis_config = RedisConfig::new(url.clone());
        redis_config.prefix = prefix.clone();
        redis_config.time = TimeSource::Redis;
        redis_config.minimum_ttl = Duration::from_secs(600);
        redis_config.timeout = Duration::from_secs(5);
        let store = runtime.block_on(async { RedisStore::connect(redis_config, &config(plan)) }).unwrap();
        let keys = ["sk_a", "sk_b", "sk_exempt"];
        let mut now = start;
        for (elapsed, units, key, with_route) in steps {
            now += elapsed;
            let key = keys[key];
            if with_route {
                // One unit against the plan and the route together.
                let limits = [Limit::Plan(key), Limit::Policy { key: "route", policy: &route_policy }];
                let expected: Vec<_> = gateway.acquire(&limits, now).into_iter().map(|limit| limit.decision).collect();
                let got: Vec<_> = runtime
                    .block_on(store.acquire_units(&limits, 1, Some(now)))
                    .unwrap()
                    .into_iter()
                    .map(|limit| limit.decision)
                    .collect();
                prop_assert_eq!(got, expected, "{} and the route at {}", key, now);
            } else {
                let expected = gateway.request_batch(key, now, NonZeroU64::new(units).unwrap());
                let got = runtime
                    .block_on(store.acquire_units(&[Limit::Plan(key)], units, Some(now)))
                    .unwrap()
                    .remove(0)
                    .decision;
                prop_assert_eq!(got, expected, "{} units of {} at {}", units, key, now);
            }
        }
        support::cleanup(&url, &prefix);
    }
}

#[test]
fn a_batch_of_10_to_the_15_costs_one_call_and_is_exact() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let runtime = runtime();
    for policy in [
        Policy::fixed_window(5, 60).unwrap(),
        Policy::sliding_log(20, 60).unwrap(),
        Policy::token_bucket(60, 60, 5).unwrap(),
    ] {
        let prefix = support::prefix("batch");
        let mut redis_config = RedisConfig::new(url.clone());
        redis_config.prefix = prefix.clone();
        let store = runtime
            .block_on(async { RedisStore::connect(redis_config, &config(policy)) })
            .unwrap();
        let decision = runtime
            .block_on(store.acquire_units(
                &[Limit::Plan("sk_big")],
                1_000_000_000_000_000,
                Some(600_000_000),
            ))
            .unwrap()
            .remove(0)
            .decision;
        let capacity = policy.capacity();
        assert_eq!(
            (decision.allowed, decision.rejected),
            (capacity, 1_000_000_000_000_000 - capacity)
        );
        assert_eq!(decision.remaining, Some(0));
        support::cleanup(&url, &prefix);
    }
}
