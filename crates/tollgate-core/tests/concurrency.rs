//! Many threads on one limiter: together they never get more than the limit.

use std::num::NonZeroU64;

use tollgate_core::{Limiter, LimiterConfig, Policy, Resolution};

const THREADS: usize = 8;
const REQUESTS_PER_THREAD: usize = 2_000;

/// Runs `THREADS` threads, each making single requests for `key` at time 0
/// (and, with `batch`, batches of 3), and returns the units allowed in all.
fn allowed_by_all_threads(policy: Policy, keys: &[&str]) -> u64 {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    let three = NonZeroU64::new(3).unwrap();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let limiter = &limiter;
                scope.spawn(move || {
                    let mut allowed = 0;
                    for i in 0..REQUESTS_PER_THREAD {
                        let key = keys[(i + thread) % keys.len()];
                        allowed += if i % 2 == 0 {
                            limiter.request(key, 0).allowed
                        } else {
                            limiter.request_batch(key, 0, three).allowed
                        };
                    }
                    allowed
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap())
            .sum()
    })
}

#[test]
fn threads_on_one_key_never_get_more_than_the_limit() {
    let policies = [
        Policy::fixed_window(1000, 60).unwrap(),
        Policy::sliding_log(1000, 60).unwrap(),
        Policy::token_bucket(1, 60, 1000).unwrap(),
    ];
    for policy in policies {
        // 8 threads x 2000 calls ask for 32,000 units; exactly 1000 fit.
        assert_eq!(allowed_by_all_threads(policy, &["hot"]), 1000, "{policy:?}");
    }
}

#[test]
fn threads_on_many_keys_get_exactly_each_limit() {
    let keys = ["a", "b", "c", "d", "e", "f", "g"];
    let allowed = allowed_by_all_threads(Policy::sliding_log(100, 60).unwrap(), &keys);
    assert_eq!(allowed, 7 * 100);
}
