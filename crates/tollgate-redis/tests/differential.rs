//! The Redis store against the in-memory gateway: the same operations with the
//! same timestamps give the same decisions, batches and several limits
//! included, with per-limit units and limits counting refused units (the
//! gateway itself is held to the independent models of
//! `crates/tollgate-core/tests/models` by core's property tests). On a Redis
//! Cluster (`REDIS_CLUSTER_URL`) the limits sit in different slots, so the
//! split steps are compared too.

mod support;

use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::{Limit, LimitDecision, LimitUnits, Limiter, LimiterConfig, Policy, Resolution};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};

fn policies() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (1u64..=8, 1u64..=20)
            .prop_map(|(limit, window)| Policy::fixed_window(limit, window).unwrap()),
        (1u64..=8, 1u64..=20).prop_map(|(limit, window)| {
            Policy::fixed_window_counting_refused(limit, window).unwrap()
        }),
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

/// A store on `url` under `prefix` with `plan` as its default policy, on the
/// times each call gives.
fn store(runtime: &tokio::runtime::Runtime, url: &str, prefix: &str, plan: Policy) -> RedisStore {
    let mut redis_config = RedisConfig::new(url);
    redis_config.prefix = prefix.to_owned();
    redis_config.time = TimeSource::Redis;
    redis_config.minimum_ttl = Duration::from_secs(600);
    redis_config.timeout = Duration::from_secs(5);
    runtime
        .block_on(async { RedisStore::connect(redis_config, &config(plan)) })
        .unwrap()
}

/// (microseconds since the previous step, the plan key, units per limit, how
/// many of the limits)
type UnitSteps = Vec<(u64, usize, Vec<u64>, usize)>;

fn unit_steps() -> impl Strategy<Value = UnitSteps> {
    prop::collection::vec(
        (
            prop_oneof![Just(0u64), 0u64..3_000_000, Just(1_000_000)],
            0usize..3,
            prop::collection::vec(prop_oneof![0u64..=10, Just(0), Just(1)], 3),
            1usize..=3,
        ),
        1..40,
    )
}

/// A plan and two policy limits with per-limit units: Redis (at `url`)
/// decides what the memory gateway decides.
fn units_match(
    url: &str,
    policies: &[Policy],
    steps: UnitSteps,
    start: u64,
) -> Result<(), TestCaseError> {
    let runtime = runtime();
    let gateway = Limiter::new(&config(policies[0]), Resolution::Microseconds).unwrap();
    let route = gateway.prepare(policies[1]).unwrap();
    let other = gateway.prepare(policies[2]).unwrap();
    let prefix = support::prefix("differential-units");
    let store = store(&runtime, url, &prefix, policies[0]);
    let keys = ["sk_a", "sk_b", "sk_exempt"];
    let mut now = start;
    for (elapsed, key, units, count) in steps {
        now += elapsed;
        let limits = [
            Limit::Plan(keys[key]),
            Limit::Policy {
                key: "route",
                policy: &route,
            },
            Limit::Policy {
                key: "other",
                policy: &other,
            },
        ];
        let request: Vec<LimitUnits<'_>> = limits[..count]
            .iter()
            .zip(&units)
            .map(|(limit, units)| LimitUnits {
                limit: *limit,
                units: *units,
            })
            .collect();
        let expected = gateway.acquire_units(&request, now);
        let got = runtime
            .block_on(store.acquire_units_at(&request, Some(now)))
            .unwrap();
        prop_assert_eq!(
            got,
            expected,
            "{:?} units of {} and {:?} at {}",
            &units[..count],
            keys[key],
            &policies[..count],
            now
        );
    }
    support::cleanup(url, &prefix);
    Ok(())
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
        let store = store(&runtime, &url, &prefix, plan);
        let keys = ["sk_a", "sk_b", "sk_exempt"];
        let mut now = start;
        for (elapsed, units, key, with_route) in steps {
            now += elapsed;
            let key = keys[key];
            if with_route {
                // One unit against the plan and the route together.
                let limits = [Limit::Plan(key), Limit::Policy { key: "route", policy: &route_policy }];
                let expected: Vec<_> = gateway.acquire(&limits, now).into_iter().map(|limit| limit.decision).collect();
                let request = limits.map(|limit| LimitUnits { limit, units: 1 });
                let got: Vec<_> = runtime
                    .block_on(store.acquire_units_at(&request, Some(now)))
                    .unwrap()
                    .into_iter()
                    .map(|limit| limit.decision)
                    .collect();
                prop_assert_eq!(got, expected, "{} and the route at {}", key, now);
            } else {
                // `units` of the plan alone: all or nothing unless the plan
                // counts refused units.
                let request = [LimitUnits { limit: Limit::Plan(key), units }];
                let expected = gateway.acquire_units(&request, now).remove(0).decision;
                let got = runtime
                    .block_on(store.acquire_units_at(&request, Some(now)))
                    .unwrap()
                    .remove(0)
                    .decision;
                prop_assert_eq!(got, expected, "{} units of {} at {}", units, key, now);
            }
        }
        support::cleanup(&url, &prefix);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn per_limit_units_decide_as_the_memory_gateway(
        policies in prop::collection::vec(policies(), 3),
        steps in unit_steps(),
        start in 1_700_000_000_000_000u64..1_800_000_000_000_000,
    ) {
        let Some(url) = support::redis_url() else { return Ok(()) };
        units_match(&url, &policies, steps, start)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The same on a Redis Cluster: the plan, `route` and `other` sit in
    /// different slots (for most plan keys), so the split steps decide.
    #[test]
    fn per_limit_units_decide_as_the_memory_gateway_on_a_cluster(
        policies in prop::collection::vec(policies(), 3),
        steps in unit_steps(),
        start in 1_700_000_000_000_000u64..1_800_000_000_000_000,
    ) {
        let Some(url) = support::redis_cluster_url() else { return Ok(()) };
        units_match(&url, &policies, steps, start)?;
    }
}

/// (allowed, rejected, remaining) of each decision.
fn counts(decisions: &[LimitDecision]) -> Vec<(u64, u64, Option<u64>)> {
    decisions
        .iter()
        .map(|limit| {
            let decision = &limit.decision;
            (decision.allowed, decision.rejected, decision.remaining)
        })
        .collect()
}

#[test]
fn counting_limits_are_charged_whatever_the_others_decide() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let runtime = runtime();
    let prefix = support::prefix("counting");
    let store = store(
        &runtime,
        &url,
        &prefix,
        Policy::fixed_window(5, 60).unwrap(),
    );
    let counting = tollgate_core::Store::prepare(
        &store,
        Policy::fixed_window_counting_refused(20, 60).unwrap(),
    )
    .unwrap();
    let descriptor = Limit::Policy {
        key: "descriptor",
        policy: &counting,
    };
    let plan = Limit::Plan("sk_a");
    // 2026-12-01T00:00:10Z: ten seconds into a minute.
    let t = 1_796_083_210_000_000;
    let ask = |limits: &[LimitUnits<'_>], now: u64| {
        counts(
            &runtime
                .block_on(store.acquire_units_at(limits, Some(now)))
                .unwrap(),
        )
    };
    // 25 hits on 20: 20 allowed, the counter at 25; the plan's 6 of 5 take
    // nothing of the plan, and do not stop the descriptor's.
    assert_eq!(
        ask(
            &[
                LimitUnits {
                    limit: descriptor,
                    units: 25
                },
                LimitUnits {
                    limit: plan,
                    units: 6
                }
            ],
            t
        ),
        [(20, 5, Some(0)), (0, 6, Some(5))]
    );
    // 10 more: none allowed; the plan's unit is taken.
    assert_eq!(
        ask(
            &[
                LimitUnits {
                    limit: descriptor,
                    units: 10
                },
                LimitUnits {
                    limit: plan,
                    units: 1
                }
            ],
            t + 1
        ),
        [(0, 10, Some(0)), (1, 0, Some(4))]
    );
    // The next window starts afresh.
    assert_eq!(
        ask(
            &[LimitUnits {
                limit: descriptor,
                units: 1
            }],
            t + 60_000_000
        ),
        [(1, 0, Some(19))]
    );
    support::cleanup(&url, &prefix);
}

#[test]
fn a_batch_of_10_to_the_15_costs_one_call_and_is_exact() {
    let Some(url) = support::redis_url() else {
        return;
    };
    let runtime = runtime();
    for policy in [
        Policy::fixed_window(5, 60).unwrap(),
        Policy::fixed_window_counting_refused(5, 60).unwrap(),
        Policy::sliding_log(20, 60).unwrap(),
        Policy::token_bucket(60, 60, 5).unwrap(),
    ] {
        let prefix = support::prefix("batch");
        let mut redis_config = RedisConfig::new(url.clone());
        redis_config.prefix = prefix.clone();
        let store = runtime
            .block_on(async { RedisStore::connect(redis_config, &config(policy)) })
            .unwrap();
        let request = [LimitUnits {
            limit: Limit::Plan("sk_big"),
            units: 1_000_000_000_000_000,
        }];
        let decision = runtime
            .block_on(store.acquire_units_at(&request, Some(600_000_000)))
            .unwrap()
            .remove(0)
            .decision;
        let capacity = policy.capacity();
        if policy.counts_refused() {
            // Counted whole: what fits allowed, the counter far past the limit.
            assert_eq!(
                (decision.allowed, decision.rejected),
                (capacity, 1_000_000_000_000_000 - capacity)
            );
            assert_eq!(decision.remaining, Some(0));
        } else {
            // All or nothing: refused whole, nothing taken.
            assert_eq!(
                (decision.allowed, decision.rejected),
                (0, 1_000_000_000_000_000)
            );
            assert_eq!(decision.remaining, Some(capacity));
        }
        support::cleanup(&url, &prefix);
    }
}
