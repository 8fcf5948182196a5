//! One hot key's decisions, many times, for callgrind: tollgate's
//! [`Limiter::request`] under each algorithm, or `governor`'s keyed limiter,
//! with the quota and key of `benches/decision.rs`'s hot-key group (1000 a
//! second, `sk_live_hot`, the clock read on every decision, as there).
//! `bench/decision_cost.sh` runs it under
//! `valgrind --tool=callgrind --toggle-collect=decision_cost::measured`, so
//! only the measured decisions count, not the set-up or the warm-up.
//!
//! Run: `cargo run --release -p tollgate-core --example decision_cost -- MODE DECISIONS`,
//! MODE one of `fixed_window`, `sliding_log`, `token_bucket`, `governor`.

use std::hint::black_box;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tollgate_core::{Clock, Limiter, LimiterConfig, Policy, Resolution, SystemClock};

const HOT_KEY: &str = "sk_live_hot";

/// `count` decisions of the hot key by `decide`.
#[inline(never)]
fn measured(decide: &dyn Fn(), count: u64) {
    for _ in 0..count {
        decide();
    }
}

/// A thousand decisions to warm `decide` (the key's state, the caches), not
/// counted, then `count` counted.
fn run(decide: &dyn Fn(), count: u64) {
    for _ in 0..1_000 {
        decide();
    }
    measured(decide, count);
}

fn tollgate(policy: Policy) -> Limiter {
    let config = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        ..LimiterConfig::default()
    };
    Limiter::new(&config, Resolution::Nanoseconds).expect("a limiter")
}

/// Decides MODE's hot key DECISIONS times (default 100,000); an unknown
/// MODE prints the usage and exits with 2.
fn main() {
    let mut arguments = std::env::args().skip(1);
    let mode = arguments.next().unwrap_or_default();
    let count: u64 = arguments
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let hot = HOT_KEY.to_owned();
    let clock = SystemClock::new();
    let policy = match mode.as_str() {
        "fixed_window" => Policy::fixed_window(1000, 1),
        "sliding_log" => Policy::sliding_log(1000, 1),
        "token_bucket" => Policy::token_bucket(1000, 1, 1000),
        "governor" => {
            let limiter: DefaultKeyedRateLimiter<String> =
                RateLimiter::keyed(Quota::per_second(NonZeroU32::new(1000).expect("1000")));
            run(
                &|| {
                    let _ = black_box(limiter.check_key(black_box(&hot)));
                },
                count,
            );
            return;
        }
        _ => {
            eprintln!(
                "usage: decision_cost fixed_window|sliding_log|token_bucket|governor [DECISIONS]"
            );
            std::process::exit(2);
        }
    };
    let limiter = tollgate(policy.expect("a valid policy"));
    run(
        &|| {
            black_box(limiter.request(black_box(&hot), clock.now_nanos()));
        },
        count,
    );
}
