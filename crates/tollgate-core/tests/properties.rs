//! Property tests: the engine against the naive models of `models/`, on
//! every resolution, with counts and windows from 1 to their maxima, times
//! from 0 to 2^64-1 going forward, backward and across long gaps, and idle
//! eviction; and the limits themselves as properties.

mod generators;
use tollgate_test_support::models;

use std::num::NonZeroU64;

use generators::{Clock, MAX, Spec, clocks, edgy, limit_units, specs, step, units};
use models::{Outcome, acquire_outcomes};
use proptest::prelude::*;
use tollgate_core::{
    ConfigError, Decision, Limit, LimitUnits, Limiter, LimiterConfig, Policy, PolicyError,
};

/// A limiter on `clock` whose default policy is `spec`'s, with no tiers and
/// no exempt keys; the error when the window is too long for the clock.
fn limiter(clock: Clock, spec: &Spec, idle_eviction_s: u64) -> Result<Limiter, ConfigError> {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: spec.policy(),
        tiers: Default::default(),
        exempt_keys: vec![],
        idle_eviction_s,
        ..LimiterConfig::default()
    };
    Limiter::new(&config, clock.resolution)
}

/// The error a window too long for `clock` gets, written out.
fn too_long(clock: Clock, spec: &Spec) -> PolicyError {
    PolicyError::WindowTooLong {
        window_s: spec.window_s,
        max_window_s: u64::MAX / clock.ticks_per_second,
    }
}

/// What the engine said, in ticks.
fn outcome(clock: Clock, decision: &Decision) -> Outcome {
    Outcome {
        allowed: decision.allowed,
        rejected: decision.rejected,
        remaining: decision.remaining.unwrap(),
        retry_after: clock.ticks_of(decision.retry_after),
        reset_after: clock.ticks_of(decision.reset_after),
    }
}

fn nonzero(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

/// Idle eviction, in seconds: any, or long enough that the times a test
/// uses never reach it.
fn idle_eviction_s() -> BoxedStrategy<u64> {
    prop_oneof![edgy(1, MAX), Just(MAX)].boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Batches of one key (single requests included) give exactly what the
    /// model gives, a key idle for `idle_eviction_s` (or its policy's
    /// counted span, when longer) starting afresh.
    #[test]
    fn batches_match_the_model(
        (clock, spec) in clocks().prop_flat_map(|clock| (Just(clock), specs(clock))),
        idle_s in idle_eviction_s(),
        start in edgy(0, u64::MAX),
        steps in prop::collection::vec((step(), units()), 1..40),
    ) {
        let Some(fresh) = spec.model(clock) else {
            let error = limiter(clock, &spec, idle_s).err().unwrap();
            prop_assert!(
                matches!(&error, ConfigError::Policy { name, reason }
                    if name == "default_policy" && *reason == too_long(clock, &spec)),
                "{error:?}"
            );
            return Ok(());
        };
        let limiter = limiter(clock, &spec, idle_s).unwrap();
        // A key is kept at least as long as its policy counts.
        let idle_s = idle_s.max(spec.policy().counted_span_s());
        let idle = clock.ticks(idle_s).unwrap_or(u64::MAX);
        let window = spec.window_ticks(clock);
        let mut model = fresh.boxed_clone();
        let mut last_use: Option<u64> = None;
        let mut now = start;
        for (step, units) in steps {
            now = step.apply(now, window, 0, u64::MAX);
            if last_use.is_some_and(|last| now.saturating_sub(last) >= idle) {
                model = fresh.boxed_clone();
            }
            last_use = Some(last_use.map_or(now, |last| last.max(now)));
            let decision = if units == 1 {
                limiter.request("k", now)
            } else {
                limiter.request_batch("k", now, nonzero(units))
            };
            prop_assert_eq!(
                outcome(clock, &decision),
                model.outcome(now, units),
                "{} units at {}", units, now
            );
        }
    }

    /// A request held to a plan and two policy limits, each with its own
    /// units (0 included), gives exactly what the rule written over the
    /// models gives; `acquire` is that rule with one unit per limit.
    #[test]
    fn acquire_matches_the_model(
        (clock, specs) in clocks()
            .prop_flat_map(|clock| (Just(clock), prop::collection::vec(specs(clock), 3))),
        start in edgy(0, u64::MAX),
        steps in prop::collection::vec(
            (step(), 0usize..3, prop::collection::vec(limit_units(), 3), 1usize..=3, any::<bool>()),
            1..40,
        ),
    ) {
        let Some(fresh) = specs.iter().map(|spec| spec.model(clock)).collect::<Option<Vec<_>>>()
        else {
            for spec in &specs {
                if spec.model(clock).is_none() {
                    let error = Limiter::new(&LimiterConfig::default(), clock.resolution)
                        .unwrap()
                        .prepare(spec.policy())
                        .unwrap_err();
                    prop_assert_eq!(error, too_long(clock, spec));
                }
            }
            return Ok(());
        };
        let limiter = limiter(clock, &specs[0], MAX).unwrap();
        let route = limiter.prepare(specs[1].policy()).unwrap();
        let other = limiter.prepare(specs[2].policy()).unwrap();
        let limits = [
            Limit::Plan("k"),
            Limit::Policy { key: "route", policy: &route },
            Limit::Policy { key: "other", policy: &other },
        ];
        let mut models = fresh;
        // Every time within one idle eviction span of the others: no key is
        // evicted (keys sharing a shard share its latest time).
        let idle = clock.ticks(MAX).unwrap_or(u64::MAX);
        let lo = start.saturating_sub(idle / 2);
        let hi = lo.saturating_add(idle - 1);
        let mut now = start.clamp(lo, hi);
        for (step, which, units, count, one_each) in steps {
            now = step.apply(now, specs[which].window_ticks(clock), lo, hi);
            let (got, expected): (Vec<Decision>, _) = if one_each {
                let got = limiter.acquire(&limits[..count], now);
                let expected = acquire_outcomes(&mut models[..count], &vec![1; count], now);
                (got.into_iter().map(|limit| limit.decision).collect(), expected)
            } else {
                let request: Vec<LimitUnits<'_>> = limits[..count]
                    .iter()
                    .zip(&units)
                    .map(|(limit, units)| LimitUnits { limit: *limit, units: *units })
                    .collect();
                let got = limiter.acquire_units(&request, now);
                let expected = acquire_outcomes(&mut models[..count], &units[..count], now);
                (got.into_iter().map(|limit| limit.decision).collect(), expected)
            };
            let got: Vec<Outcome> = got.iter().map(|decision| outcome(clock, decision)).collect();
            prop_assert_eq!(
                got, expected,
                "{:?} of {:?} at {}", if one_each { &[1, 1, 1][..count] } else { &units[..count] },
                &specs[..count], now
            );
        }
    }

    /// A request at a time older than the key's latest never gets more than
    /// the key has at its latest time, and moves nothing backwards: at the
    /// latest time the key then has exactly what the request took less.
    #[test]
    fn an_older_now_never_grants_budget(
        (clock, spec) in clocks().prop_flat_map(|clock| (Just(clock), specs(clock))),
        start in edgy(0, u64::MAX),
        steps in prop::collection::vec((step(), units()), 1..40),
    ) {
        if spec.model(clock).is_none() {
            return Ok(());
        }
        let limiter = limiter(clock, &spec, MAX).unwrap();
        let window = spec.window_ticks(clock);
        let look = |at: u64| {
            let look = [LimitUnits { limit: Limit::Plan("k"), units: 0 }];
            limiter.acquire_units(&look, at)[0].decision.remaining.unwrap()
        };
        let mut now = start;
        let mut latest: Option<u64> = None;
        for (step, units) in steps {
            now = step.apply(now, window, 0, u64::MAX);
            match latest {
                Some(latest) if now < latest => {
                    let before = look(latest);
                    let allowed = limiter.request_batch("k", now, nonzero(units)).allowed;
                    prop_assert!(allowed <= before, "{} allowed at {} with {} left at {}", allowed, now, before, latest);
                    prop_assert_eq!(look(latest), before - allowed, "at {} after {} at {}", latest, units, now);
                }
                _ => {
                    limiter.request_batch("k", now, nonzero(units));
                    latest = Some(now);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

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
        let limiter = plain_limiter(policy);
        let mut per_window = std::collections::BTreeMap::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            let allowed = limiter.request_batch("k", now, nonzero(n)).allowed;
            *per_window.entry(now / window).or_insert(0) += allowed;
        }
        prop_assert!(per_window.values().all(|&count| count <= limit), "{:?}", per_window);
    }

    /// Sliding log: never more than `limit` allowed in any span of `window_s` seconds.
    #[test]
    fn sliding_log_never_exceeds_the_limit_in_any_window(
        limit in 1u64..=10, window in 1u64..=30, steps in steps(),
    ) {
        let limiter = plain_limiter(Policy::sliding_log(limit, window).unwrap());
        let mut allowed_at = Vec::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            allowed_at.push((now, limiter.request_batch("k", now, nonzero(n)).allowed));
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
        let limiter = plain_limiter(Policy::token_bucket(limit, window, burst).unwrap());
        let mut allowed_at = Vec::new();
        let mut now = 0;
        for (elapsed, n) in steps {
            now += elapsed;
            allowed_at.push((now, limiter.request_batch("k", now, nonzero(n)).allowed));
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

/// A limiter of `policy` counting seconds, with no tiers and no exempt keys.
fn plain_limiter(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        tiers: Default::default(),
        exempt_keys: vec![],
        ..LimiterConfig::default()
    };
    Limiter::new(&config, tollgate_core::Resolution::Seconds).unwrap()
}

/// Steps of (seconds since the previous step, batch size), forward only.
fn steps() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..=12, 1u64..=12), 1..60)
}
