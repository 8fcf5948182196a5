//! The layer's cost per request: the bare service, the same service behind
//! tollgate's route layer, and behind `tower_governor`, with the same quota
//! (10^9 requests per second, bursts of 10^9, keyed by peer IP, so every request
//! passes and the run measures the cost of limiting), in one group.
//!
//! Run: `cargo bench -p tollgate-tower --bench layer`.

mod layer_services;

use criterion::{Criterion, criterion_group, criterion_main};
use layer_services::{backend, request, tollgate, tower_governor, tower_governor_with_headers};
use tower::ServiceExt;

fn layer_cost(criterion: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = criterion.benchmark_group("layer_per_request");

    let bare = backend();
    group.bench_function("bare_service", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| bare.clone().oneshot(request()));
    });

    let tollgate = tollgate();
    group.bench_function("tollgate", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| tollgate.clone().oneshot(request()));
    });

    let governor = tower_governor();
    group.bench_function("tower_governor", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| governor.clone().oneshot(request()));
    });

    let governor_headers = tower_governor_with_headers();
    group.bench_function("tower_governor_with_headers", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| governor_headers.clone().oneshot(request()));
    });
    group.finish();
}

criterion_group!(benches, layer_cost);
criterion_main!(benches);
