//! CORS preflights (`preflight = "pass"` on a route), over real HTTP: an
//! `OPTIONS` request with `Access-Control-Request-Method` reaches the upstream
//! without an API key and uses no budget; any other request is limited as
//! before. The plan: a fixed window of 2 per 60 s.

use tollgate_test_support::gateway::{self, Gateway};
use tollgate_test_support::loopback::Upstream;

fn config(upstream: &Upstream) -> String {
    gateway::config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
         [[routes]]\nname = \"pf_open\"\nprefix = \"/open\"\nupstream = \"http://{0}\"\n\
         preflight = \"pass\"\n\
         [[routes]]\nname = \"pf_closed\"\nprefix = \"/closed\"\nupstream = \"http://{0}\"\n",
        upstream.address
    ))
}

#[tokio::test]
async fn a_preflight_passes_without_a_key_where_the_route_says_so() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&config(&upstream), 6_000_000_000).await;
    let preflight = |path: &str, key: Option<&str>| {
        let mut request = gateway
            .client
            .request(reqwest::Method::OPTIONS, gateway.url(path))
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST");
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        request.send()
    };
    // Five preflights without a key, and five with one: all reach the
    // upstream, none is counted.
    for _ in 0..5 {
        let response = preflight("/open/orders", None).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "upstream");
        assert_eq!(
            preflight("/open/orders", Some("sk_pf"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert_eq!(upstream.requests(), 10);
    // The key still has its whole budget: 2 of 2, then 429.
    assert_eq!(gateway.status("/open/orders", "sk_pf").await, 200);
    assert_eq!(gateway.status("/open/orders", "sk_pf").await, 200);
    assert_eq!(gateway.status("/open/orders", "sk_pf").await, 429);
    // OPTIONS without Access-Control-Request-Method is not a preflight.
    let plain_options = gateway
        .client
        .request(reqwest::Method::OPTIONS, gateway.url("/open/orders"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain_options.status(), 401);
    // A route without the setting limits preflights as any request.
    assert_eq!(preflight("/closed/x", None).await.unwrap().status(), 401);
    assert_eq!(upstream.requests(), 12);
}
