//! Waiting instead of refusing (`Limiter::reserve_units`, issue #26 part 4)
//! on a manual clock: the queue each algorithm forms, worked out by hand;
//! reservations given back; and, by proptest, that the times requests are
//! served at never break the policy, checked on those times alone.

use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::{
    Limit, LimitUnits, Limiter, LimiterConfig, Policy, PreparedPolicy, Reservation, Resolution,
};

fn limiter(resolution: Resolution) -> Limiter {
    Limiter::new(&LimiterConfig::default(), resolution).unwrap()
}

fn one<'a>(key: &'a str, policy: &'a PreparedPolicy, units: u64) -> [LimitUnits<'a>; 1] {
    [LimitUnits {
        limit: Limit::Policy { key, policy },
        units,
    }]
}

/// (admitted, wait, retry_after) of a one-limit reservation.
fn outcome(reservation: &Reservation) -> (bool, Duration, Duration) {
    (
        reservation.is_admitted(),
        reservation.wait,
        reservation.decisions[0].decision.retry_after,
    )
}

const MS: u64 = 1_000_000;

#[test]
fn twelve_requests_on_a_bucket_of_five_a_second_with_a_burst_of_one_and_two_seconds_of_delay() {
    // The case: one token every 200 ms, a bucket one token deep.
    let limiter = limiter(Resolution::Nanoseconds);
    let policy = limiter
        .prepare(Policy::token_bucket(5, 1, 1).unwrap())
        .unwrap();
    let max_wait = 2_000 * MS;
    let now = 1_000_000 * MS;
    for request in 0..11u64 {
        let reservation = limiter.reserve_units(&one("k", &policy, 1), now, max_wait);
        // Served at 0, 200, ..., 2000 ms.
        assert_eq!(
            outcome(&reservation),
            (true, Duration::from_millis(200 * request), Duration::ZERO),
            "request {request}"
        );
        assert_eq!(reservation.counted_at, now + 200 * MS * request);
        // Seen when it is served: the bucket empty, full 200 ms later.
        let decision = reservation.decisions[0].decision;
        assert_eq!(decision.remaining, Some(0));
        assert_eq!(decision.reset_after, Duration::from_millis(200));
    }
    let twelfth = limiter.reserve_units(&one("k", &policy, 1), now, max_wait);
    // Its turn would be at 2200 ms: 200 ms past the delay, so Retry-After 1.
    assert_eq!(
        outcome(&twelfth),
        (false, Duration::ZERO, Duration::from_millis(200))
    );
    assert_eq!(twelfth.decisions[0].decision.retry_after_seconds(), 1);
    assert_eq!(twelfth.decisions[0].decision.rejected, 1);
    // Refused, it reserved nothing: 200 ms later a request waits its turn,
    // at 2200 ms, exactly the delay.
    let retry = limiter.reserve_units(&one("k", &policy, 1), now + 200 * MS, max_wait);
    assert_eq!(
        outcome(&retry),
        (true, Duration::from_millis(2_000), Duration::ZERO)
    );
}

#[test]
fn a_request_gone_while_it_waits_gives_its_turn_back() {
    let limiter = limiter(Resolution::Nanoseconds);
    let policy = limiter
        .prepare(Policy::token_bucket(5, 1, 1).unwrap())
        .unwrap();
    let now = 0;
    let reservations: Vec<Reservation> = (0..4)
        .map(|_| limiter.reserve_units(&one("k", &policy, 1), now, 2_000 * MS))
        .collect();
    // Served at 0, 200, 400, 600 ms. One in the middle of the queue
    // leaving gives nothing back: the next would share the turn at 600 ms.
    let middle =
        limiter.cancel_reservation(&one("k", &policy, 1), 100 * MS, reservations[1].counted_at);
    assert_eq!(middle, vec![0]);
    // The last leaves at 100 ms.
    let given =
        limiter.cancel_reservation(&one("k", &policy, 1), 100 * MS, reservations[3].counted_at);
    assert_eq!(given, vec![1]);
    // The next request takes the turn at 600 ms, not 800.
    let next = limiter.reserve_units(&one("k", &policy, 1), 100 * MS, 2_000 * MS);
    assert_eq!(next.wait, Duration::from_millis(500));
    // The rest gone, the last of the queue first each time: the bucket is
    // as if never used by them, but never fuller than the time allows: at
    // 300 ms the first (served at 0) and second (at 200) have used theirs.
    for reservation in [&next, &reservations[2]] {
        limiter.cancel_reservation(&one("k", &policy, 1), 300 * MS, reservation.counted_at);
    }
    let after = limiter.reserve_units(&one("k", &policy, 1), 300 * MS, 2_000 * MS);
    assert_eq!(
        outcome(&after),
        (true, Duration::from_millis(100), Duration::ZERO)
    );
}

#[test]
fn a_fixed_window_queues_into_the_next_window_only() {
    // 3 per 10 s, waiting up to 10 s; time in seconds.
    let limiter = limiter(Resolution::Seconds);
    let policy = limiter
        .prepare(Policy::fixed_window(3, 10).unwrap())
        .unwrap();
    let mut waits = Vec::new();
    for _ in 0..6 {
        let reservation = limiter.reserve_units(&one("k", &policy, 1), 1, 10);
        assert!(reservation.is_admitted());
        waits.push(reservation.wait.as_secs());
    }
    // Three at once in [0, 10), three at 10 in [10, 20).
    assert_eq!(waits, [0, 0, 0, 9, 9, 9]);
    // The seventh's turn is at 20: 19 s away, 9 s past the delay.
    let seventh = limiter.reserve_units(&one("k", &policy, 1), 1, 10);
    assert_eq!(
        outcome(&seventh),
        (false, Duration::ZERO, Duration::from_secs(9))
    );
    // At 5 a request still queues into [10, 20), which is full: refused.
    let later = limiter.reserve_units(&one("k", &policy, 1), 5, 10);
    assert_eq!(
        outcome(&later),
        (false, Duration::ZERO, Duration::from_secs(5))
    );
    // One of [10, 20) leaves: its place is taken by the next to come.
    assert_eq!(
        limiter.cancel_reservation(&one("k", &policy, 1), 6, 10),
        vec![1]
    );
    let taken = limiter.reserve_units(&one("k", &policy, 1), 6, 10);
    assert_eq!(
        outcome(&taken),
        (true, Duration::from_secs(4), Duration::ZERO)
    );
    // A cost of 2 never splits across windows: at 12 in [10, 20), full.
    let pair = limiter.reserve_units(&one("k", &policy, 2), 12, 10);
    assert_eq!(
        outcome(&pair),
        (true, Duration::from_secs(8), Duration::ZERO)
    );
    // Units above the limit never fit: refused as acquire_units refuses.
    let too_many = limiter.reserve_units(&one("k", &policy, 4), 12, 1_000);
    assert!(!too_many.is_admitted());
}

#[test]
fn a_sliding_log_waits_for_its_oldest_units_to_stop_counting() {
    // 2 per 10 s, waiting up to 10 s.
    let limiter = limiter(Resolution::Seconds);
    let policy = limiter
        .prepare(Policy::sliding_log(2, 10).unwrap())
        .unwrap();
    let waits: Vec<(bool, u64)> = (0..4)
        .map(|_| {
            let reservation = limiter.reserve_units(&one("k", &policy, 1), 0, 10);
            (reservation.is_admitted(), reservation.wait.as_secs())
        })
        .collect();
    // Two at 0; two at 10, when those of 0 stop counting.
    assert_eq!(waits, [(true, 0), (true, 0), (true, 10), (true, 10)]);
    // The fifth's turn is at 20: 10 s past the delay.
    let fifth = limiter.reserve_units(&one("k", &policy, 1), 0, 10);
    assert_eq!(
        outcome(&fifth),
        (false, Duration::ZERO, Duration::from_secs(10))
    );
    // At 3 a request joins behind those of 10: at 20, 17 s away, refused
    // with 7.
    let later = limiter.reserve_units(&one("k", &policy, 1), 3, 10);
    assert_eq!(
        outcome(&later),
        (false, Duration::ZERO, Duration::from_secs(7))
    );
    // One of 10 leaves at 4; its unit goes, so a request at 4 takes the
    // turn at 10.
    assert_eq!(
        limiter.cancel_reservation(&one("k", &policy, 1), 4, 10),
        vec![1]
    );
    let taken = limiter.reserve_units(&one("k", &policy, 1), 4, 10);
    assert_eq!(
        outcome(&taken),
        (true, Duration::from_secs(6), Duration::ZERO)
    );
    // A reservation of a run that is gone gives nothing back.
    assert_eq!(
        limiter.cancel_reservation(&one("k", &policy, 1), 4, 7),
        vec![0]
    );
}

#[test]
fn several_limits_are_served_at_the_latest_turn_and_refused_together() {
    // A bucket of one token a second, 2 deep; and 3 per 10 s.
    let limiter = limiter(Resolution::Seconds);
    let bucket = limiter
        .prepare(Policy::token_bucket(1, 1, 2).unwrap())
        .unwrap();
    let window = limiter
        .prepare(Policy::fixed_window(3, 10).unwrap())
        .unwrap();
    let limits = |units| {
        [
            LimitUnits {
                limit: Limit::Policy {
                    key: "b",
                    policy: &bucket,
                },
                units,
            },
            LimitUnits {
                limit: Limit::Policy {
                    key: "w",
                    policy: &window,
                },
                units,
            },
        ]
    };
    let waits: Vec<u64> = (0..3)
        .map(|_| limiter.reserve_units(&limits(1), 0, 30).wait.as_secs())
        .collect();
    // The bucket: 0, 0, 1. The window has room for all three in [0, 10).
    assert_eq!(waits, [0, 0, 1]);
    // The fourth: the bucket's turn at 2, the window's at 10: served at 10.
    let fourth = limiter.reserve_units(&limits(1), 0, 30);
    assert_eq!(fourth.wait, Duration::from_secs(10));
    // Refused by the window's wait, nothing is taken from the bucket:
    // at 0 with no delay it is refused, and the bucket still says it is
    // full at 11 (10 + 1), as the fourth left it.
    let refused = limiter.reserve_units(&limits(1), 0, 0);
    assert!(!refused.is_admitted());
    assert_eq!(
        refused.decisions[0].decision.retry_after,
        Duration::from_secs(10)
    );
    let look = limiter.reserve_units(&limits(0), 0, 0);
    assert_eq!(
        look.decisions[0].decision.reset_after,
        Duration::from_secs(11)
    );
}

/// Whether served times (ascending) keep a token bucket of `rate` tokens
/// per second, `burst` deep: every run of served requests from `i` to `j`
/// fits in `burst` plus what refills between them.
fn keeps_the_bucket(served: &[u64], rate: u64, burst: u64) -> bool {
    (0..served.len()).all(|i| {
        (i..served.len()).all(|j| (j - i + 1) as u64 <= burst + (served[j] - served[i]) * rate)
    })
}

/// Whether served times keep `limit` per sliding `window`.
fn keeps_the_log(served: &[u64], limit: u64, window: u64) -> bool {
    (0..served.len()).all(|i| {
        served[i..]
            .iter()
            .take_while(|at| **at < served[i] + window)
            .count() as u64
            <= limit
    })
}

/// Whether served times keep `limit` per aligned `window`.
fn keeps_the_windows(served: &[u64], limit: u64, window: u64) -> bool {
    let mut counts = std::collections::HashMap::new();
    served
        .iter()
        .for_each(|at| *counts.entry(at / window).or_insert(0u64) += 1);
    counts.values().all(|count| *count <= limit)
}

proptest! {
    /// Requests arriving at random (seconds, ascending), some leaving while
    /// they wait, some not waiting at all (`acquire_units`, as a route
    /// without delay, or the tower layer, decides on the same key): the
    /// times of those served, sorted, keep the policy, and each is served no
    /// later than its arrival plus the delay.
    #[test]
    fn served_times_keep_the_policy(
        algorithm in 0u8..3,
        limit in 1u64..5,
        window in 1u64..5,
        max_wait in 0u64..12,
        arrivals in prop::collection::vec((0u64..3, 0u8..3), 1..60),
    ) {
        let limiter = limiter(Resolution::Seconds);
        let policy = match algorithm {
            0 => Policy::token_bucket(limit, 1, window).unwrap(),
            1 => Policy::sliding_log(limit, window).unwrap(),
            _ => Policy::fixed_window(limit, window).unwrap(),
        };
        let prepared = limiter.prepare(policy).unwrap();
        let mut now = 0;
        let mut served = Vec::new();
        for (gap, kind) in arrivals {
            now += gap;
            let leaves = kind == 1;
            if kind == 2 {
                let decision = &limiter.acquire_units(&one("k", &prepared, 1), now)[0].decision;
                if decision.is_allowed() {
                    served.push(now);
                }
                continue;
            }
            let reservation = limiter.reserve_units(&one("k", &prepared, 1), now, max_wait);
            if !reservation.is_admitted() {
                let retry = reservation.decisions[0].decision.retry_after.as_secs();
                prop_assert!(retry >= 1);
                continue;
            }
            let at = now + reservation.wait.as_secs();
            prop_assert!(at <= now + max_wait);
            prop_assert_eq!(at, reservation.counted_at.max(now));
            if leaves && at > now {
                limiter.cancel_reservation(&one("k", &prepared, 1), now, reservation.counted_at);
            } else {
                served.push(at);
            }
        }
        served.sort_unstable();
        let kept = match algorithm {
            0 => keeps_the_bucket(&served, limit, window),
            1 => keeps_the_log(&served, limit, window),
            _ => keeps_the_windows(&served, limit, window),
        };
        prop_assert!(kept, "served at {:?}", served);
    }
}
