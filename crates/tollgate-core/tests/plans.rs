//! Plans of several policies ("2 per second and 5 per minute"): all or
//! nothing, each policy's own state, reloads keeping unchanged policies, the
//! TOML and JSON forms. Every value worked out by hand.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{
    Decision, Limit, LimitDecision, Limiter, LimiterConfig, ManualClock, MemoryStore, NamedPolicy,
    PlanPolicies, Policy, Resolution, Store,
};

fn named(name: &str, policy: Policy) -> NamedPolicy {
    NamedPolicy {
        name: name.to_owned(),
        policy,
    }
}

/// 2 per second and 5 per minute, both fixed windows.
fn second_and_minute() -> PlanPolicies {
    PlanPolicies::List(vec![
        named("second", Policy::fixed_window(2, 1).unwrap()),
        named("minute", Policy::fixed_window(5, 60).unwrap()),
    ])
}

fn config_with_default(plan: &PlanPolicies) -> LimiterConfig {
    let mut config = LimiterConfig::default();
    config.set_plan("default", plan);
    config.validate().unwrap();
    config
}

/// (allowed, remaining, retry_after in s) of the plan's two policies.
fn seen(decision: &LimitDecision) -> [(u64, Option<u64>, u64); 2] {
    assert_eq!(decision.further.len(), 1);
    let state = |decision: &Decision| {
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

#[test]
fn every_policy_must_allow_and_a_refusal_uses_nothing() {
    let limiter = Limiter::new(
        &config_with_default(&second_and_minute()),
        Resolution::Seconds,
    )
    .unwrap();
    let plan = [Limit::Plan("sk_a")];
    let request = |now| limiter.acquire(&plan, now).remove(0);
    // The minute window [60, 120), the second windows [60, 61), [61, 62)...
    // (allowed, remaining, retry) of "second", then of "minute".
    let expected = [
        (60, [(1, Some(1), 0), (1, Some(4), 0)]),
        (60, [(1, Some(0), 0), (1, Some(3), 0)]),
        // Refused by "second" (its window ends at 61); "minute" keeps 3.
        (60, [(0, Some(0), 1), (0, Some(3), 0)]),
        (61, [(1, Some(1), 0), (1, Some(2), 0)]),
        (61, [(1, Some(0), 0), (1, Some(1), 0)]),
        (61, [(0, Some(0), 1), (0, Some(1), 0)]),
        (62, [(1, Some(1), 0), (1, Some(0), 0)]),
        // Refused by "minute" (58 s to 120); "second" keeps its 1.
        (62, [(0, Some(1), 0), (0, Some(0), 58)]),
        (63, [(0, Some(2), 0), (0, Some(0), 57)]),
        // A new minute: both have room again.
        (120, [(1, Some(1), 0), (1, Some(4), 0)]),
    ];
    for (step, (now, want)) in expected.into_iter().enumerate() {
        let decision = request(now);
        assert_eq!(seen(&decision), want, "request {step} at {now}");
        assert_eq!(decision.is_allowed(), want[0].0 == 1, "request {step}");
        assert_eq!(decision.name.as_deref(), Some("second"));
        assert_eq!(&*decision.further[0].name, "minute");
        assert_eq!(decision.policy, Some(Policy::fixed_window(2, 1).unwrap()));
        assert_eq!(
            decision.further[0].policy,
            Policy::fixed_window(5, 60).unwrap()
        );
    }
    // Retry-After of the plan: the longest wait of its policies.
    assert_eq!(request(120).retry_after_seconds(), 0);
    assert_eq!(request(120).retry_after_seconds(), 1);
    // One policy counts per request: 3 requests of 10 allowed above, plus
    // the 2 at 120.
    let stats = limiter.stats(120);
    assert_eq!(stats.tracked_keys, 2, "one state per policy");
}

#[test]
fn the_fast_path_and_a_batch_hold_every_policy() {
    let limiter = Limiter::new(
        &config_with_default(&second_and_minute()),
        Resolution::Seconds,
    )
    .unwrap();
    // acquire_one, the single-limit path, decides the whole plan.
    let first = limiter.acquire_one(&Limit::Plan("sk_a"), 60);
    assert_eq!(seen(&first), [(1, Some(1), 0), (1, Some(4), 0)]);
    // A batch of 7 at 61: "second" fits 2, "minute" 4: 2 allowed, 5 refused;
    // after it "second" has 0 (whole again in 1 s) and "minute" 2: the
    // batch reports the least remaining, and the wait for one more unit.
    let batch = limiter.request_batch("sk_a", 61, NonZeroU64::new(7).unwrap());
    assert_eq!((batch.allowed, batch.rejected), (2, 5));
    assert_eq!(batch.remaining, Some(0));
    assert_eq!(batch.retry_after, Duration::from_secs(1));
    assert_eq!(batch.reset_after, Duration::from_secs(1));
    // "minute" was charged 2 (and nothing for the refused 5): 1 + 2 used.
    let plan = limiter.acquire(&[Limit::Plan("sk_a")], 62).remove(0);
    assert_eq!(seen(&plan), [(1, Some(1), 0), (1, Some(1), 0)]);
    // A batch of 3 at 63: "minute" fits 1, so 1 allowed; then it has 0 and
    // 57 s to wait.
    let batch = limiter.request_batch("sk_a", 63, NonZeroU64::new(3).unwrap());
    assert_eq!((batch.allowed, batch.rejected), (1, 2));
    assert_eq!(batch.remaining, Some(0));
    assert_eq!(batch.retry_after, Duration::from_secs(57));
}

#[test]
fn a_plan_with_a_route_budget_is_all_or_nothing_across_both() {
    let limiter = Limiter::new(
        &config_with_default(&second_and_minute()),
        Resolution::Seconds,
    )
    .unwrap();
    let route = limiter
        .prepare(Policy::fixed_window(1, 60).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_a"),
        Limit::Policy {
            key: "orders/ip:192.0.2.7",
            policy: &route,
        },
    ];
    let decisions = limiter.acquire(&limits, 60);
    assert!(decisions.iter().all(LimitDecision::is_allowed));
    assert_eq!(seen(&decisions[0]), [(1, Some(1), 0), (1, Some(4), 0)]);
    // The route is used up: the plan's two policies keep what they had.
    let decisions = limiter.acquire(&limits, 60);
    assert_eq!(seen(&decisions[0]), [(0, Some(1), 0), (0, Some(4), 0)]);
    assert_eq!(decisions[1].decision.retry_after, Duration::from_secs(60));
    assert!(decisions[1].further.is_empty());
}

#[test]
fn tiers_inspect_reset_and_assignment_cover_every_policy() {
    let mut config = LimiterConfig::default();
    config.set_plan("team", &second_and_minute());
    config.validate().unwrap();
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    limiter.assign_tier("sk_t", "team").unwrap();
    let decision = limiter.acquire(&[Limit::Plan("sk_t")], 60).remove(0);
    assert_eq!(decision.tier.as_deref(), Some("team"));
    assert_eq!(seen(&decision), [(1, Some(1), 0), (1, Some(4), 0)]);
    let (first_name, further) = limiter.inspect_further("sk_t", 60);
    assert_eq!(first_name.as_deref(), Some("second"));
    assert_eq!(further.len(), 1);
    assert_eq!(further[0].name, "minute");
    assert_eq!(further[0].state.unwrap().remaining, Some(4));
    assert_eq!(limiter.inspect("sk_t", 60).unwrap().remaining, Some(1));
    // A default-plan key has one policy: nothing further.
    assert_eq!(limiter.inspect_further("sk_d", 60), (None, Vec::new()));
    // Reset drops both states.
    assert!(limiter.reset("sk_t", 60));
    assert_eq!(limiter.inspect_further("sk_t", 60).1[0].state, None);
    assert_eq!(limiter.stats(60).tracked_keys, 0);
    // Moving to another tier drops both too.
    limiter.acquire(&[Limit::Plan("sk_t")], 60);
    assert_eq!(limiter.stats(60).tracked_keys, 2);
    limiter.assign_tier("sk_t", "default").unwrap();
    assert_eq!(limiter.stats(60).tracked_keys, 0);
}

#[test]
fn a_reload_keeps_the_policies_whose_name_and_rule_stay() {
    let config = config_with_default(&second_and_minute());
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    for _ in 0..2 {
        limiter.acquire(&[Limit::Plan("sk_a")], 60);
    }
    let remaining = |now| {
        let (_, further) = limiter.inspect_further("sk_a", now);
        (
            limiter.inspect("sk_a", now).map(|state| state.remaining),
            further
                .iter()
                .map(|report| report.state.map(|state| state.remaining))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(remaining(60), (Some(Some(0)), vec![Some(Some(3))]));
    // An hour policy added: the two others keep their state.
    let mut list = vec![
        named("second", Policy::fixed_window(2, 1).unwrap()),
        named("minute", Policy::fixed_window(5, 60).unwrap()),
        named("hour", Policy::fixed_window(100, 3600).unwrap()),
    ];
    limiter
        .reconfigure(&config_with_default(&PlanPolicies::List(list.clone())))
        .unwrap();
    assert_eq!(remaining(60), (Some(Some(0)), vec![Some(Some(3)), None]));
    // "minute" changed (6 per minute): it starts afresh, "second" does not.
    list[1].policy = Policy::fixed_window(6, 60).unwrap();
    limiter
        .reconfigure(&config_with_default(&PlanPolicies::List(list.clone())))
        .unwrap();
    assert_eq!(remaining(60), (Some(Some(0)), vec![None, None]));
    // Back to the one-policy form with the same first policy: it keeps its
    // state, as a list of one would.
    limiter
        .reconfigure(&config_with_default(&PlanPolicies::One(
            Policy::fixed_window(2, 1).unwrap(),
        )))
        .unwrap();
    assert_eq!(remaining(60), (Some(Some(0)), vec![]));
    assert_eq!(limiter.stats(60).tracked_keys, 1, "the others' state went");
}

#[test]
fn a_list_of_one_decides_as_the_one_policy_form() {
    let one = PlanPolicies::List(vec![named("only", Policy::fixed_window(2, 60).unwrap())]);
    let limiter = Limiter::new(&config_with_default(&one), Resolution::Seconds).unwrap();
    let decisions: Vec<_> = (0..3)
        .map(|_| limiter.acquire_one(&Limit::Plan("sk_a"), 60))
        .collect();
    let remaining: Vec<_> = decisions
        .iter()
        .map(|decision| (decision.decision.allowed, decision.decision.remaining))
        .collect();
    assert_eq!(remaining, [(1, Some(1)), (1, Some(0)), (0, Some(0))]);
    assert!(decisions.iter().all(|decision| decision.further.is_empty()));
    assert_eq!(decisions[0].name.as_deref(), Some("only"));
    assert_eq!(limiter.default_plan(), one);
}

#[test]
fn configure_plan_replaces_the_default_plan_and_its_state() {
    let clock = Arc::new(ManualClock::new(60_000_000_000));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
    let block = |future: tollgate_core::StoreFuture<'_, PlanPolicies>| {
        futures_lite_block_on(future).unwrap()
    };
    assert_eq!(
        block(store.default_plan()),
        PlanPolicies::One(Policy::fixed_window(5, 60).unwrap())
    );
    assert_eq!(
        block(store.configure_plan(second_and_minute())),
        second_and_minute()
    );
    assert_eq!(block(store.default_plan()), second_and_minute());
    let decision = store.acquire_one_now(&Limit::Plan("sk_a")).unwrap();
    assert_eq!(seen(&decision), [(1, Some(1), 0), (1, Some(4), 0)]);
    // The one-policy default reads the first policy.
    assert_eq!(
        futures_lite_block_on(store.default_policy()).unwrap(),
        Policy::fixed_window(2, 1).unwrap()
    );
    // Configured again, even the same: every policy starts afresh.
    block(store.configure_plan(second_and_minute()));
    clock.advance(Duration::from_millis(1));
    let decision = store.acquire_one_now(&Limit::Plan("sk_a")).unwrap();
    assert_eq!(seen(&decision), [(1, Some(1), 0), (1, Some(4), 0)]);
    let report = futures_lite_block_on(store.inspect("sk_a")).unwrap();
    assert_eq!(report.policy_name.as_deref(), Some("second"));
    assert_eq!(report.further[0].state.unwrap().remaining, Some(4));
    // A bad list is refused and changes nothing.
    let twice = PlanPolicies::List(vec![
        named("a", Policy::fixed_window(1, 1).unwrap()),
        named("a", Policy::fixed_window(2, 1).unwrap()),
    ]);
    assert!(futures_lite_block_on(store.configure_plan(twice)).is_err());
    assert_eq!(block(store.default_plan()), second_and_minute());
}

/// Runs a future that is ready at once (the in-memory store's).
fn futures_lite_block_on<T>(
    future: tollgate_core::StoreFuture<'_, T>,
) -> Result<T, tollgate_core::StoreError> {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = future;
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("the in-memory store answers at once"),
    }
}

#[test]
fn the_toml_forms_read_lists_and_name_bad_ones() {
    let config = LimiterConfig::from_toml_str(
        r#"
        [[default_policy]]
        name = "second"
        algorithm = "fixed_window"
        limit = 2
        window_s = 1

        [[default_policy]]
        name = "minute"
        algorithm = "fixed_window"
        limit = 5
        window_s = 60

        [tiers.pro]
        algorithm = "sliding_log"
        limit = 20
        window_s = 60
        "#,
    )
    .unwrap();
    assert_eq!(config.default_plan(), second_and_minute());
    assert_eq!(config.default_policy, Policy::fixed_window(2, 1).unwrap());
    assert_eq!(
        config.plan("pro"),
        Some(PlanPolicies::One(Policy::sliding_log(20, 60).unwrap()))
    );
    assert_eq!(config.plan("gold"), None);
    let bad = [
        (
            "[[tiers.team]]\nname = \"a b\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1\n",
            "(`tiers.team[0]`): invalid policy name \"a b\"",
        ),
        (
            "[[tiers.team]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1\n\
             [[tiers.team]]\nname = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 1\n",
            "policy name \"a\" is given twice in one plan",
        ),
        (
            "[[default_policy]]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1\n",
            "missing field `name`",
        ),
        ("default_policy = []\n", "at least one policy"),
    ];
    for (text, reason) in bad {
        let error = LimiterConfig::from_toml_str(text).unwrap_err().to_string();
        assert!(error.contains(reason), "{text:?} gave {error:?}");
    }
    // The one-policy form is written as it always was.
    let text = toml::to_string(&LimiterConfig::from_toml_str("").unwrap()).unwrap();
    assert!(
        text.contains("[default_policy]\nalgorithm = \"fixed_window\""),
        "{text}"
    );
}
