//! `tollgate serve` end to end, its limits: plans, tiers, exempt keys, route
//! budgets (all or nothing with the plan), keys and their refusals. A real
//! upstream on 127.0.0.1, the gateway in process on a manual clock, a real
//! HTTP client. Expected values by hand.

use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config, header, plans};
use tollgate_test_support::loopback::Upstream;

#[tokio::test]
async fn plan_limits_and_their_headers_are_exact() {
    let upstream = Upstream::start().await;
    // At 120 s: the fixed window [120, 180) has just begun.
    let gateway = Gateway::start(&plans(&upstream, ""), 120).await;
    let first = gateway.get("/a", "sk_free").await;
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "ratelimit-policy").as_deref(),
        Some("\"default\";q=5;w=60")
    );
    assert_eq!(
        header(&first, "ratelimit").as_deref(),
        Some("\"default\";r=4;t=60")
    );
    assert_eq!(header(&first, "x-ratelimit-limit").as_deref(), Some("5"));
    assert_eq!(
        header(&first, "x-ratelimit-remaining").as_deref(),
        Some("4")
    );
    assert_eq!(header(&first, "x-ratelimit-reset").as_deref(), Some("60"));
    assert_eq!(first.text().await.unwrap(), "upstream");
    for _ in 0..4 {
        assert_eq!(gateway.status("/a", "sk_free").await, 200);
    }
    gateway.clock.advance_by("30s").unwrap();
    let refused = gateway.get("/a", "sk_free").await;
    assert_eq!(refused.status(), 429);
    // 30 s left in the window: Retry-After 30, never 0.
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("30"));
    assert_eq!(
        header(&refused, "ratelimit").as_deref(),
        Some("\"default\";r=0;t=30")
    );
    assert_eq!(
        header(&refused, "x-ratelimit-remaining").as_deref(),
        Some("0")
    );
    assert_eq!(
        header(&refused, "content-type").as_deref(),
        Some("application/problem+json")
    );
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        (problem["status"].clone(), problem["retry_after"].clone()),
        (json!(429), json!(30))
    );
    assert_eq!(
        upstream.requests(),
        5,
        "a refused request never reaches the upstream"
    );
    // The next window: a fresh budget.
    gateway.clock.advance_by("30s").unwrap();
    assert_eq!(gateway.status("/a", "sk_free").await, 200);
}

#[tokio::test]
async fn tiers_set_through_the_admin_api_apply_at_once() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let assigned = gateway
        .admin(
            Method::POST,
            "/admin/tier",
            Some(json!({"key": "sk_pro", "tier": "pro"})),
        )
        .await;
    assert_eq!(assigned.status(), 200);
    for remaining in (0..20).rev() {
        let response = gateway.get("/", "sk_pro").await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            Some(remaining.to_string())
        );
    }
    let refused = gateway.get("/", "sk_pro").await;
    assert_eq!(refused.status(), 429);
    // All 20 were logged at 0 s: the oldest stops counting at 60 s.
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("60"));
    assert_eq!(
        header(&refused, "ratelimit-policy").as_deref(),
        Some("\"pro\";q=20;w=60")
    );
    // Reset gives the budget back; inspect reads it without using any.
    let reset = gateway
        .admin(Method::POST, "/admin/reset", Some(json!({"key": "sk_pro"})))
        .await;
    assert_eq!(
        reset.json::<serde_json::Value>().await.unwrap(),
        json!({"had_state": true})
    );
    assert_eq!(gateway.status("/", "sk_pro").await, 200);
    for _ in 0..2 {
        let report: serde_json::Value = gateway
            .admin(
                Method::POST,
                "/admin/inspect",
                Some(json!({"key": "sk_pro"})),
            )
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(report["tier"], "pro");
        assert_eq!(report["remaining"], 19);
        assert_eq!(report["tracked"], true);
    }
    // The default policy replaced: 2 per 60 s for keys on it, at once.
    let replaced = gateway
        .admin(
            Method::PUT,
            "/admin/policy",
            Some(json!({"algorithm": "token_bucket", "limit": 2, "window_s": 60})),
        )
        .await;
    assert_eq!(
        replaced.json::<serde_json::Value>().await.unwrap(),
        json!({"algorithm": "token_bucket", "limit": 2, "window_s": 60, "burst": 2})
    );
    assert_eq!(gateway.status("/", "sk_new").await, 200);
    assert_eq!(gateway.status("/", "sk_new").await, 200);
    assert_eq!(gateway.status("/", "sk_new").await, 429);
    let stats: serde_json::Value = gateway
        .admin(Method::GET, "/admin/stats", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats,
        json!({"tracked_keys": 2, "allowed": 23, "rejected": 2})
    );
}

#[tokio::test]
async fn exempt_keys_are_never_limited() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    for _ in 0..50 {
        let response = gateway.get("/", "sk_internal").await;
        assert_eq!(response.status(), 200);
        assert!(header(&response, "ratelimit").is_none());
    }
    assert_eq!(upstream.requests(), 50);
}

#[tokio::test]
async fn requests_without_a_bearer_key_get_401_and_never_reach_the_upstream() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let url = gateway.url("/");
    let cases = [
        None,
        Some(("authorization", "Basic dXNlcjpwYXNz")),
        Some(("authorization", "Bearer")),
        Some(("authorization", "Bearer    ")),
        Some(("authorization", "Token sk_a")),
        Some(("x-api-key", "   ")),
    ];
    for case in cases {
        let mut request = gateway.client.get(&url);
        if let Some((name, value)) = case {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{case:?}");
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
    }
    assert_eq!(upstream.requests(), 0);
    // X-API-Key and any-case Bearer are keys.
    let by_header = gateway
        .client
        .get(&url)
        .header("x-api-key", "sk_a")
        .send()
        .await
        .unwrap();
    assert_eq!(by_header.status(), 200);
    let lower = gateway
        .client
        .get(&url)
        .header("authorization", "bearer sk_a")
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&lower, "x-ratelimit-remaining").as_deref(),
        Some("3")
    );
}

#[tokio::test]
async fn a_route_budget_and_the_plan_are_all_or_nothing() {
    let upstream = Upstream::start().await;
    // The route: 2 per minute per API key, bursts of 2.
    let route = format!(
        "[[routes]]\nname = \"orders\"\nprefix = \"/orders\"\nupstream = \"http://{}\"\nrpm = 2\nburst = 2\n",
        upstream.address
    );
    let gateway = Gateway::start(&plans(&upstream, &route), 0).await;
    let first = gateway.get("/orders", "sk_a").await;
    assert_eq!(
        header(&first, "ratelimit-policy").as_deref(),
        Some("\"default\";q=5;w=60, \"orders\";q=2;w=60")
    );
    assert_eq!(
        header(&first, "ratelimit").as_deref(),
        Some("\"default\";r=4;t=60, \"orders\";r=1;t=30")
    );
    // The tightest is the route: 1 left, whole again in 30 s.
    assert_eq!(header(&first, "x-ratelimit-limit").as_deref(), Some("2"));
    assert_eq!(
        header(&first, "x-ratelimit-remaining").as_deref(),
        Some("1")
    );
    assert_eq!(gateway.status("/orders", "sk_a").await, 200);
    let refused = gateway.get("/orders", "sk_a").await;
    assert_eq!(refused.status(), 429);
    // One token every 30 s.
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("30"));
    // The plan paid only for the two that passed: 3 left.
    let report: serde_json::Value = gateway
        .admin(Method::POST, "/admin/inspect", Some(json!({"key": "sk_a"})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(report["remaining"], 3);
    // Other paths are on the catch-all route: the plan alone.
    assert_eq!(
        header(
            &gateway.get("/other", "sk_a").await,
            "x-ratelimit-remaining"
        )
        .as_deref(),
        Some("2")
    );
}

#[tokio::test]
async fn a_hundred_clients_at_once_on_one_key_with_limit_20_get_exactly_20() {
    let upstream = Upstream::start().await;
    let toml = config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 20\nwindow_s = 60\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    let gateway = std::sync::Arc::new(Gateway::start(&toml, 0).await);
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(100));
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let gateway = std::sync::Arc::clone(&gateway);
            let barrier = std::sync::Arc::clone(&barrier);
            tokio::spawn(async move {
                // Each client its own connection.
                let client = reqwest::Client::new();
                barrier.wait().await;
                client
                    .get(gateway.url("/"))
                    .header("authorization", "Bearer sk_hot")
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut passed = 0;
    for client in clients {
        if client.await.unwrap() == 200 {
            passed += 1;
        }
    }
    assert_eq!(passed, 20);
    assert_eq!(upstream.requests(), 20);
}

#[tokio::test]
async fn an_api_key_over_256_bytes_is_refused() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    assert_eq!(gateway.status("/", &"k".repeat(256)).await, 200);
    assert_eq!(gateway.status("/", &"k".repeat(257)).await, 401);
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test]
async fn route_budgets_keyed_by_a_header_or_by_tenant() {
    let upstream = Upstream::start().await;
    // Plans of 100 per minute, out of the way; two tenant keys and one without.
    let toml = config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow_s = 60\n\
         [tenants]\nacme = [\"sk_a\", \"sk_b\"]\n\
         [[routes]]\nname = \"search\"\nprefix = \"/search\"\nupstream = \"http://{0}\"\n\
         rpm = 2\nkey = \"header:X-Client-Id\"\n\
         [[routes]]\nname = \"team-orders\"\nprefix = \"/orders\"\nupstream = \"http://{0}\"\n\
         rpm = 3\nkey = \"tenant\"\n",
        upstream.address
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let search = |key: &'static str, client: Option<&'static str>| {
        let mut request = gateway
            .client
            .get(gateway.url("/search"))
            .header("authorization", format!("Bearer {key}"));
        if let Some(client) = client {
            request = request.header("x-client-id", client);
        }
        request.send()
    };
    // /search: 2 per minute per X-Client-Id, whatever the API key.
    assert_eq!(search("sk_a", Some("c1")).await.unwrap().status(), 200);
    assert_eq!(search("sk_c", Some("c1")).await.unwrap().status(), 200);
    let refused = search("sk_b", Some("c1")).await.unwrap();
    assert_eq!(refused.status(), 429);
    // One token every 30 s.
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("30"));
    assert_eq!(search("sk_a", Some("c2")).await.unwrap().status(), 200);
    for client in [None, Some(""), Some("   "), Some("c 1")] {
        let missing = search("sk_a", client).await.unwrap();
        assert_eq!(missing.status(), 401, "{client:?}");
        assert_eq!(
            header(&missing, "content-type").as_deref(),
            Some("application/problem+json")
        );
        let body: serde_json::Value = missing.json().await.unwrap();
        assert_eq!(
            body["detail"],
            "search is rate limited per x-client-id header, and this request has no usable one \
             (exactly one, of 1 to 256 visible ASCII characters)"
        );
    }
    let too_long = "c".repeat(257);
    let request = gateway
        .client
        .get(gateway.url("/search"))
        .header("authorization", "Bearer sk_a")
        .header("x-client-id", &too_long);
    assert_eq!(request.send().await.unwrap().status(), 401);
    // Sent twice (a client's own beside a proxy's): neither is trusted.
    let request = gateway
        .client
        .get(gateway.url("/search"))
        .header("authorization", "Bearer sk_a")
        .header("x-client-id", "c3")
        .header("x-client-id", "c4");
    assert_eq!(request.send().await.unwrap().status(), 401);
    // /orders (team-orders): 3 per minute per tenant; a key without a tenant gets 401.
    for key in ["sk_a", "sk_b", "sk_a"] {
        assert_eq!(gateway.status("/orders", key).await, 200, "{key}");
    }
    assert_eq!(gateway.status("/orders", "sk_b").await, 429);
    let untenanted = gateway.get("/orders", "sk_c").await;
    assert_eq!(untenanted.status(), 401);
    let body: serde_json::Value = untenanted.json().await.unwrap();
    assert_eq!(
        body["detail"],
        "team-orders is rate limited per tenant, and this API key has no tenant"
    );
    // Only the admitted requests reached the upstream: 3 searches, 3 orders.
    assert_eq!(upstream.requests(), 6);
    // One refusal each (route names no other test of this process has).
    for (route, kind) in [("search", "custom"), ("team-orders", "tenant")] {
        let labels = [("plugin", "tollgate"), ("route", route), ("key_kind", kind)];
        assert_eq!(
            gateway
                .route_sample("api_rate_limit_exceeded_total", &labels)
                .await,
            Some(1.0),
            "{route}"
        );
    }
}

#[tokio::test]
async fn two_credentials_naming_different_keys_get_400_and_use_no_budget() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let url = gateway.url("/");
    let cases: [&[(&str, &str)]; 3] = [
        &[
            ("authorization", "Bearer sk_a"),
            ("authorization", "Bearer sk_b"),
        ],
        &[("x-api-key", "sk_a"), ("x-api-key", "sk_b")],
        &[("authorization", "Bearer sk_a"), ("x-api-key", "sk_b")],
    ];
    for lines in cases {
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in lines {
            headers.append(*name, value.parse().unwrap());
        }
        let response = gateway
            .client
            .get(&url)
            .headers(headers)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{lines:?}");
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
    }
    assert_eq!(upstream.requests(), 0);
    // Neither key was charged: each has its whole budget of 5.
    for key in ["sk_a", "sk_b"] {
        let response = gateway.get("/", key).await;
        assert_eq!(
            header(&response, "x-ratelimit-remaining").as_deref(),
            Some("4"),
            "{key}"
        );
    }
    // The same key in both headers is one credential.
    let same = gateway
        .client
        .get(&url)
        .header("authorization", "Bearer sk_c")
        .header("x-api-key", "sk_c")
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), 200);
    assert_eq!(upstream.requests(), 3);
}
