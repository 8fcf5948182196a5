//! Property tests: the engine against the naive models of `models.rs`, and the
//! limits themselves as properties.

mod models;

use std::num::NonZeroU64;

use models::{Batch, FixedWindowModel, Model, Single, SlidingLogModel, TokenBucketModel};
use proptest::prelude::*;
use tollgate_core::{Algorithm, Limit, LimitUnits, Limiter, LimiterConfig, Policy, Resolution};

/// A limiter whose default policy is `policy`, counting seconds, no eviction in
/// the times these tests use.
fn limiter(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        default_policy: policy,
        tiers: Default::default(),
        exempt_keys: vec![],
        ..LimiterConfig::default()
    };
    Limiter::new(&config, Resolution::Seconds).unwrap()
}

fn model(policy: &Policy) -> Box<dyn Model> {
    match policy.algorithm() {
        Algorithm::FixedWindow if policy.counts_refused() => Box::new(
            FixedWindowModel::counting_refused(policy.limit(), policy.window_s()),
        ),
        Algorithm::FixedWindow => {
            Box::new(FixedWindowModel::new(policy.limit(), policy.window_s()))
        }
        Algorithm::SlidingLog => Box::new(SlidingLogModel::new(policy.limit(), policy.window_s())),
        Algorithm::TokenBucket => Box::new(TokenBucketModel::new(
            policy.limit(),
            policy.window_s(),
            policy.burst().unwrap(),
        )),
    }
}

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

/// Steps of (seconds since the previous step, batch size).
fn steps() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..=12, 1u64..=12), 1..60)
}

fn units(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Single requests give exactly what the model gives.
    #[test]
    fn single_requests_match_the_model(policy in policies(), steps in steps(), start in 0u64..1000) {
        let limiter = limiter(policy);
        let mut model = model(&policy);
        let mut now = start;
        for (elapsed, _) in steps {
            now += elapsed;
            let decision = limiter.request("k", now);
            let expected = model.request(now);
            let got = Single {
                allowed: decision.is_allowed(),
                remaining: decision.remaining.unwrap(),
                retry_after: decision.retry_after.as_secs(),
            };
            prop_assert_eq!(got, expected, "at {}", now);
        }
    }

    /// A request held to its plan alone through `acquire` gives exactly what
    /// the model gives, and so does one held to a policy limit alone.
    #[test]
    fn acquire_with_one_limit_matches_the_model(policy in policies(), steps in steps(), start in 0u64..1000) {
        let limiter = limiter(policy);
        let prepared = limiter.prepare(policy).unwrap();
        let mut plan_model = model(&policy);
        let mut policy_model = model(&policy);
        let mut now = start;
        for (elapsed, _) in steps {
            now += elapsed;
            let limits = [
                [Limit::Plan("k")],
                [Limit::Policy { key: "route", policy: &prepared }],
            ];
            for (limit, model) in limits.iter().zip([&mut plan_model, &mut policy_model]) {
                let decision = limiter.acquire(limit, now).remove(0).decision;
                let got = Single {
                    allowed: decision.is_allowed(),
                    remaining: decision.remaining.unwrap(),
                    retry_after: decision.retry_after.as_secs(),
                };
                prop_assert_eq!(got, model.request(now), "{:?} at {}", limit[0], now);
            }
        }
    }

    /// A batch of n gives exactly what n single requests of the model give.
    #[test]
    fn batches_match_single_requests_of_the_model(policy in policies(), steps in steps()) {
        let limiter = limiter(policy);
        let mut model = model(&policy);
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            let decision = limiter.request_batch("k", now, units(n));
            let got = Batch {
                allowed: decision.allowed,
                rejected: decision.rejected,
                remaining: decision.remaining.unwrap(),
                retry_after: decision.retry_after.as_secs(),
            };
            prop_assert_eq!(got, model.batch(now, n), "batch of {} at {}", n, now);
        }
    }

    /// A request held to a plan and two policy limits, each with its own
    /// units (0 included), plain and count-refused mixed, gives exactly what
    /// the rule written over the models gives.
    #[test]
    fn acquire_units_matches_the_model(
        policies in prop::collection::vec(policies(), 3),
        steps in prop::collection::vec((0u64..=12, prop::collection::vec(0u64..=10, 3), 1usize..=3), 1..60),
        start in 0u64..1000,
    ) {
        let limiter = limiter(policies[0]);
        let route = limiter.prepare(policies[1]).unwrap();
        let other = limiter.prepare(policies[2]).unwrap();
        let limits = [
            Limit::Plan("k"),
            Limit::Policy { key: "route", policy: &route },
            Limit::Policy { key: "other", policy: &other },
        ];
        let mut models: Vec<Box<dyn Model>> = policies.iter().map(model).collect();
        let mut now = start;
        for (elapsed, units, count) in steps {
            now += elapsed;
            // The first `count` limits, with their units.
            let request: Vec<LimitUnits<'_>> = limits[..count]
                .iter()
                .zip(&units)
                .map(|(limit, units)| LimitUnits { limit: *limit, units: *units })
                .collect();
            let got: Vec<Batch> = limiter
                .acquire_units(&request, now)
                .into_iter()
                .map(|limit| Batch {
                    allowed: limit.decision.allowed,
                    rejected: limit.decision.rejected,
                    remaining: limit.decision.remaining.unwrap(),
                    retry_after: limit.decision.retry_after.as_secs(),
                })
                .collect();
            let expected = models::acquire_units(&mut models[..count], &units[..count], now);
            prop_assert_eq!(got, expected, "{:?} of {:?} at {}", &units[..count], &policies[..count], now);
        }
    }

    /// `acquire` is `acquire_units` with one unit per limit: the model's rule
    /// with 1 unit each, count-refused limits charged whatever the others say.
    #[test]
    fn acquire_is_one_unit_per_limit(
        policies in prop::collection::vec(policies(), 2),
        steps in prop::collection::vec(0u64..=12, 1..60),
        start in 0u64..1000,
    ) {
        let limiter = limiter(policies[0]);
        let route = limiter.prepare(policies[1]).unwrap();
        let limits = [Limit::Plan("k"), Limit::Policy { key: "route", policy: &route }];
        let mut models: Vec<Box<dyn Model>> = policies.iter().map(model).collect();
        let mut now = start;
        for elapsed in steps {
            now += elapsed;
            let got: Vec<Batch> = limiter
                .acquire(&limits, now)
                .into_iter()
                .map(|limit| Batch {
                    allowed: limit.decision.allowed,
                    rejected: limit.decision.rejected,
                    remaining: limit.decision.remaining.unwrap(),
                    retry_after: limit.decision.retry_after.as_secs(),
                })
                .collect();
            prop_assert_eq!(got, models::acquire_units(&mut models, &[1, 1], now), "at {}", now);
        }
    }

    /// Fixed window (counting refused units or not): never more than `limit`
    /// allowed in one aligned window.
    #[test]
    fn fixed_window_never_exceeds_the_limit_per_window(
        limit in 1u64..=10, window in 1u64..=30, steps in steps(), count_refused in any::<bool>(),
    ) {
        let policy = if count_refused {
            Policy::fixed_window_counting_refused(limit, window).unwrap()
        } else {
            Policy::fixed_window(limit, window).unwrap()
        };
        let limiter = limiter(policy);
        let mut per_window = std::collections::BTreeMap::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            let allowed = limiter.request_batch("k", now, units(n)).allowed;
            *per_window.entry(now / window).or_insert(0) += allowed;
        }
        prop_assert!(per_window.values().all(|&count| count <= limit), "{:?}", per_window);
    }

    /// Sliding log: never more than `limit` allowed in any span of `window_s` seconds.
    #[test]
    fn sliding_log_never_exceeds_the_limit_in_any_window(
        limit in 1u64..=10, window in 1u64..=30, steps in steps(),
    ) {
        let limiter = limiter(Policy::sliding_log(limit, window).unwrap());
        let mut allowed_at = Vec::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            allowed_at.push((now, limiter.request_batch("k", now, units(n)).allowed));
        }
        for &(end, _) in &allowed_at {
            // The span (end - window, end]: `window` seconds ending at `end`.
            let in_span: u64 = allowed_at
                .iter()
                .filter(|(t, _)| *t <= end && t + window > end)
                .map(|(_, count)| count)
                .sum();
            prop_assert!(in_span <= limit, "{} allowed in the {} s ending at {}", in_span, window, end);
        }
    }

    /// Token bucket: between any two times, never more than
    /// `burst + limit / window_s * elapsed` allowed.
    #[test]
    fn token_bucket_never_exceeds_burst_plus_refill(
        limit in 1u64..=10, window in 1u64..=30, burst in 1u64..=10, steps in steps(),
    ) {
        let limiter = limiter(Policy::token_bucket(limit, window, burst).unwrap());
        let mut allowed_at = Vec::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            allowed_at.push((now, limiter.request_batch("k", now, units(n)).allowed));
        }
        for (i, &(first, _)) in allowed_at.iter().enumerate() {
            let mut total = 0;
            for &(last, count) in &allowed_at[i..] {
                total += count;
                // total <= burst + limit * (last - first) / window, in integers.
                prop_assert!(total * window <= burst * window + limit * (last - first));
            }
        }
    }
}
