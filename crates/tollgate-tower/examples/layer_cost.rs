//! One request shape through one service, many times, for callgrind: the
//! bare service, tollgate's route layer, or `tower_governor` with or without
//! its headers, built as `benches/layer.rs` builds them (every request
//! passes). `bench/layer_cost.sh` runs it under
//! `valgrind --tool=callgrind --toggle-collect=layer_cost::measured`, so
//! only the measured requests count, not the set-up or the warm-up.
//!
//! Run: `cargo run --release -p tollgate-tower --example layer_cost -- MODE REQUESTS`,
//! MODE one of `bare`, `tollgate`, `tower_governor`, `tower_governor_with_headers`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use http::Request;
use tollgate_tower::{Budget, HostLimits, KeySelector};
use tower::{Layer, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

/// The inner service: answers `ok` at once (the criterion benchmark's).
fn backend()
-> impl tower::Service<Request<Body>, Response = Response, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(|_request: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("ok")))
    })
}

/// The request every service is sent: no key, from one client address
/// (`ConnectInfo`, which both layers key by).
fn request() -> Request<Body> {
    let mut request = Request::new(Body::empty());
    let peer: SocketAddr = "192.0.2.7:5000".parse().expect("an address");
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// `count` requests through `service`, one at a time, each response dropped
/// unread, as the criterion benchmark does.
#[inline(never)]
fn measured<S>(runtime: &tokio::runtime::Runtime, service: &S, count: u64)
where
    S: tower::Service<Request<Body>> + Clone,
{
    runtime.block_on(async {
        for _ in 0..count {
            let response = service.clone().oneshot(request()).await;
            std::hint::black_box(response.is_ok());
        }
    });
}

/// A thousand requests through `service` to warm it (the key's state, the
/// allocator's caches), not counted, then `count` counted.
fn run<S>(service: S, count: u64)
where
    S: tower::Service<Request<Body>> + Clone,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for _ in 0..1_000 {
            let _ = service.clone().oneshot(request()).await;
        }
    });
    measured(&runtime, &service, count);
}

/// Builds the service MODE names and sends it REQUESTS requests (default
/// 100,000); an unknown MODE prints the usage and exits with 2.
fn main() {
    let mut arguments = std::env::args().skip(1);
    let mode = arguments.next().unwrap_or_default();
    let count: u64 = arguments
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let governor = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .finish()
        .expect("a quota");
    let governor_with_headers = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .use_headers()
        .finish()
        .expect("a quota");
    match mode.as_str() {
        "bare" => run(backend(), count),
        "tollgate" => {
            let limits = HostLimits::new();
            let budget = Budget::new(60_000_000_000, 1_000_000_000).expect("a budget");
            let service = limits
                .route("bench")
                .budget(budget)
                .expect("a route")
                .key(KeySelector::Ip)
                .layer(backend());
            run(service, count);
        }
        "tower_governor" => run(GovernorLayer::new(governor).layer(backend()), count),
        "tower_governor_with_headers" => run(
            GovernorLayer::new(governor_with_headers).layer(backend()),
            count,
        ),
        _ => {
            eprintln!(
                "usage: layer_cost MODE REQUESTS, MODE one of bare, tollgate, \
                 tower_governor, tower_governor_with_headers"
            );
            std::process::exit(2);
        }
    }
}
