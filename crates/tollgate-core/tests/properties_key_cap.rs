//! Property test of the key cap: many keys on a limiter that may hold only a
//! few of them, the cap lowered by `reconfigure` along the way. Which key a
//! new one pushes out is the least recently used of its shard (one of 64,
//! chosen by the limiter's own hash), so the test does not say which: it
//! holds each key to its model, or to a fresh one (a key pushed out starts
//! afresh), and the count of tracked keys to its bounds.

mod generators;
use tollgate_test_support::models;

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use generators::{MAX, clocks, specs, step, units};
use models::{Model, Outcome};
use proptest::prelude::*;
use tollgate_core::{Decision, Limiter, LimiterConfig};

#[derive(Clone, Debug)]
enum Op {
    Request {
        key: usize,
        units: u64,
    },
    /// `reconfigure` with the same policy and this cap.
    Cap(usize),
}

fn ops(keys: usize) -> impl Strategy<Value = Vec<(Op, generators::Step)>> {
    let op = prop_oneof![
        12 => (0..keys, units()).prop_map(|(key, units)| Op::Request { key, units }),
        1 => (1usize..=6).prop_map(Op::Cap),
    ];
    prop::collection::vec((op, step()), 1..80)
}

fn nonzero(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_key_pushed_out_starts_afresh_and_the_count_keeps_to_the_cap(
        (clock, spec) in clocks().prop_flat_map(|clock| (Just(clock), specs(clock))),
        cap in 1usize..=6,
        (keys, ops) in (1usize..=24).prop_flat_map(|keys| (Just(keys), ops(keys))),
        start in 0u64..=u64::MAX,
    ) {
        let Some(fresh) = spec.model(clock) else {
            return Ok(());
        };
        let mut config = LimiterConfig {
            policy_lists: Default::default(),
            default_policy: spec.policy(),
            tiers: Default::default(),
            exempt_keys: vec![],
            idle_eviction_s: MAX,
            max_tracked_keys: cap,
            tier_defaults: Default::default(),
        };
        let limiter = Limiter::new(&config, clock.resolution).unwrap();
        let names: Vec<String> = (0..keys).map(|key| format!("key-{key}")).collect();
        // The states each key may be in; a key never seen holds none.
        let mut candidates: BTreeMap<usize, Vec<Box<dyn Model>>> = BTreeMap::new();
        // Whether some key may have been pushed out: more keys were seen than
        // the cap allowed at some point.
        let mut pressure = false;
        let mut tracked: u64 = 0;
        // Time only goes forward here (eviction of idle keys is out of the
        // way), within one idle eviction span.
        let idle = clock.ticks(MAX).unwrap_or(u64::MAX);
        let (lo, hi) = (start.min(u64::MAX - (idle - 1)), start.min(u64::MAX - (idle - 1)) + (idle - 1));
        let mut now = lo;
        for (op, step) in ops {
            now = step.apply(now, spec.window_ticks(clock), now, hi);
            match op {
                Op::Cap(new_cap) => {
                    config.max_tracked_keys = new_cap;
                    limiter.reconfigure(&config).unwrap();
                    // Least recently used keys are dropped until the count is
                    // within the new cap.
                    tracked = tracked.min(new_cap as u64);
                    prop_assert_eq!(limiter.stats(now).tracked_keys, tracked);
                    pressure |= candidates.len() > new_cap;
                }
                Op::Request { key, units } => {
                    let new = !candidates.contains_key(&key);
                    pressure |= new && candidates.len() + 1 > config.max_tracked_keys;
                    let decision: Decision = limiter.request_batch(&names[key], now, nonzero(units));
                    let got = Outcome {
                        allowed: decision.allowed,
                        rejected: decision.rejected,
                        remaining: decision.remaining.unwrap(),
                        retry_after: clock.ticks_of(decision.retry_after),
                        reset_after: clock.ticks_of(decision.reset_after),
                    };
                    let mut possible: Vec<Box<dyn Model>> = candidates
                        .get(&key)
                        .map(|states| states.iter().map(|state| state.boxed_clone()).collect())
                        .unwrap_or_default();
                    if new || pressure {
                        possible.push(fresh.boxed_clone());
                    }
                    let mut next: Vec<Box<dyn Model>> = Vec::new();
                    let mut seen: Vec<String> = Vec::new();
                    for mut state in possible {
                        if state.outcome(now, units) == got && !seen.contains(&state.state()) {
                            seen.push(state.state());
                            next.push(state);
                        }
                    }
                    prop_assert!(
                        !next.is_empty(),
                        "{:?} for {} units of {} at {}: neither its state nor a fresh one{}",
                        got, units, names[key], now,
                        if pressure { "" } else { " (no key was pushed out yet)" }
                    );
                    candidates.insert(key, next);
                    // The key just used holds state.
                    prop_assert!(limiter.inspect(&names[key], now).is_some());
                    // The count: one more for a key the limiter did not hold
                    // (a new key below the cap, or at the cap in a shard with
                    // no key to push out), never more than the keys seen.
                    let count = limiter.stats(now).tracked_keys;
                    let distinct = candidates.len() as u64;
                    let cap = config.max_tracked_keys as u64;
                    prop_assert!(count <= distinct && count <= cap + 64, "{} of {} keys, cap {}", count, distinct, cap);
                    prop_assert!((tracked..=tracked + 1).contains(&count), "{} after {}", count, tracked);
                    if new && tracked < cap {
                        prop_assert_eq!(count, tracked + 1, "a new key below the cap");
                    }
                    if !pressure {
                        prop_assert_eq!(count, distinct);
                    }
                    tracked = count;
                }
            }
        }
    }
}
