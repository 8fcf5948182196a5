//! The services and the request the layer's cost is measured with, shared by
//! the criterion benchmark (`benches/layer.rs`) and the callgrind example
//! (`examples/layer_cost.rs`): one quota for both layers, 10^9 requests per
//! second with bursts of 10^9, keyed by the peer's IP, so every request
//! passes and what is measured is the cost of limiting.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use http::Request;
use tollgate_tower::{Budget, HostLimits, KeySelector};
use tower::Layer;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

/// The inner service: answers `ok` at once.
pub(crate) fn backend()
-> impl tower::Service<Request<Body>, Response = Response, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(|_request: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("ok")))
    })
}

/// The request every service is sent: no key, from one client address
/// (`ConnectInfo`, which both layers key by).
pub(crate) fn request() -> Request<Body> {
    let mut request = Request::new(Body::empty());
    let peer: SocketAddr = "192.0.2.7:5000".parse().expect("an address");
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// [`backend`] behind tollgate's route layer: a route budget of 10^9 a
/// second (60 * 10^9 a minute), burst 10^9, per client IP.
pub(crate) fn tollgate() -> impl tower::Service<Request<Body>> + Clone {
    let budget = Budget::new(60_000_000_000, 1_000_000_000).expect("a budget");
    HostLimits::new()
        .route("bench")
        .budget(budget)
        .expect("a route")
        .key(KeySelector::Ip)
        .layer(backend())
}

/// [`backend`] behind `tower_governor`: one request a nanosecond, burst
/// 10^9, per client IP, without its headers.
pub(crate) fn tower_governor() -> impl tower::Service<Request<Body>> + Clone {
    let config = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .finish()
        .expect("a quota");
    GovernorLayer::new(config).layer(backend())
}

/// The same with its `X-RateLimit-*` headers (`use_headers`).
pub(crate) fn tower_governor_with_headers() -> impl tower::Service<Request<Body>> + Clone {
    let config = GovernorConfigBuilder::default()
        .period(Duration::from_nanos(1))
        .burst_size(1_000_000_000)
        .use_headers()
        .finish()
        .expect("a quota");
    GovernorLayer::new(config).layer(backend())
}
