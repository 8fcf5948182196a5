//! `tollgate serve` end to end: a real upstream on 127.0.0.1, the gateway in
//! process on a manual clock, a real HTTP client. Expected values by hand.

mod serve;

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use serve::{Gateway, Upstream, config, header};

/// Plans: default fixed window 5 per 60 s, tier `pro` sliding log 20 per 60 s;
/// `sk_internal` exempt; every path to `upstream`.
fn plans(upstream: &Upstream, extra: &str) -> String {
    config(&format!(
        "[limits]\nexempt_keys = [\"sk_internal\"]\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [limits.tiers.pro]\nalgorithm = \"sliding_log\"\nlimit = 20\nwindow_s = 60\n\
         [[routes]]\nname = \"all\"\nprefix = \"/\"\nupstream = \"http://{}\"\n{extra}",
        upstream.address
    ))
}

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
async fn an_unreachable_upstream_gives_502_and_a_silent_one_504() {
    // A port with nothing behind it.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    // A server that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = silent.accept().await {
            held.push(connection);
        }
    });
    let toml = config(&format!(
        "[upstream]\ntimeout = \"100ms\"\n\
         [[routes]]\nprefix = \"/closed\"\nupstream = \"http://{closed}\"\n\
         [[routes]]\nprefix = \"/silent\"\nupstream = \"http://{silent_address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let unreachable = gateway.get("/closed", "sk_a").await;
    assert_eq!(unreachable.status(), 502);
    assert_eq!(
        header(&unreachable, "content-type").as_deref(),
        Some("application/problem+json")
    );
    let slow = gateway.get("/silent", "sk_a").await;
    assert_eq!(slow.status(), 504);
    // Limit headers are on these too: the requests were admitted.
    assert!(header(&slow, "ratelimit").is_some());
    // Unknown paths with routes configured: 404.
    assert_eq!(gateway.status("/nowhere", "sk_a").await, 404);
    // Each failure counted once, by route (named by prefix here: no other
    // test uses these).
    let metrics = gateway.metrics().await;
    for line in [
        "tollgate_upstream_failures_total{route=\"/closed\",failure=\"unreachable\"} 1",
        "tollgate_upstream_failures_total{route=\"/silent\",failure=\"timeout\"} 1",
    ] {
        assert!(
            metrics.lines().any(|metric| metric == line),
            "{line} missing from\n{metrics}"
        );
    }
}

#[tokio::test]
async fn bodies_stream_both_ways_without_being_buffered_whole() {
    use futures_util::StreamExt;
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let body = reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(receiver));
    sender.send(Ok(b"first chunk;".to_vec())).await.unwrap();
    let response = gateway
        .client
        .post(gateway.url("/echo"))
        .header("authorization", "Bearer sk_a")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut echoed = response.bytes_stream();
    // The first chunk comes back while the request body is still open: neither
    // the gateway nor the upstream waited for the whole body.
    let first = tokio::time::timeout(Duration::from_secs(10), echoed.next())
        .await
        .expect("the first chunk came back before the body ended")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"first chunk;");
    // A large second part, then the end.
    let large = vec![b'x'; 4 << 20];
    sender.send(Ok(large.clone())).await.unwrap();
    drop(sender);
    let mut rest = Vec::new();
    while let Some(chunk) = echoed.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, large);
}

#[tokio::test]
async fn hop_by_hop_headers_stop_at_the_gateway_and_the_client_is_forwarded() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let response = gateway
        .client
        .get(gateway.url("/headers?q=1"))
        .header("authorization", "Bearer sk_a")
        .header("connection", "x-private")
        .header("x-private", "1")
        .header("keep-alive", "timeout=5")
        .header("x-kept", "yes")
        .send()
        .await
        .unwrap();
    let seen: serde_json::Value = response.json().await.unwrap();
    let headers = &seen["headers"];
    assert_eq!(seen["path"], "/headers?q=1");
    assert!(headers.get("x-private").is_none());
    assert!(headers.get("keep-alive").is_none());
    assert_eq!(headers["x-kept"], "yes");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["authorization"], "Bearer sk_a");
    // `Host` names the upstream, `X-Forwarded-Host` what the client asked for.
    assert_eq!(headers["host"], upstream.address.to_string());
    let gateway_host = gateway.url("").trim_start_matches("http://").to_owned();
    assert_eq!(headers["x-forwarded-host"], gateway_host.as_str());
}

#[tokio::test]
async fn upstream_connections_outlive_client_connections_and_are_reopened_when_closed() {
    let upstream = Upstream::start().await;
    // One worker: every request below goes through its connections.
    let toml = plans(&upstream, "").replacen(
        "listen = \"127.0.0.1:0\"\n",
        "listen = \"127.0.0.1:0\"\nworkers = 1\n",
        1,
    );
    let gateway = Gateway::start(&toml, 0).await;
    // A new client connection for each of three requests, then two requests
    // on one kept-alive client connection; the exempt key is never limited.
    let one_shot = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for _ in 0..3 {
        let response = one_shot
            .get(gateway.url("/"))
            .header("authorization", "Bearer sk_internal")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "upstream");
    }
    for _ in 0..2 {
        assert_eq!(gateway.status("/", "sk_internal").await, 200);
    }
    assert_eq!(upstream.requests(), 5);
    assert_eq!(
        upstream.connections(),
        1,
        "five requests on three client connections, one upstream connection"
    );
    // The upstream closes its connection after this answer; the client's
    // connection stays open (`Connection` is hop-by-hop).
    let response = gateway.get("/close", "sk_internal").await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "connection").is_none());
    assert_eq!(response.text().await.unwrap(), "closing");
    // The next request goes over a new upstream connection.
    let response = gateway.get("/", "sk_internal").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "upstream");
    assert_eq!(upstream.requests(), 7);
    assert_eq!(upstream.connections(), 2);
}

#[tokio::test]
async fn a_bad_config_on_reload_is_refused_and_the_old_one_stays() {
    let upstream = Upstream::start().await;
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("reload.toml");
    std::fs::write(&path, plans(&upstream, "")).unwrap();
    let config = tollgate::serve::ServeConfig::from_file(&path).unwrap();
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
async fn other_spellings_of_a_path_land_on_the_same_route() {
    let upstream = Upstream::start().await;
    let routes = format!(
        "[[routes]]\nname = \"search\"\nprefix = \"/api/search\"\nupstream = \"http://{0}\"\nrpm = 2\nburst = 2\n\
         [[routes]]\nname = \"api\"\nprefix = \"/api\"\nupstream = \"http://{0}\"\n",
        upstream.address
    );
    let gateway = Gateway::start(&plans(&upstream, &routes), 0).await;
    assert_eq!(gateway.status("/api/search", "sk_a").await, 200);
    assert_eq!(gateway.status("/api/search", "sk_a").await, 200);
    // Each is /api/search once normalised: the route's budget is spent. (An
    // HTTP client would resolve dot segments itself: these go raw.)
    for spelling in [
        "/api/x/../search",
        "/api/./search",
        "/api/%73earch",
        "/api//search",
    ] {
        let (status, head) = raw_get(gateway.running.address, spelling, "sk_a").await;
        assert_eq!(status, 429, "{spelling}");
        assert!(head.contains("\"search\";q=2"), "{head}");
    }
    // Paths that cannot be made unambiguous are refused.
    for refused in ["/api/a%2Fb", "/api/..%2f..", "/../etc", "/api\\search"] {
        assert_eq!(
            raw_get(gateway.running.address, refused, "sk_a").await.0,
            400,
            "{refused}"
        );
    }
    // The upstream gets the normal form.
    let seen: serde_json::Value = gateway
        .get("/%68eaders?q=1", "sk_b")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(seen["path"], "/headers?q=1");
}

#[tokio::test]
async fn an_upstream_that_stalls_in_a_body_has_the_response_cut_off() {
    let upstream = Upstream::start().await;
    let toml = plans(&upstream, "").replace(
        "[[routes]]",
        "[upstream]\nbody_idle_timeout = \"1s\"\n[[routes]]",
    );
    let gateway = Gateway::start(&toml, 0).await;
    let mut response = gateway.get("/stall", "sk_a").await;
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"first part;");
    // The upstream sends nothing more; after 1 s the gateway cuts the
    // response off, and the client sees the body end in an error (not a
    // clean end, which would pass a truncated body for a whole one).
    let rest = tokio::time::timeout(Duration::from_secs(10), response.chunk())
        .await
        .expect("the gateway cut the stalled body off");
    assert!(rest.is_err(), "the body ended cleanly: {rest:?}");
    // No other test stalls a body on its route "all".
    let metrics = gateway.metrics().await;
    let line = "tollgate_upstream_failures_total{route=\"all\",failure=\"body_stalled\"} 1";
    assert!(
        metrics.lines().any(|metric| metric == line),
        "{line} missing from\n{metrics}"
    );
}

#[tokio::test]
async fn connect_is_refused_with_501_and_not_forwarded() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let mut stream = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    stream
        .write_all(
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\
              Authorization: Bearer sk_a\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = vec![0; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(head, b"HTTP/1.1 501");
    assert_eq!(upstream.requests(), 0);
    // The refusal used no budget: sk_a still has its 5.
    assert_eq!(
        header(&gateway.get("/", "sk_a").await, "x-ratelimit-remaining").as_deref(),
        Some("4")
    );
}

/// The status and head of a GET of `path` sent byte for byte (no client-side
/// cleaning of the path).
async fn raw_get(address: std::net::SocketAddr, path: &str, key: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    (response[9..12].parse().unwrap(), response)
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
    let config = tollgate::serve::ServeConfig::from_file(&path).unwrap();
    let options = tollgate::serve::ServeOptions::new(config, Some(path.clone()));
    let error = tollgate::serve::start(options).await.err().unwrap();
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
async fn a_response_framed_twice_reaches_the_client_by_its_transfer_encoding() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that frames its body both ways (RFC 9112 section 6.3 says
    // the chunked framing wins, and a proxy drops the length).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0; 1024];
                while !head.windows(4).any(|end| end == b"\r\n\r\n") {
                    match connection.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let _ = connection
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\
                          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    let toml = config(&format!(
        "[[routes]]\nprefix = \"/\"\nupstream = \"http://{address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let response = gateway.get("/", "sk_a").await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-length"), None);
    assert_eq!(response.text().await.unwrap(), "hello");
}

#[tokio::test]
async fn a_chunked_get_body_reaches_the_upstream() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter([Ok::<_, std::io::Error>(
        "query",
    )]));
    let response = gateway
        .client
        .get(gateway.url("/echo"))
        .header("authorization", "Bearer sk_a")
        // hyper (under reqwest) sends a GET body of unknown length only when
        // asked to chunk it.
        .header("transfer-encoding", "chunked")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "query");
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
         [[routes]]\nname = \"orders\"\nprefix = \"/orders\"\nupstream = \"http://{0}\"\n\
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
    // /orders: 3 per minute per tenant; a key without a tenant gets 401.
    for key in ["sk_a", "sk_b", "sk_a"] {
        assert_eq!(gateway.status("/orders", key).await, 200, "{key}");
    }
    assert_eq!(gateway.status("/orders", "sk_b").await, 429);
    let untenanted = gateway.get("/orders", "sk_c").await;
    assert_eq!(untenanted.status(), 401);
    let body: serde_json::Value = untenanted.json().await.unwrap();
    assert_eq!(
        body["detail"],
        "orders is rate limited per tenant, and this API key has no tenant"
    );
    // Only the admitted requests reached the upstream: 3 searches, 3 orders.
    assert_eq!(upstream.requests(), 6);
    let metrics = gateway.metrics().await;
    for line in [
        "api_rate_limit_exceeded_total{plugin=\"tollgate\",route=\"search\",key_kind=\"custom\"} 1",
        "api_rate_limit_exceeded_total{plugin=\"tollgate\",route=\"orders\",key_kind=\"tenant\"} 1",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}
