//! Per-limit units in one call (`Limiter::acquire_units`), with limits that
//! count refused units (envoyproxy/ratelimit's rule) and plain ones. Values
//! worked out by hand; time in seconds.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tollgate_core::{
    Decision, Limit, LimitUnits, Limiter, LimiterConfig, ManualClock, MemoryStore, Policy,
    Resolution, Store,
};

/// (allowed, rejected, remaining, retry_after s, reset_after s) of each limit.
fn acquire(limiter: &Limiter, limits: &[LimitUnits<'_>], now: u64) -> Vec<[u64; 5]> {
    limiter
        .acquire_units(limits, now)
        .into_iter()
        .map(|limit| fields(&limit.decision))
        .collect()
}

fn fields(decision: &Decision) -> [u64; 5] {
    [
        decision.allowed,
        decision.rejected,
        decision.remaining.unwrap_or(u64::MAX),
        decision.retry_after.as_secs(),
        decision.reset_after.as_secs(),
    ]
}

/// Default plan: fixed window, 5 per 60 s; sk_internal exempt.
fn limiter() -> Limiter {
    Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap()
}

fn units<'a>(limit: Limit<'a>, units: u64) -> LimitUnits<'a> {
    LimitUnits { limit, units }
}

#[test]
fn a_counting_window_keeps_its_count_when_only_its_limit_changes() {
    let limiter = limiter();
    let twenty = limiter
        .prepare(Policy::fixed_window_counting_refused(20, 60).unwrap())
        .unwrap();
    let ten = limiter
        .prepare(Policy::fixed_window_counting_refused(10, 60).unwrap())
        .unwrap();
    let thirty_s = limiter
        .prepare(Policy::fixed_window_counting_refused(20, 30).unwrap())
        .unwrap();
    let limit = |policy| Limit::Policy {
        key: "descriptor",
        policy,
    };
    // 8 of 20 at 70 (the window [60, 120)): 12 left.
    assert_eq!(
        acquire(&limiter, &[units(limit(&twenty), 8)], 70),
        [[8, 0, 12, 0, 50]]
    );
    // The limit becomes 10: the 8 still count, so 3 hits allow 2 (count 11).
    assert_eq!(
        acquire(&limiter, &[units(limit(&ten), 3)], 75),
        [[2, 1, 0, 45, 45]]
    );
    // Back to 20: the count is 11, 9 left after nothing more.
    assert_eq!(
        acquire(&limiter, &[units(limit(&twenty), 0)], 80),
        [[0, 0, 9, 0, 40]]
    );
    // Another window length starts afresh: 1 of 20 at 85 (window [60, 90)).
    assert_eq!(
        acquire(&limiter, &[units(limit(&thirty_s), 1)], 85),
        [[1, 0, 19, 0, 5]]
    );
}

#[test]
fn a_counting_window_of_zero_refuses_and_counts_every_hit() {
    let limiter = limiter();
    let zero = limiter
        .prepare(Policy::fixed_window_counting_refused(0, 60).unwrap())
        .unwrap();
    let limit = Limit::Policy {
        key: "descriptor",
        policy: &zero,
    };
    // A look at a fresh window: nothing counted, nothing to wait for.
    assert_eq!(acquire(&limiter, &[units(limit, 0)], 70), [[0, 0, 0, 0, 0]]);
    // 2 hits: both refused, both counted; the window ends in 50 s.
    assert_eq!(
        acquire(&limiter, &[units(limit, 2)], 70),
        [[0, 2, 0, 50, 50]]
    );
    // Now a look is past the limit.
    assert_eq!(
        acquire(&limiter, &[units(limit, 0)], 80),
        [[0, 0, 0, 40, 40]]
    );
}

#[test]
fn a_counting_window_charges_refused_hits() {
    let limiter = limiter();
    let counting = limiter
        .prepare(Policy::fixed_window_counting_refused(20, 60).unwrap())
        .unwrap();
    let limit = Limit::Policy {
        key: "descriptor",
        policy: &counting,
    };
    // The window [60, 120): 25 hits at 70 allow 20 and count 25; 50 s to go.
    assert_eq!(
        acquire(&limiter, &[units(limit, 25)], 70),
        [[20, 5, 0, 50, 50]]
    );
    // 10 more: none allowed (the counter is at 35).
    assert_eq!(
        acquire(&limiter, &[units(limit, 10)], 80),
        [[0, 10, 0, 40, 40]]
    );
    // A look changes nothing; past the limit it says to wait the 30 s left.
    assert_eq!(
        acquire(&limiter, &[units(limit, 0)], 90),
        [[0, 0, 0, 30, 30]]
    );
    // The next window starts afresh.
    assert_eq!(
        acquire(&limiter, &[units(limit, 1)], 120),
        [[1, 0, 19, 0, 60]]
    );
    let stats = limiter.stats(120);
    assert_eq!((stats.allowed, stats.rejected), (21, 15));
}

#[test]
fn counting_limits_are_charged_whatever_the_others_decide() {
    let limiter = limiter();
    let counting = limiter
        .prepare(Policy::fixed_window_counting_refused(20, 60).unwrap())
        .unwrap();
    let plain = limiter
        .prepare(Policy::fixed_window(5, 60).unwrap())
        .unwrap();
    let a = Limit::Policy {
        key: "a",
        policy: &counting,
    };
    let b = Limit::Policy {
        key: "b",
        policy: &plain,
    };
    // b cannot take 6 of its 5: it takes nothing; a is charged its 3 anyway.
    assert_eq!(
        acquire(&limiter, &[units(a, 3), units(b, 6)], 0),
        [[3, 0, 17, 0, 60], [0, 6, 5, 60, 0]]
    );
    // Both allow: both charged.
    assert_eq!(
        acquire(&limiter, &[units(a, 3), units(b, 5)], 1),
        [[3, 0, 14, 0, 59], [5, 0, 0, 0, 59]]
    );
    // a refuses 15 of its 14 left: it allows 14 and counts 15; a refusing
    // counting limit does not refuse b's look, nor would it refuse b.
    assert_eq!(
        acquire(&limiter, &[units(a, 15), units(b, 0)], 2),
        [[14, 1, 0, 58, 58], [0, 0, 0, 0, 58]]
    );
    // Two counting limits decide each alone.
    let other = Limit::Policy {
        key: "c",
        policy: &counting,
    };
    assert_eq!(
        acquire(&limiter, &[units(a, 1), units(other, 4)], 3),
        [[0, 1, 0, 57, 57], [4, 0, 16, 0, 57]]
    );
    // `acquire` is one unit each: a counting limit is charged even when the
    // plain one refuses.
    let decisions: Vec<[u64; 5]> = limiter
        .acquire(&[other, b], 4)
        .iter()
        .map(|limit| fields(&limit.decision))
        .collect();
    assert_eq!(decisions, [[1, 0, 15, 0, 56], [0, 1, 0, 56, 56]]);
}

#[test]
fn plain_limits_are_all_or_nothing_with_their_units() {
    let limiter = limiter();
    // The route: 1 token per 60 s, 4 at once.
    let route = limiter
        .prepare(Policy::token_bucket(1, 60, 4).unwrap())
        .unwrap();
    let plan = Limit::Plan("sk_a");
    let route = Limit::Policy {
        key: "orders",
        policy: &route,
    };
    // 2 from the plan, 3 from the route: both allow. The route is full again
    // once its 3 tokens are back, 180 s.
    assert_eq!(
        acquire(&limiter, &[units(plan, 2), units(route, 3)], 0),
        [[2, 0, 3, 0, 60], [3, 0, 1, 0, 180]]
    );
    // 2 more from the route, which has 1: nothing taken from either. The
    // route would say, for a batch of 2, one more token in 60 s; the plan,
    // which would have allowed, says nothing to wait for.
    assert_eq!(
        acquire(&limiter, &[units(plan, 2), units(route, 2)], 0),
        [[0, 2, 3, 0, 60], [0, 2, 1, 60, 180]]
    );
    // A single limit is all or nothing too: 4 of the plan's 3 take nothing
    // (request_batch would allow 3).
    assert_eq!(acquire(&limiter, &[units(plan, 4)], 1), [[0, 4, 3, 59, 59]]);
    assert_eq!(limiter.inspect("sk_a", 1).unwrap().remaining, Some(3));
    // A look at the plan does not stop the route's unit.
    assert_eq!(
        acquire(&limiter, &[units(plan, 0), units(route, 1)], 2),
        [[0, 0, 3, 0, 58], [1, 0, 0, 0, 238]]
    );
    // The route has nothing left: refused with its own wait (one token 58 s
    // after 2, at 60), the plan keeps its 3.
    assert_eq!(
        acquire(&limiter, &[units(plan, 1), units(route, 1)], 2),
        [[0, 1, 3, 0, 58], [0, 1, 0, 58, 238]]
    );
    let stats = limiter.stats(2);
    assert_eq!((stats.allowed, stats.rejected), (6, 10));
}

#[test]
fn looks_and_exempt_keys_hold_no_state() {
    let limiter = limiter();
    let plain = limiter
        .prepare(Policy::sliding_log(2, 10).unwrap())
        .unwrap();
    let fresh = Limit::Policy {
        key: "fresh",
        policy: &plain,
    };
    assert_eq!(
        acquire(
            &limiter,
            &[units(fresh, 0), units(Limit::Plan("sk_b"), 0)],
            0
        ),
        [[0, 0, 2, 0, 0], [0, 0, 5, 0, 0]]
    );
    assert_eq!(limiter.stats(0).tracked_keys, 0);
    // The exempt key allows its 7 and stays without state.
    let decisions =
        limiter.acquire_units(&[units(Limit::Plan("sk_internal"), 7), units(fresh, 1)], 0);
    assert_eq!(
        (
            decisions[0].decision.allowed,
            decisions[0].decision.rejected,
            decisions[0].decision.remaining
        ),
        (7, 0, None)
    );
    assert_eq!(decisions[0].decision.retry_after, std::time::Duration::ZERO);
    assert_eq!(decisions[0].decision.reset_after, std::time::Duration::ZERO);
    assert_eq!(fields(&decisions[1].decision), [1, 0, 1, 0, 10]);
    assert_eq!(limiter.stats(0).tracked_keys, 1);
    // u64::MAX units of a plain limit: refused whole, nothing taken.
    assert_eq!(
        acquire(&limiter, &[units(fresh, u64::MAX)], 1),
        [[0, u64::MAX, 1, 9, 9]]
    );
}

/// The memory store's future is ready at once.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = Box::pin(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("the memory store's future was not ready"),
    }
}

#[test]
fn the_memory_store_decides_per_limit_units() {
    let clock = Arc::new(ManualClock::new(70_000_000_000));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
    let counting = store
        .prepare(Policy::fixed_window_counting_refused(20, 60).unwrap())
        .unwrap();
    let limits = [units(
        Limit::Policy {
            key: "descriptor",
            policy: &counting,
        },
        25,
    )];
    let decisions = ready(store.acquire_units(&limits)).unwrap();
    assert_eq!(fields(&decisions[0].decision), [20, 5, 0, 50, 50]);
    assert_eq!(decisions[0].policy, Some(counting.policy()));
    let decisions = ready(store.acquire_units(&[units(limits[0].limit, 10)])).unwrap();
    assert_eq!(fields(&decisions[0].decision), [0, 10, 0, 50, 50]);
}
