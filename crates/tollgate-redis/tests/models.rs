//! The Redis store against the independent models of
//! `crates/tollgate-core/tests/models` (a count per window, a list of the
//! units allowed, a count of tokens, and the rule of several limits written
//! out over them), not only against the in-memory gateway that shares its
//! code with the engine. The same draws as `differential.rs`: policies over
//! the whole range the store accepts, units up to 2^64 - 1, time that
//! stands still, leaps and goes back, resets, `configure` and tier changes
//! between requests; every number of every decision is compared (allowed,
//! rejected, remaining, retry_after, reset_after).

mod generators;

use std::time::Duration;

use generators::{Clock, Step, policies, starts, steps};
use models::{FixedWindowModel, Model, Outcome, SlidingLogModel, TokenBucketModel};
use proptest::prelude::*;
use tollgate_core::{Algorithm, Limit, LimitUnits, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::models;
use tollgate_test_support::redis as support;

/// The model of `policy`, counting microseconds.
fn model(policy: &Policy) -> Box<dyn Model> {
    let window = policy.window_s() * 1_000_000;
    match policy.algorithm() {
        Algorithm::FixedWindow if policy.counts_refused() => {
            Box::new(FixedWindowModel::counting_refused(policy.limit(), window))
        }
        Algorithm::FixedWindow => Box::new(FixedWindowModel::new(policy.limit(), window)),
        Algorithm::SlidingLog => Box::new(SlidingLogModel::new(policy.limit(), window)),
        Algorithm::TokenBucket => Box::new(TokenBucketModel::new(
            policy.limit(),
            window,
            policy.burst().unwrap(),
        )),
    }
}

const KEYS: [&str; 2] = ["sk_a", "sk_b"];

/// A Redis store on `url` under `prefix` with the default policy `plan` and
/// the tier `t1`, on the times each call gives; a new default policy comes
/// by message only (no re-read that could race a `configure` of the steps).
fn store(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: &str,
    plan: Policy,
    tier: Policy,
) -> RedisStore {
    let limits = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: plan,
        tiers: [("t1".to_owned(), tier)].into(),
        exempt_keys: vec![],
        ..LimiterConfig::default()
    };
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.time = TimeSource::Redis;
    // Redis expires keys on its own clock: none expires during a case.
    config.minimum_ttl = Duration::from_secs(600);
    config.timeout = Duration::from_secs(5);
    support::by_message_only(&mut config);
    runtime
        .block_on(async { RedisStore::connect(config, &limits) })
        .unwrap()
}

/// A plan key's model and whether it is on the tier.
struct Plan {
    model: Box<dyn Model>,
    on_tier: bool,
}

/// The steps on the models and on the Redis store at `url` from `start`,
/// compared limit by limit. `policies`: the default, the route's, the other
/// limit's and the tier's.
fn same_as_the_models(
    url: &str,
    policies: &[Policy],
    steps: Vec<(i64, Step)>,
    start: u64,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let prefix = support::prefix("models");
    let tier = policies[3];
    let store = store(&runtime, url, &prefix, policies[0], tier);
    let route = store.prepare(policies[1]).unwrap();
    let other = store.prepare(policies[2]).unwrap();
    let mut default = policies[0];
    let mut plans: Vec<Plan> = KEYS
        .iter()
        .map(|_| Plan {
            model: model(&default),
            on_tier: false,
        })
        .collect();
    // The models of the plan being asked (swapped in from `plans`), the
    // route and the other limit: in a request's order.
    let mut limits: Vec<Box<dyn Model>> =
        vec![model(&default), model(&policies[1]), model(&policies[2])];
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
                let got: Vec<Outcome> = runtime
                    .block_on(store.acquire_units_at(&request, Some(now)))
                    .unwrap()
                    .into_iter()
                    .map(|limit| Outcome {
                        allowed: limit.decision.allowed,
                        rejected: limit.decision.rejected,
                        remaining: limit.decision.remaining.unwrap(),
                        retry_after: micros(limit.decision.retry_after),
                        reset_after: micros(limit.decision.reset_after),
                    })
                    .collect();
                if got.iter().any(|outcome| outcome.reset_after == 0) {
                    clock.forgotten();
                }
                std::mem::swap(&mut limits[0], &mut plans[key].model);
                let expected = models::acquire_outcomes(&mut limits[..count], &units[..count], now);
                std::mem::swap(&mut limits[0], &mut plans[key].model);
                prop_assert_eq!(
                    got,
                    expected,
                    "{:?} units of {} (on the tier: {}) and the limits {:?} (default now {:?}) at {}",
                    &units[..count],
                    KEYS[key],
                    plans[key].on_tier,
                    policies,
                    default,
                    now
                );
            }
            Step::Reset { key } => {
                runtime.block_on(store.reset(KEYS[key])).unwrap();
                let policy = if plans[key].on_tier { tier } else { default };
                plans[key].model = model(&policy);
            }
            Step::Configure { policy } => {
                // Every key on the default policy starts afresh under it;
                // keys on the tier keep their state.
                runtime.block_on(store.configure(policy)).unwrap();
                default = policy;
                for plan in plans.iter_mut().filter(|plan| !plan.on_tier) {
                    plan.model = model(&default);
                }
            }
            Step::Tier { key, tier: on_tier } => {
                let name = if on_tier { "t1" } else { "default" };
                runtime
                    .block_on(store.assign_tier(KEYS[key], name))
                    .unwrap();
                // Another tier starts the key afresh; the same keeps it.
                if plans[key].on_tier != on_tier {
                    let policy = if on_tier { tier } else { default };
                    plans[key] = Plan {
                        model: model(&policy),
                        on_tier,
                    };
                }
            }
        }
    }
    support::cleanup(url, &prefix);
    Ok(())
}

/// `duration` in whole microseconds (decisions are in microseconds).
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_decides_what_the_models_decide(
        policies in prop::collection::vec(policies(), 4),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_redis_url();
        same_as_the_models(&url, &policies, steps, start)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same on a Redis Cluster, where the limits sit in different slots
    /// and the split steps decide.
    #[test]
    #[cfg_attr(
        not(has_redis_cluster),
        ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
    )]
    fn redis_decides_what_the_models_decide_on_a_cluster(
        policies in prop::collection::vec(policies(), 4),
        steps in steps(KEYS.len()),
        start in starts(),
    ) {
        let url = support::require_cluster_url();
        same_as_the_models(&url, &policies, steps, start)?;
    }
}
