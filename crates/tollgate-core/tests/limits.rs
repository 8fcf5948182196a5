//! Several limits on one request (a plan and a route budget), all or nothing;
//! and reloading a configuration. Values worked out by hand.

use tollgate_core::{Decision, Limit, Limiter, LimiterConfig, Policy, Resolution};

/// The decisions of `Limiter::acquire`, without the policies.
fn acquire(limiter: &Limiter, limits: &[Limit<'_>], now: u64) -> Vec<Decision> {
    limiter
        .acquire(limits, now)
        .into_iter()
        .map(|limit| limit.decision)
        .collect()
}

fn limiter() -> Limiter {
    // Default plan: fixed window, 5 per 60 s; sk_internal exempt.
    Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap()
}

#[test]
fn a_request_refused_by_one_limit_uses_nothing_of_the_other() {
    let limiter = limiter();
    // The route allows 2 at once (token bucket, 1 per 60 s).
    let route = limiter
        .prepare(Policy::token_bucket(1, 60, 2).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_a"),
        Limit::Policy {
            key: "orders/ip:192.0.2.7",
            policy: &route,
        },
    ];
    for remaining in [4, 3] {
        let decisions = acquire(&limiter, &limits, 0);
        assert_eq!(decisions[0].remaining, Some(remaining));
        assert!(decisions.iter().all(|decision| decision.allowed == 1));
    }
    // The route is empty: the third request is refused by it, and the plan
    // keeps its 3 remaining.
    let decisions = acquire(&limiter, &limits, 1);
    assert_eq!(
        (decisions[1].rejected, decisions[1].retry_after_seconds()),
        (1, 59)
    );
    assert_eq!(
        (decisions[0].rejected, decisions[0].remaining),
        (1, Some(3))
    );
    assert_eq!(decisions[0].retry_after_seconds(), 0);
    assert_eq!(limiter.inspect("sk_a", 1).unwrap().remaining, Some(3));
    // The plan alone still has its 3.
    for remaining in [2, 1, 0] {
        assert_eq!(limiter.request("sk_a", 2).remaining, Some(remaining));
    }
    // Now the plan refuses, and a full route budget keeps all of its 10 tokens.
    let search = limiter
        .prepare(Policy::token_bucket(1, 60, 10).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_a"),
        Limit::Policy {
            key: "search",
            policy: &search,
        },
    ];
    let decisions = acquire(&limiter, &limits, 3);
    assert_eq!(
        (decisions[0].rejected, decisions[0].retry_after_seconds()),
        (1, 57)
    );
    assert_eq!(
        (decisions[1].rejected, decisions[1].remaining),
        (1, Some(10))
    );
    let alone = acquire(
        &limiter,
        &[Limit::Policy {
            key: "search",
            policy: &search,
        }],
        3,
    );
    assert_eq!(alone[0].remaining, Some(9));
}

#[test]
fn policy_keys_and_plan_keys_with_the_same_text_are_different_keys() {
    let limiter = limiter();
    let one = limiter
        .prepare(Policy::fixed_window(1, 60).unwrap())
        .unwrap();
    assert_eq!(
        acquire(
            &limiter,
            &[Limit::Policy {
                key: "sk_a",
                policy: &one
            }],
            0
        )[0]
        .allowed,
        1
    );
    assert_eq!(
        acquire(
            &limiter,
            &[Limit::Policy {
                key: "sk_a",
                policy: &one
            }],
            0
        )[0]
        .rejected,
        1
    );
    assert_eq!(limiter.request("sk_a", 0).remaining, Some(4));
    assert_eq!(limiter.stats(0).tracked_keys, 2);
    // `reset` and `configure` concern plan keys only.
    assert!(limiter.reset("sk_a", 0));
    limiter
        .configure(Policy::fixed_window(9, 60).unwrap())
        .unwrap();
    assert_eq!(
        acquire(
            &limiter,
            &[Limit::Policy {
                key: "sk_a",
                policy: &one
            }],
            0
        )[0]
        .rejected,
        1
    );
}

#[test]
fn an_exempt_plan_never_limits_but_the_route_still_counts() {
    let limiter = limiter();
    let one = limiter
        .prepare(Policy::fixed_window(1, 60).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_internal"),
        Limit::Policy {
            key: "r",
            policy: &one,
        },
    ];
    let first = acquire(&limiter, &limits, 0);
    assert_eq!((first[0].remaining, first[1].remaining), (None, Some(0)));
    let second = acquire(&limiter, &limits, 0);
    assert_eq!(second[1].rejected, 1);
    assert!(limiter.is_exempt("sk_internal"));
}

#[test]
fn concurrent_requests_take_exactly_the_tighter_limit_from_both() {
    let limiter = limiter();
    limiter.assign_tier("sk_big", "enterprise").unwrap(); // 1000 per 60 s
    let route = limiter
        .prepare(Policy::fixed_window(20, 60).unwrap())
        .unwrap();
    let allowed: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let limits = [
                        Limit::Policy {
                            key: "hot-route",
                            policy: &route,
                        },
                        Limit::Plan("sk_big"),
                    ];
                    (0..50)
                        .map(|_| acquire(&limiter, &limits, 0)[1].allowed)
                        .sum::<u64>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap())
            .sum()
    });
    assert_eq!(allowed, 20);
    // The plan paid for exactly the 20 that passed.
    assert_eq!(limiter.inspect("sk_big", 0).unwrap().remaining, Some(980));
}

#[test]
fn reconfigure_keeps_state_under_unchanged_rules_only() {
    let limiter = limiter();
    limiter.assign_tier("pro", "pro").unwrap();
    limiter.assign_tier("ent", "enterprise").unwrap();
    limiter.request("free", 0);
    limiter.request("pro", 0);
    limiter.request("ent", 0);
    let mut config = LimiterConfig::default();
    // pro unchanged; enterprise changed; default unchanged; a new exempt key.
    config
        .tiers
        .insert("enterprise".into(), Policy::fixed_window(10, 60).unwrap());
    config.exempt_keys.push("free".into());
    limiter.reconfigure(&config).unwrap();
    assert_eq!(limiter.request("pro", 1).remaining, Some(18));
    assert_eq!(limiter.request("ent", 1).remaining, Some(9));
    assert_eq!(limiter.request("free", 1).remaining, None);
    // An invalid configuration changes nothing.
    let bad = LimiterConfig {
        policy_lists: Default::default(),
        idle_eviction_s: 0,
        ..LimiterConfig::default()
    };
    let error = limiter.reconfigure(&bad).unwrap_err();
    assert!(
        matches!(error, tollgate_core::ConfigError::IdleEviction(0)),
        "{error:?}"
    );
    assert_eq!(limiter.request("free", 2).remaining, None);
    // A tier removed: its keys fall back to the default policy, afresh.
    config.tiers.remove("pro");
    limiter.reconfigure(&config).unwrap();
    assert_eq!(limiter.request("pro", 3).remaining, Some(4));
    assert_eq!(limiter.tier_of("pro"), "pro");
}

#[test]
fn checking_the_limits_disturbs_none_of_them_even_at_the_key_cap() {
    // One key may hold state at a time; the plan allows 1 per 60 s.
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::fixed_window(1, 60).unwrap(),
        max_tracked_keys: 1,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    let route = limiter
        .prepare(Policy::fixed_window(100, 60).unwrap())
        .unwrap();
    assert_eq!(limiter.request("sk_a", 0).remaining, Some(0));
    // Checking the route key must not push the exhausted plan out and let the
    // request through on a fresh plan.
    let limits = [
        Limit::Plan("sk_a"),
        Limit::Policy {
            key: "route",
            policy: &route,
        },
    ];
    let decisions = acquire(&limiter, &limits, 1);
    assert_eq!(
        (decisions[0].rejected, decisions[0].retry_after_seconds()),
        (1, 59)
    );
    assert_eq!(
        (decisions[1].rejected, decisions[1].remaining),
        (1, Some(100))
    );
    assert_eq!(limiter.inspect("sk_a", 1).unwrap().remaining, Some(0));
}
