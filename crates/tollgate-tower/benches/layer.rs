//! The layer's cost per request: the bare service, the same service behind
//! tollgate's route layer, and behind `tower_governor`, with the same quota
//! (10^9 requests per second, bursts of 10^9, keyed by peer IP, so every request
//! passes and the run measures the cost of limiting), in one group.
//!
//! Run: `cargo bench -p tollgate-tower --bench layer`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use tollgate_tower::{Budget, HostLimits, KeySelector};
use tower::{Layer, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

fn backend()
-> impl tower::Service<Request<Body>, Response = Response, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(|_request: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("ok")))
    })
}

fn request() -> Request<Body> {
    let mut request = Request::new(Body::empty());
    let peer: SocketAddr = "192.0.2.7:5000".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

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

    let limits = HostLimits::new();
    let budget = Budget::new(60_000_000_000, 1_000_000_000).unwrap();
    let tollgate = limits
        .route("bench")
        .budget(budget)
        .unwrap()
        .key(KeySelector::Ip)
        .layer(backend());
    group.bench_function("tollgate", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| tollgate.clone().oneshot(request()));
    });

    let config = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .finish()
        .unwrap();
    let governor = GovernorLayer::new(config).layer(backend());
    group.bench_function("tower_governor", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| governor.clone().oneshot(request()));
    });

    let config = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .use_headers()
        .finish()
        .unwrap();
    let governor_headers = GovernorLayer::new(config).layer(backend());
    group.bench_function("tower_governor_with_headers", |bencher| {
        bencher
            .to_async(&runtime)
            .iter(|| governor_headers.clone().oneshot(request()));
    });
    group.finish();
}

criterion_group!(benches, layer_cost);
criterion_main!(benches);
