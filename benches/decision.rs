//! The cost of one decision, per algorithm, against the `governor` crate's keyed
//! limiter with the same quota (1000 per second) in the same group: on a hot key
//! and over 1M distinct keys, on one thread and on two; and a batch of 1 unit
//! against a batch of 10^15 units.
//!
//! Run: `cargo bench --bench decision`.

use std::hint::black_box;
use std::num::{NonZeroU32, NonZeroU64};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tollgate_core::{Clock, Limiter, LimiterConfig, Policy, Resolution, SystemClock};

const DISTINCT_KEYS: usize = 1_000_000;

/// 1000 units per second, the quota of every limiter here.
fn policies() -> [(&'static str, Policy); 3] {
    [
        ("fixed_window", Policy::fixed_window(1000, 1).unwrap()),
        ("sliding_log", Policy::sliding_log(1000, 1).unwrap()),
        ("token_bucket", Policy::token_bucket(1000, 1, 1000).unwrap()),
    ]
}

fn tollgate(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        max_tracked_keys: 2 * DISTINCT_KEYS,
        ..LimiterConfig::default()
    };
    Limiter::new(&config, Resolution::Nanoseconds).unwrap()
}

fn governor() -> DefaultKeyedRateLimiter<String> {
    RateLimiter::keyed(Quota::per_second(NonZeroU32::new(1000).unwrap()))
}

fn keys() -> Vec<String> {
    (0..DISTINCT_KEYS)
        .map(|i| format!("sk_live_{i:08}"))
        .collect()
}

/// Runs `decide(i)` for `iterations` in total, split over `threads` threads, and
/// returns the wall time. One thread runs on the calling thread.
fn on_threads(threads: usize, iterations: u64, decide: &(dyn Fn(usize) + Sync)) -> Duration {
    let per_thread = iterations.div_ceil(threads as u64) as usize;
    if threads == 1 {
        let start = Instant::now();
        for i in 0..per_thread {
            decide(i);
        }
        return start.elapsed();
    }
    let start = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..threads {
            scope.spawn(move || {
                for i in 0..per_thread {
                    decide(thread * per_thread + i);
                }
            });
        }
    });
    start.elapsed()
}

fn bench_pair(
    group: &mut BenchmarkGroup<'_, WallTime>,
    threads: usize,
    tollgate_decide: &(dyn Fn(usize) + Sync),
    governor_decide: &(dyn Fn(usize) + Sync),
    algorithm: &str,
) {
    group.bench_function(
        format!("tollgate/{algorithm}/{threads}_threads"),
        |bencher| {
            bencher.iter_custom(|iterations| on_threads(threads, iterations, tollgate_decide));
        },
    );
    if algorithm == "token_bucket" {
        // governor has one algorithm (GCRA, a token bucket): measured once per group.
        group.bench_function(format!("governor/gcra/{threads}_threads"), |bencher| {
            bencher.iter_custom(|iterations| on_threads(threads, iterations, governor_decide));
        });
    }
}

fn hot_key(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("hot_key");
    let clock = SystemClock::new();
    let limiter = governor();
    let hot = "sk_live_hot".to_owned();
    for threads in [1, 2] {
        for (algorithm, policy) in policies() {
            let gateway = tollgate(policy);
            bench_pair(
                &mut group,
                threads,
                &|_| {
                    black_box(gateway.request(black_box(&hot), clock.now_nanos()));
                },
                &|_| {
                    let _ = black_box(limiter.check_key(black_box(&hot)));
                },
                algorithm,
            );
        }
    }
    group.finish();
}

fn distinct_keys(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("distinct_keys_1m");
    group.sample_size(20);
    let keys = keys();
    let clock = SystemClock::new();
    let limiter = governor();
    for key in &keys {
        let _ = limiter.check_key(key);
    }
    let next = AtomicUsize::new(0);
    for threads in [1, 2] {
        for (algorithm, policy) in policies() {
            let gateway = tollgate(policy);
            for key in &keys {
                gateway.request(key, clock.now_nanos());
            }
            bench_pair(
                &mut group,
                threads,
                &|i| {
                    let key = &keys[i % DISTINCT_KEYS];
                    black_box(gateway.request(key, clock.now_nanos()));
                },
                &|_| {
                    let key = &keys[next.fetch_add(1, Ordering::Relaxed) % DISTINCT_KEYS];
                    let _ = black_box(limiter.check_key(key));
                },
                algorithm,
            );
        }
    }
    group.finish();
}

fn batch_size(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("batch_size");
    let clock = SystemClock::new();
    for (algorithm, policy) in policies() {
        let gateway = tollgate(policy);
        for units in [1u64, 1_000_000_000_000_000] {
            let units = NonZeroU64::new(units).unwrap();
            group.bench_function(format!("{algorithm}/{units}_units"), |bencher| {
                bencher.iter(|| {
                    black_box(gateway.request_batch(
                        "sk_live_hot",
                        clock.now_nanos(),
                        black_box(units),
                    ))
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, hot_key, distinct_keys, batch_size);
criterion_main!(benches);
