//! `POST /admin/inspect` and `POST /admin/reset` on route budgets (a `route`
//! and the value its budget is kept per), over real HTTP, in memory and on
//! Redis. The budgets: route `rb_tenant` 3 a minute per tenant (a token
//! bucket of 3), route `rb_host` none of its own, so the `[host]` default of
//! 2 a minute per client IP. Expected values by hand: each request takes one
//! token, and no test runs long enough for a token to come back (one per 20 s
//! and per 30 s).

use reqwest::Method;
use serde_json::{Value, json};
use tollgate_test_support::gateway::{self, Gateway};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

fn config(upstream: &Upstream, store: &str, suffix: &str) -> String {
    gateway::config(&format!(
        "{store}\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow_s = 60\n\
         [tenants]\nacme = [\"sk_acme\"]\n\
         [host]\nip = {{ rpm = 2 }}\n\
         [[routes]]\nname = \"rb_tenant{suffix}\"\nprefix = \"/t\"\nupstream = \"http://{0}\"\n\
         rpm = 3\nkey = \"tenant\"\n\
         [[routes]]\nname = \"rb_host{suffix}\"\nprefix = \"/h\"\nupstream = \"http://{0}\"\n",
        upstream.address
    ))
}

async fn call(gateway: &Gateway, path: &str, body: Value) -> (u16, Value) {
    let response = gateway.admin(Method::POST, path, Some(body)).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn route_budgets_are_inspected_and_reset(gateway: &Gateway, suffix: &str) {
    let tenant_route = format!("rb_tenant{suffix}");
    let host_route = format!("rb_host{suffix}");
    // A budget no request has touched: whole, not tracked.
    let (status, fresh) = call(
        gateway,
        "/admin/inspect",
        json!({"route": tenant_route, "tenant": "acme"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        fresh,
        json!({
            "route": tenant_route,
            "key_kind": "tenant",
            "policy": {"algorithm": "token_bucket", "limit": 3, "window_s": 60, "burst": 3},
            "tracked": false,
            "remaining": 3,
            "reset_after_s": 0,
        })
    );
    for _ in 0..2 {
        assert_eq!(gateway.status("/t/x", "sk_acme").await, 200);
    }
    let (_, used) = call(
        gateway,
        "/admin/inspect",
        json!({"route": tenant_route, "tenant": "acme"}),
    )
    .await;
    assert_eq!(
        (&used["tracked"], &used["remaining"]),
        (&json!(true), &json!(1))
    );
    // 2 tokens to refill at one per 20 s: whole again in 40 s (less the
    // time the test took, rounded up).
    assert_eq!(used["reset_after_s"], 40);
    // Inspecting used nothing: one request left, then 429.
    assert_eq!(gateway.status("/t/x", "sk_acme").await, 200);
    assert_eq!(gateway.status("/t/x", "sk_acme").await, 429);
    let (status, reset) = call(
        gateway,
        "/admin/reset",
        json!({"route": tenant_route, "tenant": "acme"}),
    )
    .await;
    assert_eq!((status, reset), (200, json!({"had_state": true})));
    let (_, after) = call(
        gateway,
        "/admin/inspect",
        json!({"route": tenant_route, "tenant": "acme"}),
    )
    .await;
    assert_eq!(
        (&after["tracked"], &after["remaining"]),
        (&json!(false), &json!(3))
    );
    assert_eq!(gateway.status("/t/x", "sk_acme").await, 200);
    // A reset of a whole budget had nothing to drop.
    let (_, again) = call(
        gateway,
        "/admin/reset",
        json!({"route": host_route, "ip": "192.0.2.9"}),
    )
    .await;
    assert_eq!(again, json!({"had_state": false}));

    // The host default per client IP, on the route without a budget.
    assert_eq!(gateway.status("/h/x", "sk_other").await, 200);
    let (status, by_ip) = call(
        gateway,
        "/admin/inspect",
        json!({"route": host_route, "ip": "127.0.0.1"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        (&by_ip["key_kind"], &by_ip["remaining"]),
        (&json!("ip"), &json!(1))
    );

    // Bodies that name no budget get 400 and change nothing.
    for (body, detail) in [
        (
            json!({"route": "nope", "tenant": "acme"}),
            "no route is named nope",
        ),
        (
            json!({"route": tenant_route, "ip": "127.0.0.1"}),
            "keeps its budget per tenant: give tenant",
        ),
        (
            json!({"route": host_route, "key": "sk_acme"}),
            "has no budget per principal (neither its own nor [host]'s)",
        ),
        (
            json!({"route": tenant_route, "tenant": "acme", "ip": "127.0.0.1"}),
            "exactly one of key, tenant, ip and header",
        ),
        (
            json!({"route": host_route, "ip": "not-an-ip"}),
            "ip must be an IPv4 or IPv6 address",
        ),
        (
            json!({"tenant": "acme"}),
            "tenant, ip and header name a route budget: give its route too",
        ),
    ] {
        for path in ["/admin/inspect", "/admin/reset"] {
            let (status, problem) = call(gateway, path, body.clone()).await;
            assert_eq!(status, 400, "{path} {body}");
            let text = problem["detail"].as_str().unwrap_or_default();
            assert!(text.contains(detail), "{path} {body}: {text}");
        }
    }
    // The plan's calls are unchanged.
    let (status, plan) = call(gateway, "/admin/inspect", json!({"key": "sk_acme"})).await;
    assert_eq!((status, &plan["remaining"]), (200, &json!(96)));
}

#[tokio::test]
async fn route_budgets_in_memory() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "", "_memory"), 6_000_000_000).await;
    route_budgets_are_inspected_and_reset(&gateway, "_memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn route_budgets_on_redis() {
    let url = redis_support::require_redis_url();
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix("admin-route-budget");
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"5s\"\ntime = \"local\"\n"
    );
    let gateway = Gateway::start(&config(&upstream, &store, "_redis"), 0).await;
    route_budgets_are_inspected_and_reset(&gateway, "_redis").await;
}
