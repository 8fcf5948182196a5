//! Charging past the limit into a bounded debt (`Limiter::overdraw_units`,
//! a request's usage settled after its response, issue #29), on a clock of
//! seconds, every value worked out by hand: the debt refuses every request
//! until it is repaid (the window's end, the bucket's refill, the oldest
//! units leaving the log), and never goes deeper than the overdraft.

use tollgate_core::{Limit, LimitUnits, Limiter, LimiterConfig, Policy, Resolution};

fn limiter(policy: Policy) -> Limiter {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    limiter.configure(policy).unwrap();
    limiter
}

/// Charges `units` of `key`'s plan at `now` into a debt of at most
/// `overdraft`: what a look then sees, (remaining, reset_after s).
fn overdraw(limiter: &Limiter, key: &str, units: u64, overdraft: u64, now: u64) -> (u64, u64) {
    let looked = limiter.overdraw_units(
        &[LimitUnits {
            limit: Limit::Plan(key),
            units,
        }],
        overdraft,
        now,
    );
    let decision = &looked[0].decision;
    assert_eq!((decision.allowed, decision.rejected), (0, 0));
    (decision.remaining.unwrap(), decision.reset_after.as_secs())
}

/// (allowed, remaining, retry_after s) of one request at `now`.
fn request(limiter: &Limiter, key: &str, now: u64) -> (u64, u64, u64) {
    let decision = limiter.request(key, now);
    (
        decision.allowed,
        decision.remaining.unwrap(),
        decision.retry_after_seconds(),
    )
}

#[test]
fn a_fixed_window_in_debt_refuses_until_its_end() {
    // 5 per 60 s, overdraft 10.
    let limiter = limiter(Policy::fixed_window(5, 60).unwrap());
    assert_eq!(request(&limiter, "sk_a", 0), (1, 4, 0));
    // 7 more at 1: a count of 8, 3 past the limit; the window ends at 60.
    assert_eq!(overdraw(&limiter, "sk_a", 7, 10, 1), (0, 59));
    assert_eq!(request(&limiter, "sk_a", 2), (0, 0, 58));
    // 20 more: the count stops at 5 + 10 (seen by giving 10 back: 5 left
    // counted, none remaining; then 1 more: 1 remaining).
    overdraw(&limiter, "sk_a", 20, 10, 3);
    let give_back = |units| {
        limiter.give_back_units(
            &[LimitUnits {
                limit: Limit::Plan("sk_a"),
                units,
            }],
            4,
        )[0]
        .decision
        .remaining
    };
    assert_eq!(give_back(10), Some(0));
    assert_eq!(give_back(1), Some(1));
    overdraw(&limiter, "sk_a", 20, 10, 5);
    assert_eq!(request(&limiter, "sk_a", 59), (0, 0, 1));
    // A new window forgets the debt.
    assert_eq!(request(&limiter, "sk_a", 60), (1, 4, 0));
    // A key that never asked gets a state: 6 of 5, refused to 120.
    assert_eq!(overdraw(&limiter, "sk_new", 6, 10, 61), (0, 59));
    assert_eq!(request(&limiter, "sk_new", 61), (0, 0, 59));
}

#[test]
fn a_token_bucket_in_debt_refuses_until_it_refills_one_token() {
    // 1 token a second, burst 5, overdraft 10.
    let limiter = limiter(Policy::token_bucket(60, 60, 5).unwrap());
    assert_eq!(request(&limiter, "sk_a", 0), (1, 4, 0));
    // 7 more at 0: 4 - 7 = -3 tokens; full (5) in 8 s.
    assert_eq!(overdraw(&limiter, "sk_a", 7, 10, 0), (0, 8));
    // One token is there once -3 has refilled to 1: 4 s.
    assert_eq!(request(&limiter, "sk_a", 0), (0, 0, 4));
    assert_eq!(request(&limiter, "sk_a", 4), (1, 0, 0));
    // At 4 the bucket is at 0 after that request; 30 more go to -10 at most:
    // one token in 11 s, full in 15 s.
    assert_eq!(overdraw(&limiter, "sk_a", 30, 10, 4), (0, 15));
    assert_eq!(request(&limiter, "sk_a", 4), (0, 0, 11));
    assert_eq!(request(&limiter, "sk_a", 15), (1, 0, 0));
}

#[test]
fn a_sliding_log_in_debt_refuses_until_enough_units_leave() {
    // 5 per 10 s, overdraft 10.
    let limiter = limiter(Policy::sliding_log(5, 10).unwrap());
    let batch = |now, units| {
        limiter
            .request_batch("sk_a", now, std::num::NonZeroU64::new(units).unwrap())
            .allowed
    };
    assert_eq!(batch(0, 2), 2);
    assert_eq!(batch(1, 2), 2);
    // 5 more at 2: 9 counted, 4 past the limit; the newest counts to 12.
    assert_eq!(overdraw(&limiter, "sk_a", 5, 10, 2), (0, 10));
    // One unit fits once at most 4 count: the runs of 0 (2 units), 1 (2)
    // and 2 (5) must all go: at 12.
    assert_eq!(request(&limiter, "sk_a", 3), (0, 0, 9));
    // At 10 the run of 0 has gone: 7 counted, still 12.
    assert_eq!(request(&limiter, "sk_a", 10), (0, 0, 2));
    assert_eq!(request(&limiter, "sk_a", 12), (1, 4, 0));
    // 30 more at 12: 1 + 30 stops at 5 + 10 = 15 counted.
    overdraw(&limiter, "sk_a", 30, 10, 12);
    assert_eq!(request(&limiter, "sk_a", 21), (0, 0, 1));
    assert_eq!(request(&limiter, "sk_a", 22), (1, 4, 0));
}
