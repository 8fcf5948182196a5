//! Memory per key and memory given back after a flood (issue #13 item 11),
//! counted by a tracking allocator (`cap`) around the system's: every byte the
//! limiter holds on the heap, as a server's nanosecond limiter holds it.
//!
//! The bounds asserted are the ones `docs/CONFIG.md` ("Memory") documents.
//! One test function, so that no other test allocates while it counts.

use std::alloc::System;

use cap::Cap;
use tollgate_core::{Limiter, LimiterConfig, Policy, Resolution};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const KEYS: u64 = 100_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// The idle eviction of the configuration below, in seconds.
const IDLE_EVICTION_S: u64 = 3600;

/// Documented bytes per key of a fixed window or a token bucket, for a key of
/// up to 24 bytes (kept inline): an 80-byte entry and its control byte in a
/// table at least 7/16 full (2.29 x 81), and up to 4 records of 16 bytes in
/// the log of uses.
const BYTES_PER_KEY: usize = 250;
/// A sliding log's box (its run queue and count).
const SLIDING_LOG_BOX_BYTES: usize = 40;
/// Bytes of one run (units allowed at one tick) of a sliding log.
const RUN_BYTES: usize = 16;

/// The documented bound of a sliding log holding `runs` runs: its queue's
/// capacity is a power of two, at least 4 and less than twice the runs.
fn sliding_log_bound(runs: usize) -> usize {
    BYTES_PER_KEY + SLIDING_LOG_BOX_BYTES + RUN_BYTES * (2 * runs).max(4)
}

/// What 64 shards may keep once every key has gone: their emptied tables
/// and logs at their smallest.
const EMPTY_LIMITER_BYTES: usize = 64 * 1024;

fn limiter(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        default_policy: policy,
        tiers: Default::default(),
        exempt_keys: vec![],
        idle_eviction_s: IDLE_EVICTION_S,
        max_tracked_keys: 10_000_000,
        policy_lists: Default::default(),
        tier_defaults: Default::default(),
    };
    Limiter::new(&config, Resolution::Nanoseconds).expect("a valid configuration")
}

/// Floods `limiter` with `KEYS` keys of 13 bytes, each making `requests`
/// requests one millisecond apart, keys 10 ms apart; then returns the bytes
/// the flood holds per key and the bytes still held once every key is idle.
fn flood(limiter: &Limiter, requests: u64) -> (usize, usize) {
    let baseline = ALLOCATOR.allocated();
    let mut last = 0;
    let mut key = String::new();
    for index in 0..KEYS {
        key.clear();
        key.push_str(&format!("flood-{index:07}"));
        for request in 0..requests {
            last = index * 10_000_000 + request * 1_000_000;
            assert!(limiter.request(&key, last).is_allowed());
        }
    }
    drop(key);
    let held = ALLOCATOR.allocated().saturating_sub(baseline);
    let idle = last + IDLE_EVICTION_S * NANOS_PER_SECOND;
    assert_eq!(limiter.stats(idle).tracked_keys, 0);
    let left = ALLOCATOR.allocated().saturating_sub(baseline);
    (held / KEYS as usize, left)
}

#[test]
fn memory_per_key_is_bounded_and_given_back_after_a_flood() {
    let cases = [
        (
            "fixed window",
            Policy::fixed_window(10, 60).unwrap(),
            1,
            BYTES_PER_KEY,
        ),
        (
            "token bucket",
            Policy::token_bucket(10, 60, 10).unwrap(),
            1,
            BYTES_PER_KEY,
        ),
        (
            "sliding log, one run",
            Policy::sliding_log(10, 60).unwrap(),
            1,
            sliding_log_bound(1),
        ),
        (
            "sliding log, ten runs",
            Policy::sliding_log(10, 60).unwrap(),
            10,
            sliding_log_bound(10),
        ),
    ];
    for (name, policy, requests, bound) in cases {
        let limiter = limiter(policy);
        let (per_key, left) = flood(&limiter, requests);
        println!("{name}: {per_key} bytes per key, {left} bytes left after eviction");
        assert!(
            per_key <= bound,
            "{name}: {per_key} bytes per key, documented at most {bound}"
        );
        assert!(
            left <= EMPTY_LIMITER_BYTES,
            "{name}: {left} bytes still held after every key went idle"
        );
    }
}
