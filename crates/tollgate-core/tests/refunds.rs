//! Refunds (`Limiter::give_back_units`, `Store::give_back_units`): units
//! given back to the limits that took them, as Envoy's `is_negative_hits`
//! asks. Values worked out by hand (time in seconds), then a property test
//! holding the limiter to the independent models with refunds
//! (`models/refunds.rs`), themselves held to the models without refunds
//! where no refund happens.

use tollgate_test_support::models;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;
use tollgate_core::{
    Decision, KeyReport, Limit, LimitDecision, LimitUnits, Limiter, LimiterConfig, ManualClock,
    MemoryStore, Policy, PolicyError, PreparedPolicy, Resolution, Stats, Store, StoreError,
    StoreFuture,
};

use models::{
    FixedWindowModel, FixedWindowRefunds, Model, SlidingLogModel, SlidingLogRefunds,
    TokenBucketModel, TokenBucketRefunds, acquire_outcomes,
};

/// (allowed, rejected, remaining, retry_after s, reset_after s).
fn fields(decision: &Decision) -> [u64; 5] {
    [
        decision.allowed,
        decision.rejected,
        decision.remaining.unwrap_or(u64::MAX),
        decision.retry_after.as_secs(),
        decision.reset_after.as_secs(),
    ]
}

fn all_fields(decisions: &[LimitDecision]) -> Vec<[u64; 5]> {
    decisions
        .iter()
        .map(|limit| fields(&limit.decision))
        .collect()
}

/// Default plan: fixed window, 5 per 60 s; `sk_internal` exempt; keys idle
/// after an hour.
fn limiter() -> Limiter {
    Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap()
}

fn units<'a>(limit: Limit<'a>, units: u64) -> LimitUnits<'a> {
    LimitUnits { limit, units }
}

fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the in-memory store answers at once"),
    }
}

#[test]
fn each_algorithm_gets_its_units_back_and_no_more() {
    let limiter = limiter();
    let counting = limiter
        .prepare(Policy::fixed_window_counting_refused(10, 60).unwrap())
        .unwrap();
    let log = limiter
        .prepare(Policy::sliding_log(4, 10).unwrap())
        .unwrap();
    let bucket = limiter
        .prepare(Policy::token_bucket(60, 60, 5).unwrap())
        .unwrap();
    let fixed = Limit::Policy {
        key: "fixed",
        policy: &counting,
    };
    let log = Limit::Policy {
        key: "log",
        policy: &log,
    };
    let bucket = Limit::Policy {
        key: "bucket",
        policy: &bucket,
    };
    // At 70: 12 hits on 10 (all counted), 3 on the log, 5 tokens.
    assert_eq!(
        all_fields(
            &limiter.acquire_units(&[units(fixed, 12), units(log, 3), units(bucket, 5)], 70)
        ),
        [[10, 2, 0, 50, 50], [3, 0, 1, 0, 10], [5, 0, 0, 0, 5]]
    );
    // At 72, 4 of each back: the window's count 12 -> 8 (2 left, 48 s to
    // its end); the log's 3 units, all (4 left, none to reset); the bucket
    // had 2 tokens again and takes 3 more (full, nothing to reset).
    let back = limiter.give_back_units(&[units(fixed, 4), units(log, 4), units(bucket, 4)], 72);
    assert_eq!(
        all_fields(&back),
        [[0, 0, 2, 0, 48], [0, 0, 4, 0, 0], [0, 0, 5, 0, 0]]
    );
    assert_eq!(back[0].policy, Some(counting.policy()));
    // What a request then finds: exactly that. 3 hits count 11 (2 allowed);
    // 5 units do not fit the log's 4 nor 6 the bucket's 5, so neither takes
    // anything, and each says when a batch that size would next get a unit
    // (the log's unit of 72 leaves in 10 s; the bucket's sixth token takes
    // 1 s).
    assert_eq!(
        all_fields(&limiter.acquire_units(&[units(fixed, 3), units(log, 5), units(bucket, 6)], 72)),
        [[2, 1, 0, 48, 48], [0, 5, 4, 10, 0], [0, 6, 5, 1, 0]]
    );
}

#[test]
fn a_refund_is_not_a_request() {
    let limiter = limiter();
    // A key with no state stays without it, and is answered as a fresh one.
    let back = limiter.give_back_units(&[units(Limit::Plan("sk_new"), 3)], 100);
    assert_eq!(all_fields(&back), [[0, 0, 5, 0, 0]]);
    assert_eq!(limiter.inspect("sk_new", 100), None);
    assert_eq!(limiter.stats(100).tracked_keys, 0);
    // Nothing is counted as allowed or rejected.
    limiter.request("sk_a", 120);
    limiter.request("sk_a", 120);
    let back = limiter.give_back_units(&[units(Limit::Plan("sk_a"), 1)], 130);
    assert_eq!(all_fields(&back), [[0, 0, 4, 0, 50]]);
    assert_eq!(
        limiter.stats(130),
        Stats {
            tracked_keys: 1,
            allowed: 2,
            rejected: 0
        }
    );
    // Nor does it mark the key used: an hour after its last request the key
    // is idle, refund or not.
    limiter.give_back_units(&[units(Limit::Plan("sk_a"), 0)], 3000);
    assert_eq!(limiter.inspect("sk_a", 3720), None);
    // An exempt key's plan holds nothing: an exempt decision of 0 units.
    let exempt = limiter.give_back_units(&[units(Limit::Plan("sk_internal"), 2)], 130);
    assert_eq!(exempt[0].decision, Decision::exempt(0));
    assert_eq!(exempt[0].policy, None);
}

#[test]
fn a_key_given_everything_back_holds_no_state() {
    // The default plan, 5 per 60 s: one request at 100, then 5 units back.
    let limiter = limiter();
    assert_eq!(limiter.request("sk_a", 100).remaining, Some(4));
    let back = limiter.give_back_units(&[units(Limit::Plan("sk_a"), 5)], 100);
    // Whole again, nothing to wait for, and no state held (as on Redis,
    // which deletes the key).
    assert_eq!(all_fields(&back), [[0, 0, 5, 0, 0]]);
    assert_eq!(limiter.inspect("sk_a", 100), None);
    assert_eq!(limiter.stats(100).tracked_keys, 0);
    assert!(!limiter.reset("sk_a", 100));
}

#[test]
fn a_plan_gets_units_back_under_its_tier_only() {
    let limiter = limiter();
    limiter.assign_tier("sk_pro", "pro").unwrap();
    // pro: a sliding log of 20 per 60 s (the built-in tiers).
    let taken = limiter.acquire_units(&[units(Limit::Plan("sk_pro"), 20)], 60);
    assert_eq!(taken[0].tier.as_deref(), Some("pro"));
    let back = limiter.give_back_units(&[units(Limit::Plan("sk_pro"), 5)], 60);
    assert_eq!(back[0].decision.remaining, Some(5));
    assert_eq!(back[0].tier.as_deref(), Some("pro"));
    // Moved to the default tier, the key starts afresh: nothing to give back
    // to, and nothing carried over.
    limiter.assign_tier("sk_pro", "default").unwrap();
    let back = limiter.give_back_units(&[units(Limit::Plan("sk_pro"), 5)], 60);
    assert_eq!(all_fields(&back), [[0, 0, 5, 0, 0]]);
    assert_eq!(limiter.inspect("sk_pro", 60), None);
}

#[test]
fn the_memory_store_gives_back_on_its_clock() {
    let clock = Arc::new(ManualClock::new(70_000_000_000));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
    let policy = store
        .prepare(Policy::fixed_window_counting_refused(3, 60).unwrap())
        .unwrap();
    let limit = Limit::Policy {
        key: "descriptor",
        policy: &policy,
    };
    let taken = block_on(store.acquire_units(&[units(limit, 5)])).unwrap();
    assert_eq!(all_fields(&taken), [[3, 2, 0, 50, 50]]);
    clock.advance(std::time::Duration::from_secs(10));
    // 5 counted, 4 back: 1, 2 left, the window ends in 40 s.
    let back = block_on(store.give_back_units(&[units(limit, 4)])).unwrap();
    assert_eq!(all_fields(&back), [[0, 0, 2, 0, 40]]);
}

/// A store written before refunds: every method but `give_back_units`.
struct OlderStore(MemoryStore);

impl Store for OlderStore {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        self.0.prepare(policy)
    }
    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.0.acquire(limits)
    }
    fn is_exempt(&self, key: &str) -> bool {
        self.0.is_exempt(key)
    }
    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        self.0.default_policy()
    }
    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        self.0.configure(policy)
    }
    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        self.0.assign_tier(key, tier)
    }
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        self.0.reset(key)
    }
    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        self.0.inspect(key)
    }
    fn stats(&self) -> StoreFuture<'_, Stats> {
        self.0.stats()
    }
    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        self.0.reconfigure(config)
    }
}

#[test]
fn a_store_without_refunds_says_it_cannot_give_back() {
    let clock = Arc::new(ManualClock::new(0));
    let store = OlderStore(MemoryStore::new(&LimiterConfig::default(), clock).unwrap());
    let refused = block_on(store.give_back_units(&[units(Limit::Plan("sk_a"), 1)]));
    match refused {
        Err(StoreError::Unavailable(message)) => {
            assert_eq!(message, "this store cannot give units back");
        }
        other => panic!("{other:?}"),
    }
}

// The property: the limiter against the models with refunds.

/// A limit or burst: small mostly, sometimes large.
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 1u64..=8, 1 => 9u64..=1_000, 1 => (1u64 << 40)..(1u64 << 41)]
}

/// A window in seconds: short mostly, sometimes long.
fn window_s() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 1u64..=20, 1 => 21u64..=100_000]
}

/// Any policy, each algorithm as likely (a counting window's limit may be 0).
fn policies() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (count(), window_s())
            .prop_map(|(limit, window)| Policy::fixed_window(limit, window).unwrap()),
        (prop_oneof![1 => Just(0u64), 6 => count()], window_s()).prop_map(|(limit, window)| {
            Policy::fixed_window_counting_refused(limit, window).unwrap()
        }),
        (count(), window_s())
            .prop_map(|(limit, window)| Policy::sliding_log(limit, window).unwrap()),
        (count(), window_s(), count())
            .prop_map(|(limit, window, burst)| Policy::token_bucket(limit, window, burst).unwrap()),
    ]
}

/// The model with refunds of `policy`.
fn refunding_model(policy: &Policy) -> Box<dyn Model> {
    let (limit, window) = (policy.limit(), policy.window_s());
    match policy.algorithm() {
        tollgate_core::Algorithm::FixedWindow => Box::new(FixedWindowRefunds::new(
            limit,
            window,
            policy.counts_refused(),
        )),
        tollgate_core::Algorithm::SlidingLog => Box::new(SlidingLogRefunds::new(limit, window)),
        tollgate_core::Algorithm::TokenBucket => {
            Box::new(TokenBucketRefunds::new(limit, window, policy.capacity()))
        }
    }
}

/// The model without refunds of `policy`.
fn plain_model(policy: &Policy) -> Box<dyn Model> {
    let (limit, window) = (policy.limit(), policy.window_s());
    match policy.algorithm() {
        tollgate_core::Algorithm::FixedWindow if policy.counts_refused() => {
            Box::new(FixedWindowModel::counting_refused(limit, window))
        }
        tollgate_core::Algorithm::FixedWindow => Box::new(FixedWindowModel::new(limit, window)),
        tollgate_core::Algorithm::SlidingLog => Box::new(SlidingLogModel::new(limit, window)),
        tollgate_core::Algorithm::TokenBucket => {
            Box::new(TokenBucketModel::new(limit, window, policy.capacity()))
        }
    }
}

/// Units of one limit: a few mostly, 0 often, sometimes very many.
fn some_units() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 0u64..=10, 2 => Just(0u64), 1 => Just(u64::MAX)]
}

/// How far time moves before a step: often not at all, back sometimes.
fn moves() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        4 => 0i64..=12,
        1 => 13i64..=300_000,
        2 => -15i64..0,
    ]
}

#[derive(Clone, Debug)]
enum Step {
    /// Both limits charged, each its units (all or nothing, but for
    /// counting windows).
    Charge(u64, u64),
    /// Both limits given back their units.
    Refund(u64, u64),
}

fn steps(refunds: bool) -> impl Strategy<Value = Vec<(i64, Step)>> {
    let refund_weight = if refunds { 2 } else { 0 };
    let step = prop_oneof![
        3 => (some_units(), some_units()).prop_map(|(a, b)| Step::Charge(a, b)),
        refund_weight => (some_units(), some_units()).prop_map(|(a, b)| Step::Refund(a, b)),
    ];
    prop::collection::vec((moves(), step), 1..40)
}

/// The models' (allowed, rejected, remaining, retry_after, reset_after) of
/// a charge (the acquire rule) or of the look after a refund.
fn modelled(models: &mut [Box<dyn Model>], step: &Step, now: u64) -> Vec<[u64; 5]> {
    match *step {
        Step::Charge(a, b) => acquire_outcomes(models, &[a, b], now)
            .into_iter()
            .map(|o| {
                [
                    o.allowed,
                    o.rejected,
                    o.remaining,
                    o.retry_after,
                    o.reset_after,
                ]
            })
            .collect(),
        Step::Refund(a, b) => models
            .iter_mut()
            .zip([a, b])
            .map(|(model, units)| {
                model.refund(now, units);
                [
                    0,
                    0,
                    model.available(now),
                    model.look_retry_after(now),
                    model.reset_after(now),
                ]
            })
            .collect(),
    }
}

/// A limiter that never forgets a key within the steps' times.
fn long_memory() -> Limiter {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        idle_eviction_s: 1 << 62,
        ..LimiterConfig::default()
    };
    Limiter::new(&config, Resolution::Seconds).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_limiter_refunds_as_the_models_do(
        first in policies(),
        second in policies(),
        start in prop_oneof![0u64..1_000, 1_000_000_000u64..2_000_000_000],
        steps in steps(true),
    ) {
        let limiter = long_memory();
        let prepared = [limiter.prepare(first).unwrap(), limiter.prepare(second).unwrap()];
        let limits = [
            Limit::Policy { key: "first", policy: &prepared[0] },
            Limit::Policy { key: "second", policy: &prepared[1] },
        ];
        let mut models = vec![refunding_model(&first), refunding_model(&second)];
        let mut now = start;
        for (index, (moved, step)) in steps.iter().enumerate() {
            now = now.saturating_add_signed(*moved);
            let expected = modelled(&mut models, step, now);
            let got = match *step {
                Step::Charge(a, b) => {
                    limiter.acquire_units(&[units(limits[0], a), units(limits[1], b)], now)
                }
                Step::Refund(a, b) => {
                    limiter.give_back_units(&[units(limits[0], a), units(limits[1], b)], now)
                }
            };
            prop_assert_eq!(
                all_fields(&got), expected,
                "step {} at {}: {:?}; models {:?} / {:?}",
                index, now, step, models[0].state(), models[1].state()
            );
        }
    }

    #[test]
    fn the_models_with_refunds_charge_as_the_models_without(
        first in policies(),
        second in policies(),
        start in 0u64..1_000,
        steps in steps(false),
    ) {
        let mut with = vec![refunding_model(&first), refunding_model(&second)];
        let mut without = vec![plain_model(&first), plain_model(&second)];
        let mut now = start;
        for (moved, step) in &steps {
            now = now.saturating_add_signed(*moved);
            prop_assert_eq!(modelled(&mut with, step, now), modelled(&mut without, step, now));
        }
    }
}
