//! `tollgate serve` end to end, operated: the admin API, reloads, metrics
//! and a configuration the Redis store cannot hold. Expected values by hand.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config, header, plans};
use tollgate_test_support::loopback::Upstream;

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

/// A raw admin call: the body is sent as written (a `Value` cannot hold a
/// duplicated field).
async fn admin_raw(gateway: &Gateway, method: Method, path: &str, body: &str) -> reqwest::Response {
    gateway
        .client
        .request(method, gateway.admin_url(path))
        .header("authorization", "Bearer secret")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_field_given_twice_is_refused_by_every_admin_call_and_changes_nothing() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    // sk_a holds state (4 left) and sk_b is on no tier.
    assert_eq!(gateway.status("/", "sk_a").await, 200);
    let policies = [
        (
            r#"{"algorithm": "fixed_window", "limit": 10, "limit": 20, "window_s": 60}"#,
            "invalid policy: duplicate field `limit`",
        ),
        (
            r#"{"algorithm": "sliding_log", "algorithm": "fixed_window", "limit": 10, "window_s": 60}"#,
            "invalid policy: duplicate field `algorithm`",
        ),
        (
            r#"{"algorithm": "fixed_window", "limit": 10, "window_s": 60, "window_s": 60}"#,
            "invalid policy: duplicate field `window_s`",
        ),
        (
            r#"{"algorithm": "token_bucket", "limit": 10, "window_s": 60, "burst": 1, "burst": 2}"#,
            "invalid policy: duplicate field `burst`",
        ),
    ];
    let bodies = [
        (
            Method::POST,
            "/admin/tier",
            r#"{"key": "sk_b", "tier": "pro", "tier": "default"}"#,
            "duplicate field `tier`",
        ),
        (
            Method::POST,
            "/admin/tier",
            r#"{"key": "sk_b", "key": "sk_c", "tier": "pro"}"#,
            "duplicate field `key`",
        ),
        (
            Method::POST,
            "/admin/reset",
            r#"{"key": "sk_a", "key": "sk_a"}"#,
            "duplicate field `key`",
        ),
        (
            Method::POST,
            "/admin/inspect",
            r#"{"key": "sk_b", "key": "sk_a"}"#,
            "duplicate field `key`",
        ),
    ];
    let calls = policies
        .into_iter()
        .map(|(body, detail)| (Method::PUT, "/admin/policy", body, detail))
        .chain(bodies);
    for (method, path, body, detail) in calls {
        let response = admin_raw(&gateway, method, path, body).await;
        assert_eq!(response.status(), 400, "{path} {body}");
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
        let problem: serde_json::Value = response.json().await.unwrap();
        let text = problem["detail"].as_str().unwrap();
        assert!(text.contains(detail), "{path} {body}: {text}");
    }
    // Nothing changed: the default policy, sk_b's tier, sk_a's state.
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
    let inspect = |key: &'static str| {
        let gateway = &gateway;
        async move {
            let report: serde_json::Value = gateway
                .admin(Method::POST, "/admin/inspect", Some(json!({ "key": key })))
                .await
                .json()
                .await
                .unwrap();
            report
        }
    };
    let b = inspect("sk_b").await;
    assert_eq!(
        (&b["tier"], &b["tracked"]),
        (&json!("default"), &json!(false))
    );
    let a = inspect("sk_a").await;
    assert_eq!((&a["tracked"], &a["remaining"]), (&json!(true), &json!(4)));
    // The same bodies without the duplicate are accepted.
    let response = admin_raw(
        &gateway,
        Method::PUT,
        "/admin/policy",
        r#"{"algorithm": "fixed_window", "limit": 20, "window_s": 60}"#,
    )
    .await;
    assert_eq!(response.status(), 200);
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
    assert_eq!(
        error,
        format!(
            "{}: invalid configuration: line 1, column 1 (`limits.default_policy`): limit must \
             be an integer from 1 to 2^63-1, got 0",
            path.display()
        )
    );
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
    // "metered" is no other test's route: these count this gateway's only.
    for (outcome, count) in [("allowed", 1.0), ("rejected", 2.0)] {
        let labels = [
            ("outcome", outcome),
            ("tier", "default"),
            ("route", "metered"),
        ];
        assert_eq!(
            gateway
                .route_sample("tollgate_decisions_total", &labels)
                .await,
            Some(count),
            "{outcome}"
        );
    }
    let denials = [
        ("plugin", "tollgate"),
        ("route", "metered"),
        ("key_kind", "api_key"),
    ];
    assert_eq!(
        gateway
            .route_sample("api_rate_limit_exceeded_total", &denials)
            .await,
        Some(2.0)
    );
    // The decision time and the tracked keys have no route label: they are
    // the whole test process's, so only their presence (and at least this
    // gateway's three decisions) can be told.
    let samples = gateway.samples().await;
    let decisions = samples.value("tollgate_decision_seconds_count", &[]);
    assert!(decisions.is_some_and(|count| count >= 3.0), "{decisions:?}");
    assert!(samples.value("tollgate_tracked_keys", &[]).is_some());
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

#[tokio::test]
async fn a_method_an_admin_endpoint_does_not_take_gets_405_problem_json() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    for (method, path) in [
        (Method::DELETE, "/admin/policy"),
        (Method::GET, "/admin/tier"),
        (Method::POST, "/admin/stats"),
    ] {
        let response = gateway.admin(method.clone(), path, None).await;
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(
            body,
            json!({
                "type": "about:blank",
                "title": "Method Not Allowed",
                "status": 405,
                "detail": "this admin endpoint does not take that method",
            })
        );
    }
}

#[tokio::test]
async fn an_address_guessing_admin_tokens_is_held_off_with_429() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let call = |token: &'static str| {
        gateway
            .client
            .get(gateway.admin_url("/admin/stats"))
            .header("authorization", format!("Bearer {token}"))
            .send()
    };
    // 10 failed calls in a burst, then 10 a minute: one every 6 s.
    for _ in 0..10 {
        assert_eq!(call("guess").await.unwrap().status(), 401);
    }
    for token in ["guess", "secret"] {
        let held = call(token).await.unwrap();
        assert_eq!(held.status(), 429, "{token}");
        assert_eq!(header(&held, "retry-after").as_deref(), Some("6"));
    }
    gateway.clock.advance(Duration::from_secs(6));
    assert_eq!(call("secret").await.unwrap().status(), 200);
    // A right token uses none of the failed calls; the next guess is the
    // one call the 6 s gave back.
    assert_eq!(call("secret").await.unwrap().status(), 200);
    assert_eq!(call("guess").await.unwrap().status(), 401);
    assert_eq!(call("guess").await.unwrap().status(), 429);
}

#[tokio::test]
async fn a_store_url_that_is_not_redis_is_named_with_its_file_and_never_shown() {
    let toml = config("[store]\nurl = \"foo://user:s3cret@127.0.0.1:1\"\n");
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bad-url.toml");
    std::fs::write(&path, &toml).unwrap();
    let config = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let options = tollgate_gateway::ServeOptions::new(config, Some(path.clone()));
    let error = tollgate_gateway::start(options).await.err().unwrap();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: store.url (or --store) is not a Redis URL: expected \
             redis://[user:password@]host:port[/db], \
             redis-cluster://[user:password@]host:port[,host:port...] (rediss:// or \
             rediss-cluster:// for TLS) or \
             redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]",
            path.display()
        )
    );
}

#[test]
fn the_exposition_is_read_sample_by_sample() {
    let exposition = tollgate_test_support::exposition::Exposition::parse(
        "# TYPE hits counter\nhits{route=\"a\",kind=\"x\"} 10\nhits{kind=\"x\",route=\"b\"} 1\n\
         up 1 1700000000\nodd{v=\"q\\\"uote,d\"} 2\n",
    );
    // `} 1` is not `} 10`, and labels match as a set, in any order.
    assert_eq!(
        exposition.value("hits", &[("kind", "x"), ("route", "a")]),
        Some(10.0)
    );
    assert_eq!(
        exposition.value("hits", &[("route", "b"), ("kind", "x")]),
        Some(1.0)
    );
    assert_eq!(exposition.value("hits", &[("route", "a")]), None);
    assert_eq!(exposition.value("up", &[]), Some(1.0));
    assert_eq!(exposition.value("odd", &[("v", "q\"uote,d")]), Some(2.0));
    assert!(exposition.any_with("hits", "route", "b"));
    assert!(!exposition.any_with("hits", "route", "c"));
}
