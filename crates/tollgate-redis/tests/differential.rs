//! The Redis store against the in-memory gateway: the same operations at the
//! same times give the same decisions, over the whole range the store
//! accepts. Limits, windows, bursts and units are mostly small and
//! sometimes next to the store's bound (quantities below 2^52, units past
//! it); time steps forward, stands still, leaps over years and goes back
//! (the token bucket's lagging-clock branch; never back past a moment the
//! store forgot a state at, see `generators::Clock`); resets, `configure`
//! and tier changes come between the requests. Requests carry a plan and up
//! to two policy limits, each with its own units, counting refused units or
//! not. On a Redis Cluster (`REDIS_CLUSTER_URL`) the limits sit in
//! different slots, so the split steps are compared too. (`models.rs` holds
//! the store to the independent models instead; `bounds.rs` writes the edge
//! cases out by hand.)

mod generators;

use std::time::Duration;

use generators::{Clock, Step, calendar_starts, policies, starts, steps, with_calendars};
use proptest::prelude::*;
use tollgate_core::{
    Limit, LimitDecision, LimitUnits, Limiter, LimiterConfig, Policy, Resolution, Store,
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
        // Never idle in the test's span: Redis forgets by TTL, on its own clock.
        idle_eviction_s: 1 << 40,
        ..LimiterConfig::default()
    }
}

/// A store on `url` under `prefix` with `limits`, on the times each call
/// gives; a new default policy comes by message only (no re-read that could
/// race a `configure` of the steps).
fn store(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: &str,
    limits: &LimiterConfig,
) -> RedisStore {
    let mut redis_config = RedisConfig::new(url);
    redis_config.prefix = prefix.to_owned();
    redis_config.time = TimeSource::Redis;
    // Redis expires keys on its own clock: none expires during a case.
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

/// The steps on the memory gateway and on the Redis store at `url`, from
/// `start`, compared decision by decision. `policies`: the default policy,
/// the route's, the other limit's and the tier's.
fn same_decisions(
    url: &str,
    policies: &[Policy],
    steps: Vec<(i64, Step)>,
    start: u64,
) -> Result<(), TestCaseError> {
    let runtime = runtime();
    let limits = config(policies[0], policies[3]);
    let gateway = Limiter::new(&limits, Resolution::Microseconds).unwrap();
    let route = gateway.prepare(policies[1]).unwrap();
    let other = gateway.prepare(policies[2]).unwrap();
    let prefix = support::prefix("differential");
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
                if got
                    .iter()
                    .any(|limit| limit.policy.is_some() && limit.decision.reset_after.is_zero())
                {
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
                // Whether there was state may differ (Redis keeps a state
                // past its use until its raised TTL); what follows may not.
                gateway.reset(KEYS[key], now);
                runtime.block_on(store.reset(KEYS[key])).unwrap();
            }
            Step::Configure { policy } => {
                gateway.configure(policy).unwrap();
                runtime.block_on(store.configure(policy)).unwrap();
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
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_decides_what_the_memory_gateway_decides(
        policies in prop::collection::vec(policies(), 4),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_redis_url();
        same_decisions(&url, &policies, steps, start)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same on a Redis Cluster: the plan, `route` and `other` sit in
    /// different slots (for most plan keys), so the split steps decide.
    #[test]
    #[cfg_attr(
        not(has_redis_cluster),
        ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
    )]
    fn redis_decides_what_the_memory_gateway_decides_on_a_cluster(
        policies in prop::collection::vec(with_calendars(), 4),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_cluster_url();
        same_decisions(&url, &policies, steps, start)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Calendar windows (days, weeks, months, years in UTC, Berlin and
    /// Kolkata) beside the other policies, from just before a boundary: the
    /// script, given the boundaries core computed around the caller's time,
    /// decides as core does on either side of it.
    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_decides_calendar_windows_as_the_memory_gateway_does(
        policies in prop::collection::vec(with_calendars(), 4),
        steps in steps(KEYS.len()),
        start in calendar_starts(),
    ) {
        let url = support::require_redis_url();
        same_decisions(&url, &policies, steps, start)?;
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
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn counting_limits_are_charged_whatever_the_others_decide() {
    let url = support::require_redis_url();
    let runtime = runtime();
    let prefix = support::prefix("counting");
    let limits = config(
        Policy::fixed_window(5, 60).unwrap(),
        Policy::fixed_window(5, 60).unwrap(),
    );
    let store = store(&runtime, &url, &prefix, &limits);
    let counting = store
        .prepare(Policy::fixed_window_counting_refused(20, 60).unwrap())
        .unwrap();
    let descriptor = Limit::Policy {
        key: "descriptor",
        policy: &counting,
    };
    let plan = Limit::Plan("sk_a");
    // 2100-01-01T00:00:10Z: ten seconds into a minute, far from today.
    let t = 4_102_444_810_000_000;
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
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn counting_limits_on_one_window_keep_their_own_limits() {
    let url = support::require_redis_url();
    let runtime = runtime();
    let prefix = support::prefix("counting-limits");
    let limits = config(
        Policy::fixed_window(5, 60).unwrap(),
        Policy::fixed_window(5, 60).unwrap(),
    );
    let store = store(&runtime, &url, &prefix, &limits);
    // Two descriptors counting refused units on the same minute, one of 1
    // and one of 3, in one request of 2 units each.
    let one = store
        .prepare(Policy::fixed_window_counting_refused(1, 60).unwrap())
        .unwrap();
    let three = store
        .prepare(Policy::fixed_window_counting_refused(3, 60).unwrap())
        .unwrap();
    let request = [
        LimitUnits {
            limit: Limit::Policy {
                key: "one",
                policy: &one,
            },
            units: 2,
        },
        LimitUnits {
            limit: Limit::Policy {
                key: "three",
                policy: &three,
            },
            units: 2,
        },
    ];
    // 2100-01-01T00:00:10Z.
    let decisions = runtime
        .block_on(store.acquire_units_at(&request, Some(4_102_444_810_000_000)))
        .unwrap();
    // 1 of 2 allowed on the first (its count at 2), both on the second.
    assert_eq!(counts(&decisions), [(1, 1, Some(0)), (2, 0, Some(1))]);
    support::cleanup(&url, &prefix);
}
