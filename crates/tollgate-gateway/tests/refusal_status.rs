//! The status of a refusal (`[refusal]`, a route's `refused_status`), over
//! real HTTP: 503 for the whole gateway (as nginx's `limit_req` answers),
//! 429 for tier `pro`, 403 for route `rs_strict`'s own budget; `Retry-After`
//! and the problem+json body, with the same status, whatever it is. The plans:
//! fixed windows of 2 per 60 s (default) and 3 per 60 s (`pro`); the clock at
//! the start of a minute, so every wait is 60 s.

use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{self, Gateway, header};
use tollgate_test_support::loopback::Upstream;

fn config(upstream: &Upstream) -> String {
    gateway::config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
         [limits.tiers.pro]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
         [refusal]\nstatus = 503\ntiers = {{ pro = 429 }}\n\
         [[routes]]\nname = \"rs_strict\"\nprefix = \"/strict\"\nupstream = \"http://{0}\"\n\
         rpm = 1\nrefused_status = 403\n\
         [[routes]]\nname = \"rs_all\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n",
        upstream.address
    ))
}

async fn refused(gateway: &Gateway, path: &str, key: &str, status: u16) {
    let response = gateway.get(path, key).await;
    assert_eq!(response.status(), status, "{path} {key}");
    assert_eq!(header(&response, "retry-after").as_deref(), Some("60"));
    assert_eq!(
        header(&response, "content-type").as_deref(),
        Some("application/problem+json")
    );
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], status);
    assert_eq!(body["retry_after"], 60);
}

#[tokio::test]
async fn a_refusal_has_the_status_its_limit_is_given() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&config(&upstream), 6_000_000_000).await;
    // The default plan: the gateway's 503.
    for _ in 0..2 {
        assert_eq!(gateway.status("/x", "sk_a").await, 200);
    }
    refused(&gateway, "/x", "sk_a", 503).await;
    // Tier pro: its own 429.
    let assigned = gateway
        .admin(
            Method::POST,
            "/admin/tier",
            Some(json!({"key": "sk_pro", "tier": "pro"})),
        )
        .await;
    assert_eq!(assigned.status(), 200);
    for _ in 0..3 {
        assert_eq!(gateway.status("/x", "sk_pro").await, 200);
    }
    refused(&gateway, "/x", "sk_pro", 429).await;
    // The route's own budget (1 a minute): its 403; its plan has room left.
    assert_eq!(gateway.status("/strict/y", "sk_b").await, 200);
    refused(&gateway, "/strict/y", "sk_b", 403).await;
    // 2 + 3 + 1 requests reached the upstream.
    assert_eq!(upstream.requests(), 6);
}

#[test]
fn a_status_outside_400_to_599_is_refused_at_load() {
    let error = tollgate_gateway::ServeConfig::from_toml_str(
        "[[routes]]\nname = \"r\"\nprefix = \"/\"\nupstream = \"http://127.0.0.1:1\"\n\
         rpm = 1\nrefused_status = 302\n",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "routes.r.refused_status must be a status from 400 to 599, got 302"
    );
}
