//! A plan's settings besides its policies (`[limits.tier_defaults.NAME]`,
//! issue #26): a tier's `delay` as core's rule
//! (`Limiter::reserve_units_within` waiting up to the delay of the tier
//! the locked shard finds, `MaxWait::TierDelay` in the stores), on a manual
//! clock with values worked out by hand, and the settings refused when the
//! table is read.

use std::time::Duration;

use tollgate_core::{
    Limit, LimitUnits, Limiter, LimiterConfig, ManualClock, MaxWait, MemoryStore, Policy,
    Resolution, Store,
};

const MS: u64 = 1_000_000;

/// Default and `pro` both 5 a second in a bucket one deep; `pro` may wait
/// 1 s, `slow` (the same bucket) 400 ms.
const TIERS: &str = "\
[default_policy]\nalgorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\nburst = 1\n\
[tiers.pro]\nalgorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\nburst = 1\n\
[tiers.slow]\nalgorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\nburst = 1\n\
[tier_defaults.pro]\ndelay = \"1s\"\n\
[tier_defaults.slow]\ndelay = \"400ms\"\nmax_in_flight = 3\n";

fn plan(key: &str) -> [LimitUnits<'_>; 1] {
    [LimitUnits {
        limit: Limit::Plan(key),
        units: 1,
    }]
}

#[test]
fn a_request_waits_up_to_the_delay_of_its_tier() {
    let config = LimiterConfig::from_toml_str(TIERS).unwrap();
    let limiter = Limiter::new(&config, Resolution::Nanoseconds).unwrap();
    limiter.assign_tier("sk_pro", "pro").unwrap();
    limiter.assign_tier("sk_slow", "slow").unwrap();
    let now = 1_000 * MS;
    // pro: one token every 200 ms, 1 s of delay: served at 0, 200, ...,
    // 1000 ms (six), the seventh refused 200 ms past the delay.
    for request in 0..6u64 {
        let reservation = limiter.reserve_units_within(&plan("sk_pro"), now, None);
        assert!(reservation.is_admitted(), "request {request}");
        assert_eq!(reservation.wait, Duration::from_millis(200 * request));
    }
    let seventh = limiter.reserve_units_within(&plan("sk_pro"), now, None);
    assert!(!seventh.is_admitted());
    assert_eq!(
        seventh.decisions[0].decision.retry_after,
        Duration::from_millis(200)
    );
    // slow: 400 ms, so served at 0, 200 and 400 ms; the fourth refused.
    let waits: Vec<Option<Duration>> = (0..4)
        .map(|_| {
            let reservation = limiter.reserve_units_within(&plan("sk_slow"), now, None);
            reservation.is_admitted().then_some(reservation.wait)
        })
        .collect();
    assert_eq!(
        waits,
        [
            Some(Duration::ZERO),
            Some(Duration::from_millis(200)),
            Some(Duration::from_millis(400)),
            None
        ]
    );
    // The default plan has no delay: the second request is refused.
    assert!(
        limiter
            .reserve_units_within(&plan("sk_free"), now, None)
            .is_admitted()
    );
    let second = limiter.reserve_units_within(&plan("sk_free"), now, None);
    assert!(!second.is_admitted());
    assert_eq!(
        second.decisions[0].decision.retry_after,
        Duration::from_millis(200)
    );
    // A delay given overrides the tier's: none for pro's next request.
    let given = limiter.reserve_units_within(&plan("sk_pro"), now + 1_200 * MS, Some(0));
    assert!(given.is_admitted(), "its turn is now, at 1200 ms");
    let given = limiter.reserve_units_within(&plan("sk_pro"), now + 1_200 * MS, Some(0));
    assert!(!given.is_admitted());
}

#[test]
fn a_request_without_a_plan_never_waits_for_a_tier() {
    let config = LimiterConfig::from_toml_str(TIERS).unwrap();
    let limiter = Limiter::new(&config, Resolution::Nanoseconds).unwrap();
    let policy = limiter
        .prepare(Policy::token_bucket(5, 1, 1).unwrap())
        .unwrap();
    let budget = [LimitUnits {
        limit: Limit::Policy {
            key: "ip",
            policy: &policy,
        },
        units: 1,
    }];
    assert!(limiter.reserve_units_within(&budget, 0, None).is_admitted());
    assert!(!limiter.reserve_units_within(&budget, 0, None).is_admitted());
}

#[test]
fn the_memory_store_takes_the_tier_delay() {
    let config = LimiterConfig::from_toml_str(TIERS).unwrap();
    let clock = ManualClock::new(5);
    let store = MemoryStore::new(&config, std::sync::Arc::new(clock)).unwrap();
    store.limiter().assign_tier("sk_pro", "pro").unwrap();
    let reserve = |max_wait: MaxWait| {
        let limits = plan("sk_pro");
        ready(store.reserve_units(&limits, max_wait)).unwrap()
    };
    assert_eq!(reserve(MaxWait::TierDelay).wait, Duration::ZERO);
    assert_eq!(reserve(MaxWait::TierDelay).wait, Duration::from_millis(200));
    assert!(!reserve(MaxWait::UpTo(Duration::from_millis(100))).is_admitted());
    assert_eq!(
        reserve(Duration::from_millis(400).into()).wait,
        Duration::from_millis(400)
    );
}

/// The memory store answers at once: its future is ready when first polled.
fn ready<T>(future: tollgate_core::StoreFuture<'_, T>) -> Result<T, tollgate_core::StoreError> {
    let mut future = future;
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("the memory store answers at once"),
    }
}

#[test]
fn tier_defaults_are_read_and_checked() {
    let config = LimiterConfig::from_toml_str(TIERS).unwrap();
    assert_eq!(config.tier_delay(Some("pro")), Duration::from_secs(1));
    assert_eq!(config.tier_delay(Some("slow")), Duration::from_millis(400));
    assert_eq!(config.tier_delay(None), Duration::ZERO);
    // A tier not configured is held to the default plan, delay included;
    // a configured tier without a delay has none, whatever the default's.
    assert_eq!(config.tier_delay(Some("gone")), Duration::ZERO);
    let with_default = LimiterConfig::from_toml_str(&format!(
        "{TIERS}[tiers.plain]\nalgorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\n\
         [tier_defaults.default]\ndelay = \"600ms\"\n"
    ))
    .unwrap();
    assert_eq!(
        with_default.tier_delay(Some("gone")),
        Duration::from_millis(600)
    );
    assert_eq!(with_default.tier_delay(None), Duration::from_millis(600));
    assert_eq!(with_default.tier_delay(Some("plain")), Duration::ZERO);
    assert_eq!(config.tier_defaults_of(Some("slow")).max_in_flight, Some(3));
    assert!(config.any_tier_delay());
    let refused = |defaults: &str| {
        LimiterConfig::from_toml_str(&format!(
            "idle_eviction_s = 600\n[tiers.pro]\nalgorithm = \"fixed_window\"\nlimit = 5\n\
             window_s = 1\n{defaults}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused("[tier_defaults.gold]\ndelay = \"1s\""),
        "invalid tier_defaults.gold: there is no such tier in limits.tiers (`default` is the \
         default plan)"
    );
    assert_eq!(
        refused("[tier_defaults.pro]\ndelay = \"2h\""),
        "invalid tier_defaults.pro: delay must be at most 1h, how long a request may wait for \
         its turn"
    );
    assert_eq!(
        refused("[tier_defaults.default]\ndelay = \"11m\""),
        "invalid tier_defaults.default: delay must be at most idle_eviction_s (600 s): a key \
         idle that long would lose the turns its requests wait for"
    );
    assert_eq!(
        refused("[tier_defaults.pro]\nmax_in_flight = 0"),
        "invalid tier_defaults.pro: max_in_flight must be 1 to 4294967296 (2^32), the requests \
         of one key in flight at once"
    );
    assert!(refused("[tier_defaults.pro]\ndelay = \"soon\"").contains("tier_defaults.pro.delay"));
    assert!(refused("[tier_defaults.pro]\nburst = 1").contains("unknown field `burst`"));
}

#[test]
fn a_tier_no_longer_configured_waits_up_to_the_default_plans_delay() {
    let with = |extra: &str| {
        LimiterConfig::from_toml_str(&format!(
            "{TIERS}[tiers.gone]\nalgorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\n\
             burst = 1\n[tier_defaults.default]\ndelay = \"600ms\"\n{extra}"
        ))
        .unwrap()
    };
    let limiter = Limiter::new(&with(""), Resolution::Nanoseconds).unwrap();
    limiter.assign_tier("sk_gone", "gone").unwrap();
    // Tier gone, without a delay of its own, is dropped by a reload: its
    // keys are held to the default plan, its 600 ms included (one token
    // every 200 ms: served at 0, 200, 400 and 600 ms, the fifth refused).
    let mut config = with("");
    config.tiers.remove("gone");
    limiter.reconfigure(&config).unwrap();
    let waits: Vec<Option<Duration>> = (0..5)
        .map(|_| {
            let reservation = limiter.reserve_units_within(&plan("sk_gone"), 0, None);
            reservation.is_admitted().then_some(reservation.wait)
        })
        .collect();
    assert_eq!(
        waits,
        [
            Some(Duration::ZERO),
            Some(Duration::from_millis(200)),
            Some(Duration::from_millis(400)),
            Some(Duration::from_millis(600)),
            None
        ]
    );
}
