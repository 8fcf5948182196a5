//! Two axum services, each with its own Redis store on one Redis, share one
//! route budget: real HTTP on loopback, a real client. Needs `REDIS_URL`
//! (ignored without it, failing under `CI=true`, as the Redis store's own
//! tests do: this crate's build script sets the cfg `has_redis`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use tollgate_core::{Clock, LimiterConfig, ManualClock};
use tollgate_redis::RedisStore;
use tollgate_test_support::redis as redis_support;
use tollgate_tower::{Budget, HostLimits, KeySelector};

/// 2100-01-01T00:00:00Z in nanoseconds, far from today (a decision on
/// Redis's clock instead would show); the clock stands still, so no token
/// comes back during the test.
const START: u64 = 4_102_444_800_000_000_000;

/// An axum service on 127.0.0.1 whose `/orders` is limited per `x-client`
/// (5 at once, 1 a second back) in its own Redis store; its address.
async fn serve(url: &str, prefix: &str, clock: &Arc<dyn Clock>) -> SocketAddr {
    // Keys kept 600 s: Redis expires them on its own clock, not on the
    // standing one.
    let redis = redis_support::on_manual_clock(url, prefix, Arc::clone(clock));
    let store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    let limits = HostLimits::builder()
        .store(Arc::new(store))
        .build()
        .unwrap();
    let by_client = KeySelector::custom(|request| {
        let client = request.headers.get("x-client")?.to_str().ok()?;
        Some(client.to_owned())
    });
    let orders = limits
        .route("orders")
        .budget(Budget::new(60, 5).unwrap())
        .unwrap()
        .key(by_client);
    let app = Router::new().route("/orders", get(|| async { "orders" }).layer(orders));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn two_services_on_one_redis_share_one_route_budget() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("tower-two-services");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let servers = [
        serve(&url, &prefix, &clock).await,
        serve(&url, &prefix, &clock).await,
    ];
    let client = reqwest::Client::new();
    let mut seen = Vec::new();
    for index in 0..8 {
        let server = servers[index % 2];
        let response = client
            .get(format!("http://{server}/orders"))
            .header("x-client", "c1")
            .send()
            .await
            .unwrap();
        let state = response.headers()["ratelimit"].to_str().unwrap().to_owned();
        seen.push((response.status().as_u16(), state));
    }
    // Burst 5 across both services together: 4, 3, 2, 1, 0 left, then
    // refused with nothing left and the bucket full again 5 s later.
    let expected: Vec<(u16, String)> = [
        (200, "\"orders\";r=4;t=1"),
        (200, "\"orders\";r=3;t=2"),
        (200, "\"orders\";r=2;t=3"),
        (200, "\"orders\";r=1;t=4"),
        (200, "\"orders\";r=0;t=5"),
        (429, "\"orders\";r=0;t=5"),
        (429, "\"orders\";r=0;t=5"),
        (429, "\"orders\";r=0;t=5"),
    ]
    .into_iter()
    .map(|(status, state)| (status, state.to_owned()))
    .collect();
    assert_eq!(seen, expected);
    // Another key has a budget of its own.
    let response = client
        .get(format!("http://{}/orders", servers[1]))
        .header("x-client", "c2")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    redis_support::cleanup(&url, &prefix);
}
