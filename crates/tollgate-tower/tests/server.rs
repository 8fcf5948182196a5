//! A real axum server on 127.0.0.1 behind the layer, and a real HTTP client.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use tollgate_core::ManualClock;
use tollgate_tower::{Budget, HostLimits, KeySelector};

#[tokio::test]
async fn a_real_server_limits_a_real_client_by_ip() {
    let clock = ManualClock::new(0);
    let limits = HostLimits::builder().clock(clock.clone()).build().unwrap();
    let layer = limits
        .route("hello")
        .budget(Budget::new(60, 5).unwrap())
        .unwrap()
        .key(KeySelector::Ip);
    let app = Router::new().route("/hello", get(|| async { "hello" }).layer(layer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    let client = reqwest::Client::new();
    let url = format!("http://{address}/hello");
    // The clock stands still: after the k-th request k tokens are missing,
    // one comes back a second, so the bucket is full again in k s.
    for (remaining, full_in) in [(4, 1), (3, 2), (2, 3), (1, 4), (0, 5)] {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["ratelimit"],
            format!("\"hello\";r={remaining};t={full_in}").as_str()
        );
        assert_eq!(response.text().await.unwrap(), "hello");
    }
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let problem: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(problem["retry_after"], 1);
    clock.advance_by("1s").unwrap();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    server.abort();
}
