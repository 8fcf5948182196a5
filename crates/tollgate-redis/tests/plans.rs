//! Plans of several policies on the Redis store: "2 per second and 5 per
//! minute" decided in one script call, all or nothing, by hand values; the
//! same random steps as `differential.rs`, with plans written as lists,
//! against the in-memory gateway; the shared default plan, inspect, reset
//! and tier changes covering every policy. Runs with `REDIS_URL` (and
//! `REDIS_CLUSTER_URL` for the cluster case).

mod generators;

use std::time::Duration;

use generators::{Clock, Step, policies, starts, steps};
use proptest::prelude::*;
use tollgate_core::{
    Limit, LimitDecision, LimitUnits, Limiter, LimiterConfig, NamedPolicy, PlanPolicies, Policy,
    Resolution, Store,
};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

const KEYS: [&str; 3] = ["sk_a", "sk_b", "sk_exempt"];

fn named(name: &str, policy: Policy) -> NamedPolicy {
    NamedPolicy {
        name: name.to_owned(),
        policy,
    }
}

/// The default plan `default`, tier `t1` of `tier`, `sk_exempt` exempt.
fn config(default: &PlanPolicies, tier: &PlanPolicies) -> LimiterConfig {
    let mut config = LimiterConfig {
        tiers: Default::default(),
        exempt_keys: vec!["sk_exempt".into()],
        // Never idle in the test's span: Redis forgets by TTL, on its own clock.
        idle_eviction_s: 1 << 40,
        ..LimiterConfig::default()
    };
    config.set_plan("default", default);
    config.set_plan("t1", tier);
    config.validate().unwrap();
    config
}

fn store(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: &str,
    limits: &LimiterConfig,
) -> RedisStore {
    let mut redis_config = RedisConfig::new(url);
    redis_config.prefix = prefix.to_owned();
    redis_config.time = TimeSource::Redis;
    redis_config.minimum_ttl = Duration::from_secs(600);
    redis_config.timeout = Duration::from_secs(5);
    support::by_message_only(&mut redis_config);
    runtime
        .block_on(async { RedisStore::connect(redis_config, limits) })
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// 2 per second and 5 per minute, both fixed windows.
fn second_and_minute() -> PlanPolicies {
    PlanPolicies::List(vec![
        named("second", Policy::fixed_window(2, 1).unwrap()),
        named("minute", Policy::fixed_window(5, 60).unwrap()),
    ])
}

/// (allowed, remaining, retry_after in s) of a plan's two policies.
fn seen(decision: &LimitDecision) -> [(u64, Option<u64>, u64); 2] {
    assert_eq!(decision.further.len(), 1, "{decision:?}");
    let state = |decision: &tollgate_core::Decision| {
        (
            decision.allowed,
            decision.remaining,
            decision.retry_after.as_secs(),
        )
    };
    [
        state(&decision.decision),
        state(&decision.further[0].decision),
    ]
}

/// 2100-01-01T00:00:00Z in microseconds: the start of a minute.
const T: u64 = 4_102_444_800_000_000;
const SECOND: u64 = 1_000_000;

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn every_policy_must_allow_and_a_refusal_uses_nothing() {
    let url = support::require_redis_url();
    let runtime = runtime();
    let one = PlanPolicies::One(Policy::fixed_window(9, 60).unwrap());
    let limits = config(&second_and_minute(), &one);
    let prefix = support::prefix("plans-hand");
    let store = store(&runtime, &url, &prefix, &limits);
    let plan = [LimitUnits {
        limit: Limit::Plan("sk_a"),
        units: 1,
    }];
    let request = |now| {
        runtime
            .block_on(store.acquire_units_at(&plan, Some(now)))
            .unwrap()
            .remove(0)
    };
    let expected = [
        (T, [(1, Some(1), 0), (1, Some(4), 0)]),
        (T, [(1, Some(0), 0), (1, Some(3), 0)]),
        (T, [(0, Some(0), 1), (0, Some(3), 0)]),
        (T + SECOND, [(1, Some(1), 0), (1, Some(2), 0)]),
        (T + SECOND, [(1, Some(0), 0), (1, Some(1), 0)]),
        (T + SECOND, [(0, Some(0), 1), (0, Some(1), 0)]),
        (T + 2 * SECOND, [(1, Some(1), 0), (1, Some(0), 0)]),
        (T + 2 * SECOND, [(0, Some(1), 0), (0, Some(0), 58)]),
        (T + 3 * SECOND, [(0, Some(2), 0), (0, Some(0), 57)]),
        (T + 60 * SECOND, [(1, Some(1), 0), (1, Some(4), 0)]),
    ];
    for (step, (now, want)) in expected.into_iter().enumerate() {
        let decision = request(now);
        assert_eq!(seen(&decision), want, "request {step}");
        assert_eq!(decision.name.as_deref(), Some("second"));
        assert_eq!(&*decision.further[0].name, "minute");
    }
    // The further policy's state sits beside the plan's, in its slot.
    let keys = support::keys(&url, &format!("{prefix}:*"));
    assert!(
        keys.iter().any(|key| key.ends_with("}:s:minute")),
        "{keys:?}"
    );
    // Inspect reports both; reset drops both.
    let report = runtime.block_on(store.inspect("sk_a")).unwrap();
    assert_eq!(report.policy_name.as_deref(), Some("second"));
    assert_eq!(report.further.len(), 1);
    assert_eq!(report.further[0].name, "minute");
    assert!(report.further[0].state.is_some());
    assert!(runtime.block_on(store.reset("sk_a")).unwrap());
    let report = runtime.block_on(store.inspect("sk_a")).unwrap();
    assert_eq!((report.state, report.further[0].state), (None, None));
    // A change of tier drops both too.
    request(T + 61 * SECOND);
    runtime.block_on(store.assign_tier("sk_a", "t1")).unwrap();
    let plan_keys = |url: &str| {
        support::keys(url, &format!("{prefix}:*"))
            .into_iter()
            .filter(|key| key.contains("}:s"))
            .count()
    };
    assert_eq!(plan_keys(&url), 0);
    support::cleanup(&url, &prefix);
}

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn the_shared_default_plan_is_a_list_on_every_gateway() {
    let url = support::require_redis_url();
    let runtime = runtime();
    let one = PlanPolicies::One(Policy::fixed_window(9, 60).unwrap());
    let limits = config(&one, &one);
    let prefix = support::prefix("plans-shared");
    let here = store(&runtime, &url, &prefix, &limits);
    let there = store(&runtime, &url, &prefix, &limits);
    assert_eq!(runtime.block_on(here.default_plan()).unwrap(), one);
    assert_eq!(
        runtime
            .block_on(here.configure_plan(second_and_minute()))
            .unwrap(),
        second_and_minute()
    );
    // The other gateway learns it by the channel.
    let mut learnt = false;
    for _ in 0..1000 {
        if runtime.block_on(there.default_plan()).unwrap() == second_and_minute() {
            learnt = true;
            break;
        }
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(10)).await });
    }
    assert!(learnt, "the other gateway never saw the list");
    let plan = [LimitUnits {
        limit: Limit::Plan("sk_a"),
        units: 1,
    }];
    let decision = runtime
        .block_on(there.acquire_units_at(&plan, Some(T)))
        .unwrap()
        .remove(0);
    assert_eq!(seen(&decision), [(1, Some(1), 0), (1, Some(4), 0)]);
    let decision = runtime
        .block_on(here.acquire_units_at(&plan, Some(T)))
        .unwrap()
        .remove(0);
    assert_eq!(seen(&decision), [(1, Some(0), 0), (1, Some(3), 0)]);
    // A bad list is refused.
    let twice = PlanPolicies::List(vec![
        named("a", Policy::fixed_window(1, 1).unwrap()),
        named("a", Policy::fixed_window(2, 1).unwrap()),
    ]);
    assert!(runtime.block_on(here.configure_plan(twice)).is_err());
    assert_eq!(
        runtime.block_on(here.default_plan()).unwrap(),
        second_and_minute()
    );
    support::cleanup(&url, &prefix);
}

/// The steps of `differential.rs` on the memory gateway and on the Redis
/// store at `url`, the default plan and tier `t1` written as lists of two
/// policies; `policies`: the default plan's two, the route's, the other
/// limit's, the tier's two.
fn same_decisions(
    url: &str,
    policies: &[Policy],
    steps: Vec<(i64, Step)>,
    start: u64,
) -> Result<(), TestCaseError> {
    let runtime = runtime();
    let default = PlanPolicies::List(vec![named("a", policies[0]), named("b", policies[1])]);
    let tier = PlanPolicies::List(vec![named("x", policies[4]), named("y", policies[5])]);
    let limits = config(&default, &tier);
    let gateway = Limiter::new(&limits, Resolution::Microseconds).unwrap();
    let route = gateway.prepare(policies[2]).unwrap();
    let other = gateway.prepare(policies[3]).unwrap();
    let prefix = support::prefix("plans-differential");
    let store = store(&runtime, url, &prefix, &limits);
    let mut clock = Clock::new(start);
    for (by, step) in steps {
        let now = clock.step(by);
        match step {
            Step::Acquire { key, units, count } => {
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
                let request: Vec<LimitUnits<'_>> = all[..count]
                    .iter()
                    .zip(&units)
                    .map(|(limit, units)| LimitUnits {
                        limit: *limit,
                        units: *units,
                    })
                    .collect();
                let expected: Vec<LimitDecision> = gateway.acquire_units(&request, now);
                let got = runtime
                    .block_on(store.acquire_units_at(&request, Some(now)))
                    .unwrap();
                let forgotten = got.iter().any(|limit| {
                    limit.policy.is_some()
                        && (limit.decision.reset_after.is_zero()
                            || limit
                                .further
                                .iter()
                                .any(|further| further.decision.reset_after.is_zero()))
                });
                if forgotten {
                    clock.forgotten();
                }
                prop_assert_eq!(
                    got,
                    expected,
                    "{:?} units of {} and the limits {:?} at {}",
                    &units[..count],
                    KEYS[key],
                    policies,
                    now
                );
            }
            Step::Reset { key } => {
                gateway.reset(KEYS[key], now);
                runtime.block_on(store.reset(KEYS[key])).unwrap();
            }
            Step::Configure { policy } => {
                // A new default list: "a" replaced, "c" new.
                let plan = PlanPolicies::List(vec![named("a", policy), named("c", policies[1])]);
                gateway.configure_plan(&plan).unwrap();
                runtime.block_on(store.configure_plan(plan)).unwrap();
            }
            Step::Tier { key, tier } => {
                let tier = if tier { "t1" } else { "default" };
                gateway.assign_tier(KEYS[key], tier).unwrap();
                runtime
                    .block_on(store.assign_tier(KEYS[key], tier))
                    .unwrap();
            }
        }
    }
    support::cleanup(url, &prefix);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_decides_lists_as_the_memory_gateway_does(
        policies in prop::collection::vec(policies(), 6),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_redis_url();
        same_decisions(&url, &policies, steps, start)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The same on a Redis Cluster: a plan's policies share its slot, the
    /// route and the other limit sit in others, so the split steps decide.
    #[test]
    #[cfg_attr(
        not(has_redis_cluster),
        ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
    )]
    fn redis_decides_lists_as_the_memory_gateway_does_on_a_cluster(
        policies in prop::collection::vec(policies(), 6),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_cluster_url();
        same_decisions(&url, &policies, steps, start)?;
    }
}
