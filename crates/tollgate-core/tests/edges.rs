//! The edges the contract pins down, each value computed by hand.

use std::num::NonZeroU64;
use std::time::Duration;

use tollgate_core::{
    Clock, Decision, Limiter, LimiterConfig, MAX_VALUE, ManualClock, Policy, PolicyError,
    Resolution, UnknownTier,
};

fn gateway_with(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        ..LimiterConfig::default()
    };
    Limiter::new(&config, Resolution::Seconds).unwrap()
}

fn units(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn outcome(decision: Decision) -> (u64, u64, Option<u64>, u64) {
    (
        decision.allowed,
        decision.rejected,
        decision.remaining,
        decision.retry_after.as_secs(),
    )
}

#[test]
fn burst_after_a_long_idle_is_exactly_burst() {
    // 1 token per second, 5 tokens at most.
    let limiter = gateway_with(Policy::token_bucket(1, 1, 5).unwrap());
    assert_eq!(
        outcome(limiter.request_batch("k", 0, units(5))),
        (5, 0, Some(0), 0)
    );
    // 3000 s later (no eviction yet): 3000 tokens of refill, capped at 5.
    assert_eq!(
        outcome(limiter.request_batch("k", 3000, units(10))),
        (5, 5, Some(0), 1)
    );
    // And after an eviction the bucket is full, not fuller.
    assert_eq!(
        outcome(limiter.request_batch("k", 3000 + 3600, units(10))),
        (5, 5, Some(0), 1)
    );
}

#[test]
fn eviction_keeps_a_key_idle_3599_s_and_drops_it_at_3600_s() {
    // A token an hour, one at most: whole again 3600 s after its use, so
    // the eviction age stays the configured 3600 s.
    let limiter = gateway_with(Policy::token_bucket(1, 3600, 1).unwrap());
    limiter.request("k", 1000);
    // 3599 s idle: the bucket is still empty, its token 1 s away.
    assert_eq!(outcome(limiter.request("k", 4599)), (0, 1, Some(0), 1));
    // The rejected request at 4599 counts as use: 3600 s after it, the state is gone.
    assert_eq!(limiter.stats(8198).tracked_keys, 1);
    assert_eq!(limiter.stats(8199).tracked_keys, 0);
    assert_eq!(outcome(limiter.request("k", 8199)), (1, 0, Some(0), 0));
}

#[test]
fn a_window_longer_than_the_eviction_age_is_kept_to_its_end() {
    let limiter = gateway_with(Policy::fixed_window(5, 100_000).unwrap());
    limiter.request_batch("k", 1000, units(5));
    // 50,000 s idle, far past 3600: the window [0, 100000) is still full.
    assert_eq!(
        outcome(limiter.request("k", 51_000)),
        (0, 1, Some(0), 100_000 - 51_000)
    );
    assert_eq!(limiter.stats(151_000 - 1).tracked_keys, 1);
    assert_eq!(limiter.stats(151_000).tracked_keys, 0);
}

#[test]
fn a_key_idle_at_now_has_no_state_to_reset() {
    let limiter = gateway_with(Policy::fixed_window(5, 60).unwrap());
    limiter.request("a", 0);
    limiter.request("b", 0);
    assert!(limiter.reset("a", 3599));
    assert!(!limiter.reset("b", 3600));
    assert!(!limiter.reset("never", 0));
}

#[test]
fn a_tier_change_discards_state_and_the_same_tier_does_not() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    limiter.assign_tier("k", "pro").unwrap(); // sliding log, 20 per 60 s
    limiter.request_batch("k", 0, units(15));
    limiter.assign_tier("k", "pro").unwrap();
    assert_eq!(limiter.request("k", 1).remaining, Some(4)); // 20 - 16: kept
    limiter.assign_tier("k", "enterprise").unwrap(); // fixed window, 1000 per 60 s
    assert_eq!(limiter.request("k", 2).remaining, Some(999)); // discarded
    limiter.request_batch("k", 3, units(9));
    limiter.assign_tier("k", "default").unwrap(); // fixed window, 5 per 60 s
    assert_eq!(limiter.request("k", 4).remaining, Some(4));
    limiter.assign_tier("k", "default").unwrap();
    assert_eq!(limiter.request("k", 5).remaining, Some(3));
    assert_eq!(
        limiter.assign_tier("k", "gold"),
        Err(UnknownTier("gold".into()))
    );
    assert_eq!(limiter.request("k", 6).remaining, Some(2)); // an error changes nothing
    assert_eq!(limiter.tier_of("k"), "default");
}

#[test]
fn configure_discards_only_default_policy_keys() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    limiter.assign_tier("pro", "pro").unwrap();
    limiter.request_batch("pro", 0, units(3));
    limiter.request_batch("free", 0, units(3));
    assert_eq!(limiter.stats(0).tracked_keys, 2);
    // The same policy again still discards the default-policy keys.
    limiter
        .configure(Policy::fixed_window(5, 60).unwrap())
        .unwrap();
    assert_eq!(limiter.stats(0).tracked_keys, 1);
    assert_eq!(limiter.request("free", 1).remaining, Some(4));
    assert_eq!(limiter.request("pro", 1).remaining, Some(16)); // 20 - 4
    assert_eq!(limiter.tier_of("pro"), "pro"); // the assignment survives
}

#[test]
fn a_token_bucket_of_7_per_60_s_refills_exactly() {
    // 7 tokens per 60 s: one token every 60/7 = 8.571... s.
    let limiter = gateway_with(Policy::token_bucket(7, 60, 7).unwrap());
    assert_eq!(
        outcome(limiter.request_batch("k", 0, units(7))),
        (7, 0, Some(0), 0)
    );
    // At 8 s: 56/60 of a token; a whole one at 60/7 s, so in ceil(4/7) = 1 s.
    assert_eq!(outcome(limiter.request("k", 8)), (0, 1, Some(0), 1));
    // At 9 s: 63/60 tokens; one taken leaves 3/60.
    assert_eq!(outcome(limiter.request("k", 9)), (1, 0, Some(0), 0));
    // At 60 s: 3/60 + 51 * 7/60 = 360/60 = 6 tokens exactly.
    assert_eq!(
        outcome(limiter.request_batch("k", 60, units(7))),
        (6, 1, Some(0), 9)
    );
    // After 60 s more, exactly 7 again (the cap), never 7 and a fraction.
    assert_eq!(
        outcome(limiter.request_batch("k", 120, units(8))),
        (7, 1, Some(0), 9)
    );
}

#[test]
fn a_manual_clock_refills_nanosecond_buckets_exactly() {
    // rpm 7 on a nanosecond clock: exactly 7 tokens after 60 s, 0 after 59.999999999 s.
    let clock = ManualClock::new(0);
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::token_bucket(7, 60, 7).unwrap(),
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Nanoseconds).unwrap();
    assert_eq!(
        limiter
            .request_batch("k", clock.now_nanos(), units(7))
            .allowed,
        7
    );
    clock.advance(Duration::from_nanos(60_000_000_000 / 7)); // 8571428571 ns: 0.99999... token
    let early = limiter.request("k", clock.now_nanos());
    assert!(!early.is_allowed());
    // 1 token = 60e9/7 ns = 8571428571.43 ns; 8571428571 ns gives 59999999997/60e9 of one;
    // the missing 3/60e9 token refills in ceil(3 / 7) = 1 ns.
    assert_eq!(early.retry_after, Duration::from_nanos(1));
    assert_eq!(early.retry_after_seconds(), 1);
    clock.advance_by("1ns").unwrap();
    assert!(limiter.request("k", clock.now_nanos()).is_allowed());
    // rpm 60, burst 5: empty, then one token exactly after 1 s.
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::token_bucket(60, 60, 5).unwrap(),
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Nanoseconds).unwrap();
    assert_eq!(
        limiter
            .request_batch("r", clock.now_nanos(), units(6))
            .allowed,
        5
    );
    clock.advance_by("1s").unwrap();
    let batch = limiter.request_batch("r", clock.now_nanos(), units(2));
    assert_eq!(
        (batch.allowed, batch.retry_after),
        (1, Duration::from_secs(1))
    );
    clock.advance_by("250ms").unwrap();
    let partial = limiter.request("r", clock.now_nanos());
    assert_eq!(partial.retry_after, Duration::from_millis(750));
    assert_eq!(partial.retry_after_seconds(), 1);
}

/// 2^63-1, the largest value the contract accepts.
const MAX: u64 = (1 << 63) - 1;

#[test]
fn the_largest_value_is_2_pow_63_minus_1() {
    assert_eq!(MAX_VALUE, 9_223_372_036_854_775_807);
}

#[test]
fn fixed_window_at_2_pow_63_minus_1() {
    let limiter = gateway_with(Policy::fixed_window(MAX, MAX).unwrap());
    // now = MAX is the first tick of window 1: [MAX, 2 * MAX).
    assert_eq!(
        outcome(limiter.request_batch("k", MAX, units(MAX))),
        (MAX, 0, Some(0), 0)
    );
    assert_eq!(
        outcome(limiter.request_batch("k", MAX, units(MAX))),
        (0, MAX, Some(0), MAX)
    );
    let small = gateway_with(Policy::fixed_window(1, MAX).unwrap());
    // now = MAX - 1 is the last tick of window 0: 1 s to go.
    assert_eq!(
        outcome(small.request_batch("k", MAX - 1, units(MAX))),
        (1, MAX - 1, Some(0), 1)
    );
}

#[test]
fn sliding_log_at_2_pow_63_minus_1() {
    // Idle eviction as long as the window, so the log survives the wait.
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::sliding_log(MAX, MAX).unwrap(),
        idle_eviction_s: MAX,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    assert_eq!(
        outcome(limiter.request_batch("k", 0, units(MAX - 1))),
        (MAX - 1, 0, Some(1), 0)
    );
    assert_eq!(
        outcome(limiter.request_batch("k", MAX - 1, units(MAX))),
        (1, MAX - 1, Some(0), 1)
    );
    // At MAX the units of time 0 have expired (0 + MAX <= MAX); those of MAX - 1 count
    // until 2 * MAX - 1, MAX - 1 s away.
    assert_eq!(
        outcome(limiter.request_batch("k", MAX, units(MAX))),
        (MAX - 1, 1, Some(0), MAX - 1)
    );
}

#[test]
fn token_bucket_at_2_pow_63_minus_1() {
    // MAX tokens per MAX s: 1 token per second, MAX tokens of burst.
    let limiter = gateway_with(Policy::token_bucket(MAX, MAX, MAX).unwrap());
    assert_eq!(
        outcome(limiter.request_batch("k", MAX, units(MAX))),
        (MAX, 0, Some(0), 0)
    );
    assert_eq!(outcome(limiter.request("k", MAX)), (0, 1, Some(0), 1));
    // 1 token per MAX s: the next token comes MAX s later.
    let slow = gateway_with(Policy::token_bucket(1, MAX, MAX).unwrap());
    assert_eq!(
        outcome(slow.request_batch("k", MAX, units(MAX))),
        (MAX, 0, Some(0), 0)
    );
    assert_eq!(outcome(slow.request("k", MAX)), (0, 1, Some(0), MAX));
    // MAX tokens per second, burst 1: never more than 1 at a time.
    let fast = gateway_with(Policy::token_bucket(MAX, 1, 1).unwrap());
    assert_eq!(
        outcome(fast.request_batch("k", 0, units(MAX))),
        (1, MAX - 1, Some(0), 1)
    );
    let full = fast.request_batch("k", 1, units(MAX));
    assert_eq!(outcome(full), (1, MAX - 1, Some(0), 1));
}

#[test]
fn stats_count_past_2_pow_64() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    for _ in 0..4 {
        limiter.request_batch("sk_internal", 0, units(MAX));
        limiter.request_batch("k", 0, units(MAX));
    }
    let stats = limiter.stats(0);
    assert_eq!(stats.allowed, 4 * u128::from(MAX) + 5);
    assert_eq!(stats.rejected, 4 * u128::from(MAX) - 5);
    assert_eq!(stats.tracked_keys, 1);
}

#[test]
fn exempt_keys_hold_no_state_and_inspect_uses_no_budget() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    // Every unit allowed, no budget, nothing to wait for.
    assert_eq!(
        limiter.request_batch("sk_internal", 0, units(100)),
        Decision {
            allowed: 100,
            rejected: 0,
            remaining: None,
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
        }
    );
    assert_eq!(limiter.stats(0).tracked_keys, 0);
    assert_eq!(limiter.policy_for("sk_internal"), None);
    assert_eq!(limiter.inspect("k", 0), None);
    limiter.request_batch("k", 0, units(2));
    let seen = limiter.inspect("k", 1).unwrap();
    assert_eq!(
        (seen.allowed, seen.rejected, seen.remaining),
        (0, 0, Some(3))
    );
    assert_eq!(limiter.inspect("k", 1).unwrap().remaining, Some(3));
    assert_eq!(limiter.request("k", 1).remaining, Some(2));
}

#[test]
fn the_key_cap_keeps_the_recently_used_keys() {
    // A cap of 6400 over 64 shards (about 100 keys each), and 20,000 keys.
    let config = LimiterConfig {
        policy_lists: Default::default(),
        max_tracked_keys: 6400,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    // A hundred keys a second for 200 s (no key goes idle).
    for i in 0..20_000 {
        limiter.request(&format!("key-{i}"), i / 100);
        if i % 1000 == 0 {
            // A key used again and again stays.
            limiter.request("regular", i / 100);
        }
    }
    let tracked = limiter.stats(199).tracked_keys;
    // At most the cap plus one key per shard that was empty when the cap hit.
    assert!((6400..=6400 + 64).contains(&tracked), "{tracked}");
    // The oldest keys went; the newest 50 (fewer than any shard's share) stayed.
    assert_eq!(limiter.inspect("key-0", 199), None);
    for i in 19_950..20_000 {
        assert!(
            limiter.inspect(&format!("key-{i}"), 199).is_some(),
            "key-{i}"
        );
    }
    assert!(limiter.inspect("regular", 199).is_some());
    // A pushed-out key starts afresh.
    assert_eq!(limiter.request("key-0", 199).remaining, Some(4));
}

#[test]
fn a_window_too_long_for_nanoseconds_is_refused() {
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Nanoseconds).unwrap();
    // 2^64 ns is 18,446,744,073.7 s: a window of 2e10 s does not fit.
    let long = Policy::fixed_window(1, 20_000_000_000).unwrap();
    assert_eq!(
        limiter.configure(long),
        Err(PolicyError::WindowTooLong {
            window_s: 20_000_000_000,
            max_window_s: 18_446_744_073,
        })
    );
    assert_eq!(
        limiter.default_policy(),
        Policy::fixed_window(5, 60).unwrap()
    );
}

#[test]
fn a_flood_of_distinct_keys_is_forgotten_as_it_goes_idle() {
    // 100,000 keys, ten new ones a second for 10,000 s; each idles out 3600 s
    // after its only request, so at the end exactly the last 3600 s of keys
    // (36,000) hold state, whatever the total.
    let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
    for i in 0..100_000u64 {
        limiter.request(&format!("flood-{i}"), i / 10);
    }
    // The last request was at 9999; keys from 6400 s on (64,000 onwards) are kept.
    assert_eq!(limiter.stats(9999).tracked_keys, 36_000);
    assert_eq!(limiter.stats(9999 + 3600).tracked_keys, 0);
    assert_eq!(limiter.stats(9999 + 3600).allowed, 100_000);
}

/// A configuration without tiers or exempt keys, counting seconds.
fn bare_config() -> LimiterConfig {
    LimiterConfig {
        policy_lists: Default::default(),
        tiers: Default::default(),
        exempt_keys: vec![],
        ..LimiterConfig::default()
    }
}

// Found by `properties_limiter.rs`: `reconfigure` kept the state of every
// key whose version was still some rule's, so these keys kept state that was
// not their own, against `Stats::tracked_keys` ("never an exempt one") and
// `reconfigure` ("keys whose rule changed start afresh").

#[test]
fn a_key_made_exempt_holds_no_state() {
    let mut config = bare_config();
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    limiter.request("k", 0);
    assert_eq!(limiter.stats(0).tracked_keys, 1);
    config.exempt_keys = vec!["k".to_owned()];
    limiter.reconfigure(&config).unwrap();
    assert_eq!(limiter.stats(0).tracked_keys, 0);
    assert!(!limiter.reset("k", 0));
}

#[test]
fn a_key_whose_tier_comes_back_holds_no_state_of_the_default_policy() {
    let mut config = bare_config();
    config
        .tiers
        .insert("a".to_owned(), Policy::fixed_window(3, 60).unwrap());
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    limiter.assign_tier("k", "a").unwrap();
    // Tier a removed: k falls back to the default policy and uses it.
    config.tiers.clear();
    limiter.reconfigure(&config).unwrap();
    assert_eq!(limiter.request("k", 0).remaining, Some(4));
    // Tier a back (a new rule): k is on it again, with no state yet.
    config
        .tiers
        .insert("a".to_owned(), Policy::fixed_window(3, 60).unwrap());
    limiter.reconfigure(&config).unwrap();
    assert_eq!(limiter.inspect("k", 0), None);
    assert_eq!(limiter.stats(0).tracked_keys, 0);
    assert!(!limiter.reset("k", 0));
}
