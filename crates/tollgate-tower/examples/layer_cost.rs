//! One request shape through one service, many times, for callgrind: the
//! bare service, tollgate's route layer, or `tower_governor` with or without
//! its headers, as `benches/layer.rs` builds them (`benches/layer_services`,
//! every request passes). `bench/layer_cost.sh` runs it under
//! `valgrind --tool=callgrind --toggle-collect=layer_cost::measured`, so
//! only the measured requests count, not the set-up or the warm-up.
//!
//! Run: `cargo run --release -p tollgate-tower --example layer_cost -- MODE REQUESTS`,
//! MODE one of `bare`, `tollgate`, `tower_governor`, `tower_governor_with_headers`.

#[path = "../benches/layer_services/mod.rs"]
mod layer_services;

use axum::body::Body;
use http::Request;
use layer_services::{backend, request, tollgate, tower_governor, tower_governor_with_headers};
use tower::ServiceExt;

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
    match mode.as_str() {
        "bare" => run(backend(), count),
        "tollgate" => run(tollgate(), count),
        "tower_governor" => run(tower_governor(), count),
        "tower_governor_with_headers" => run(tower_governor_with_headers(), count),
        _ => {
            eprintln!(
                "usage: layer_cost MODE REQUESTS, MODE one of bare, tollgate, \
                 tower_governor, tower_governor_with_headers"
            );
            std::process::exit(2);
        }
    }
}
