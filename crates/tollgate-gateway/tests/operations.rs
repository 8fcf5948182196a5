//! `tollgate serve` end to end, operated: the admin API, reloads, metrics
//! and a configuration the Redis store cannot hold. Expected values by hand.

mod support;

use reqwest::Method;
use serde_json::json;
use support::{Gateway, Upstream, config, header, plans};

#[tokio::test]
async fn admin_calls_need_the_token_and_invalid_input_changes_nothing() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let url = gateway.admin_url("/admin/policy");
    for token in [
        None,
        Some("Bearer wrong"),
        Some("Bearer secretx"),
        Some("Basic secret"),
    ] {
        let mut request = gateway.client.get(&url);
        if let Some(token) = token {
            request = request.header("authorization", token);
        }
        assert_eq!(request.send().await.unwrap().status(), 401, "{token:?}");
    }
    let bad_inputs = [
        (
            Method::PUT,
            "/admin/policy",
            json!({"algorithm": "fixed_window", "limit": 0, "window_s": 60}),
        ),
        (Method::PUT, "/admin/policy", json!("fixed_window")),
        (
            Method::POST,
            "/admin/tier",
            json!({"key": "sk_a", "tier": "gold"}),
        ),
        (
            Method::POST,
            "/admin/tier",
            json!({"key": "  ", "tier": "pro"}),
        ),
        (Method::POST, "/admin/reset", json!({"keys": "sk_a"})),
        (Method::POST, "/admin/inspect", json!({})),
    ];
    for (method, path, body) in bad_inputs {
        let response = gateway.admin(method, path, Some(body.clone())).await;
        assert_eq!(response.status(), 400, "{path} {body}");
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
    }
    let policy: serde_json::Value = gateway
        .admin(Method::GET, "/admin/policy", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        policy,
        json!({"algorithm": "fixed_window", "limit": 5, "window_s": 60})
    );
    let report: serde_json::Value = gateway
        .admin(Method::POST, "/admin/inspect", Some(json!({"key": "sk_a"})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(report["tier"], "default");
    assert_eq!(report["remaining"], 5);
    assert_eq!(report["tracked"], false);
}

#[tokio::test]
async fn a_bad_config_on_reload_is_refused_and_the_old_one_stays() {
    let upstream = Upstream::start().await;
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("reload.toml");
    std::fs::write(&path, plans(&upstream, "")).unwrap();
    let config = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let gateway = Gateway::start_with(config, Some(path.clone()), 0).await;
    assert_eq!(gateway.status("/", "sk_a").await, 200);
    std::fs::write(
        &path,
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow_s = 60\n",
    )
    .unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.contains("limit must be"), "{error}");
    // Still serving under the old limits: 4 left.
    assert_eq!(
        header(&gateway.get("/", "sk_a").await, "x-ratelimit-remaining").as_deref(),
        Some("3")
    );
    // A good file takes effect: the same default policy keeps the key's state.
    std::fs::write(&path, plans(&upstream, "")).unwrap();
    gateway.running.reload().unwrap();
    assert_eq!(
        header(&gateway.get("/", "sk_a").await, "x-ratelimit-remaining").as_deref(),
        Some("2")
    );
}

#[tokio::test]
async fn metrics_count_decisions_by_outcome_tier_and_route() {
    let upstream = Upstream::start().await;
    let toml = config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
         [[routes]]\nname = \"metered\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    let gateway = Gateway::start(&toml, 0).await;
    assert_eq!(gateway.status("/", "sk_m").await, 200);
    assert_eq!(gateway.status("/", "sk_m").await, 429);
    assert_eq!(gateway.status("/", "sk_m").await, 429);
    let metrics = gateway.metrics().await;
    for line in [
        "tollgate_decisions_total{outcome=\"allowed\",tier=\"default\",route=\"metered\"} 1",
        "tollgate_decisions_total{outcome=\"rejected\",tier=\"default\",route=\"metered\"} 2",
        "api_rate_limit_exceeded_total{plugin=\"tollgate\",route=\"metered\",key_kind=\"api_key\"} 2",
    ] {
        assert!(
            metrics.lines().any(|metric| metric == line),
            "{line} missing from\n{metrics}"
        );
    }
    assert!(metrics.contains("tollgate_decision_seconds_bucket"));
    assert!(metrics.contains("tollgate_tracked_keys"));
    let health = gateway
        .client
        .get(gateway.admin_url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = gateway
        .client
        .get(gateway.admin_url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

#[tokio::test]
async fn a_policy_the_redis_store_cannot_hold_is_named_with_its_file() {
    // Nothing listens on port 1: the policy is refused before any connection.
    let toml = config(
        "[store]\nurl = \"redis://127.0.0.1:1\"\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
         [limits.tiers.gold]\nalgorithm = \"token_bucket\"\nlimit = 1\n\
         window_s = 1000000000\nburst = 1000000000\n",
    );
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("too-large.toml");
    std::fs::write(&path, &toml).unwrap();
    let config = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let options = tollgate_gateway::ServeOptions::new(config, Some(path.clone()));
    let error = tollgate_gateway::start(options).await.err().unwrap();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: invalid limits: the policy of tier gold: the Redis store computes exactly up to \
             2^52: burst x window_s in microseconds is larger",
            path.display()
        )
    );
}
