//! The cost of checking a key against a list of a million known keys
//! (`KnownKeys::contains`: one SHA-256 of the key and one table probe),
//! listed and not, beside one in-memory decision on a hot key (a token
//! bucket) in the same group, for the ratio.
//!
//! Run: `cargo bench --bench known_keys`.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tollgate_core::{KnownKeys, Limiter, LimiterConfig, Policy, Resolution};

const KEYS: usize = 1_000_000;

/// A million keys `sk_live_0000000` ... as they would be listed.
fn known() -> KnownKeys {
    let mut file = String::with_capacity(KEYS * 16);
    for index in 0..KEYS {
        writeln!(file, "sk_live_{index:07}").unwrap();
    }
    KnownKeys::parse(file.as_bytes()).unwrap()
}

fn bench(criterion: &mut Criterion) {
    let known = known();
    let limiter = Limiter::new(
        &LimiterConfig {
            policy_lists: Default::default(),
            default_policy: Policy::token_bucket(1000, 1, 1000).unwrap(),
            ..LimiterConfig::default()
        },
        Resolution::Nanoseconds,
    )
    .unwrap();
    let mut group = criterion.benchmark_group("known_keys");
    group.bench_function("contains/listed", |bench| {
        bench.iter(|| known.contains(black_box("sk_live_0421337")));
    });
    group.bench_function("contains/unlisted", |bench| {
        bench.iter(|| known.contains(black_box("sk_invented_42")));
    });
    // A decision at a time that moves, so the bucket never runs dry.
    let mut now = 0u64;
    group.bench_function("decision/token_bucket", |bench| {
        bench.iter(|| {
            now += 1_000_000;
            limiter.request(black_box("sk_live_0421337"), now)
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
