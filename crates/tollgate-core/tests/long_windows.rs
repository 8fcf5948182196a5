//! A window longer than `idle_eviction_s` (a day's or a month's quota) is
//! not forgotten when its key stays idle past the eviction age: the
//! in-memory limiter keeps an idle key's state until it is whole again
//! (`Policy::counted_span_s`), for the plans it is configured with and for
//! the policies prepared for `Limit::Policy` (a route's budget). Seconds
//! resolution, expected values by hand.

use tollgate_core::{
    Calendar, CalendarPeriod, Limit, LimitUnits, Limiter, LimiterConfig, Policy, Resolution,
};

const HOUR_S: u64 = 3600;
const DAY_S: u64 = 86_400;

#[test]
fn a_daily_plan_outlives_the_idle_eviction_age() {
    // 10 a day, keys dropped after an hour idle (the default).
    let config = LimiterConfig {
        default_policy: Policy::fixed_window(10, DAY_S).unwrap(),
        ..LimiterConfig::default()
    };
    assert_eq!(config.idle_eviction_s, HOUR_S);
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    assert_eq!(limiter.request("sk_a", DAY_S).remaining, Some(9));
    assert_eq!(limiter.request("sk_a", DAY_S).remaining, Some(8));
    // Five hours idle: still 8 left, not a fresh 10.
    assert_eq!(
        limiter.request("sk_a", DAY_S + 5 * HOUR_S).remaining,
        Some(7)
    );
    // The next day: whole again.
    assert_eq!(limiter.request("sk_a", 2 * DAY_S).remaining, Some(9));
}

#[test]
fn a_prepared_monthly_quota_outlives_the_idle_eviction_age() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    let month = Calendar::new(CalendarPeriod::Month, "UTC", None).unwrap();
    let prepared = limiter
        .prepare(Policy::calendar(100, month).unwrap())
        .unwrap();
    let charge = |units: u64, now: u64| {
        limiter.acquire_units(
            &[LimitUnits {
                limit: Limit::Policy {
                    key: "route:llm:ip:192.0.2.7",
                    policy: &prepared,
                },
                units,
            }],
            now,
        )[0]
        .decision
        .remaining
    };
    // 2025-01-01T00:00:00Z: 30 used.
    let january = 1_735_689_600;
    assert_eq!(charge(30, january), Some(70));
    // Ten days idle, far past the hour: 70 still left.
    assert_eq!(charge(0, january + 10 * DAY_S), Some(70));
    // 1 February: whole again.
    assert_eq!(charge(0, january + 31 * DAY_S), Some(100));
}
